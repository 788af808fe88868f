"""The run store: runs, metrics, checkpoints and artifacts in a SQLAlchemy database."""
