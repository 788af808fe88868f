"""The export format registry: one module per format, registered with :func:`export_format`.

A format is a class with a ``write`` step (make the files) and a ``verify`` step (prove the files
compute what the PyTorch model computes). Adding a format is one new file in ``exporters/formats``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from .errors import FormatUnavailable

if TYPE_CHECKING:
    from .options import ExportOptions
    from .report import Check
    from .source import ExportSource


@dataclass
class Written:
    """What a format's ``write`` made: the files (main file first), figures and notes for the report,
    and in-memory results (``keep``) its ``verify`` step compares the files with."""

    files: list[Path]
    metrics: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    keep: dict[str, object] = field(default_factory=dict)


class Format:
    """Base class of an export format; subclasses set the class attributes and both steps."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    suffix: ClassVar[str] = ""          # "" for a folder (TensorBoard logs)
    needs_run: ClassVar[bool] = False   # True when it exports a run's data, not a model
    requires: ClassVar[tuple[str, ...]] = ()  # importable modules it needs
    install_hint: ClassVar[str] = ""

    def missing(self) -> str | None:
        """Why this format cannot run here (a missing package and how to install it), or None."""
        absent = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not absent:
            return None
        return f"the {self.title} export needs {', '.join(absent)}, which is not installed. {self.install_hint}".strip()

    def ensure_available(self) -> None:
        reason = self.missing()
        if reason:
            raise FormatUnavailable(reason)

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        raise FormatUnavailable(f"the format {self.name} has no writer")

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        return [], {}


_FORMATS: dict[str, Format] = {}


def export_format(cls: type[Format]) -> type[Format]:
    """Class decorator: register a format under ``cls.name``; a second one of that name is refused."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no format name")
    if cls.name in _FORMATS:
        raise ValueError(f"an export format {cls.name!r} is already registered "
                         f"({type(_FORMATS[cls.name]).__name__})")
    _FORMATS[cls.name] = cls()
    return cls


def _ensure_loaded() -> None:
    from . import formats  # noqa: F401  (importing the package registers every format)


def get_format(name: str) -> Format:
    """The registered format ``name``; an ExportError lists the known ones otherwise."""
    _ensure_loaded()
    try:
        return _FORMATS[name]
    except KeyError:
        from .errors import ExportError

        raise ExportError(f"unknown export format '{name}'; known: {', '.join(sorted(_FORMATS))}") from None


def format_names() -> list[str]:
    """Every registered format name, in registration order."""
    _ensure_loaded()
    return list(_FORMATS)
