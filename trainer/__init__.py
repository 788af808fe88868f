"""The training side of Torch Studio: run specs, datasets, the loop, the worker, the run store."""
