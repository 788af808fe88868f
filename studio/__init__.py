"""Torch Studio: the desktop app shell (composition root, main window, docks) and the CLI."""

__version__ = "0.1.0"
