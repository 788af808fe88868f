"""The export formats, one module each; importing this package registers every module in it."""

import importlib

from ..registry import format_files

for _path in format_files():
    importlib.import_module(f"{__name__}.{_path.stem}")
