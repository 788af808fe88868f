"""The main window's docks, one module each; every one can be previewed alone with
``python -m studio.docks.<name>``."""
