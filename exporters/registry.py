"""The export format registry: one module per format, registered with :func:`export_format`.

A format is a class with a ``write`` step (make the files) and a ``verify`` step (prove the files
compute what the PyTorch model computes), and it describes itself: the Export menu's text, tip and
shortcut, the toolbar, the report figures and the CLI's help all come from its class attributes.
Adding a format is one new file in ``exporters/formats``, found there by name.

Menus are built before torch is imported (the studio starts without it), so :func:`describe_formats`
reads those attributes from the format files' source, without importing them; a test checks that it
agrees with the imported classes.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from graph_editor.model.registry import Registry

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


# (metric, label) that every verified model export reports; a format adds its own in ``figures``.
COMMON_FIGURES: tuple[tuple[str, str], ...] = (
    ("max_abs_diff", "Max abs difference"), ("top1_agreement", "Top-1 agreement"),
    ("verify_batch", "Verified on batch"),
)
FILE_FIGURE = ("file_bytes", "File size")


class Format:
    """Base class of an export format; subclasses set the class attributes and both steps.

    The attributes that menus and the CLI read (``name`` to ``order``) must be plain literals:
    :func:`describe_formats` reads them from the source without importing the format.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    suffix: ClassVar[str] = ""          # "" for a folder (TensorBoard logs)
    needs_run: ClassVar[bool] = False   # True when it exports a run's data, not a model
    menu_text: ClassVar[str] = ""       # the Export menu's entry, "&" before its accelerator key
    tip: ClassVar[str] = ""             # one line: the menu's status tip and the CLI's help
    shortcut: ClassVar[str] = ""        # a QKeySequence string, e.g. "Ctrl+E"; "" for none
    toolbar: ClassVar[bool] = False     # also a one-click button on the main toolbar
    order: ClassVar[int] = 100          # place in the Export menu (smaller first)
    requires: ClassVar[tuple[str, ...]] = ()  # importable modules it needs
    install_hint: ClassVar[str] = ""
    figures: ClassVar[tuple[tuple[str, str], ...]] = ()  # (metric, label) of its own, after the common ones
    latency: ClassVar[str] = ""         # the metric with the exported model's latency in ms, shown vs eager

    @classmethod
    def report_figures(cls) -> tuple[tuple[str, str], ...]:
        """Every (metric, label) the export dialog shows for this format, in order (latency apart)."""
        return (*COMMON_FIGURES, *cls.figures, FILE_FIGURE)

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


_FORMATS: Registry[str, Format] = Registry("an export format")


def export_format(cls: type[Format]) -> type[Format]:
    """Class decorator: register a format under ``cls.name``; a second one of that name, or of a
    shortcut another format holds, is refused, and so is a format without its menu text and tip."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no format name")
    if cls.name in _FORMATS:     # refused before its other checks: a second format is the error to name
        _FORMATS.add(cls.name, cls())
    for attr in ("title", "menu_text", "tip"):
        if not getattr(cls, attr):
            raise ValueError(f"export format {cls.name!r} ({cls.__name__}) sets no {attr}")
    holder = next((f for f in _FORMATS.values() if cls.shortcut and f.shortcut == cls.shortcut), None)
    if holder is not None:
        raise ValueError(f"export format {cls.name!r}: the shortcut {cls.shortcut} is taken by {holder.name!r}")
    _FORMATS.add(cls.name, cls())
    return cls


def _ensure_loaded() -> None:
    from . import formats  # noqa: F401  (importing the package registers every format)


# ------------------------------------------------------------------ described without importing
_DESCRIBED = ("name", "title", "suffix", "needs_run", "menu_text", "tip", "shortcut", "toolbar", "order")
FORMATS_DIR = Path(__file__).with_name("formats")


@dataclass(frozen=True)
class FormatInfo:
    """What menus, the toolbar and the CLI show for a format, known without importing it."""

    name: str
    title: str
    menu_text: str
    tip: str
    suffix: str = ""
    needs_run: bool = False
    shortcut: str = ""
    toolbar: bool = False
    order: int = 100


def describe_formats() -> list[FormatInfo]:
    """Every format in ``exporters/formats``, in menu order, read from the class decorated with
    ``@export_format`` in each file: no import, so no torch."""
    infos = [info for path in format_files() if (info := _described(path)) is not None]
    return sorted(infos, key=lambda i: (i.order, i.name))


def format_files() -> list[Path]:
    """The format modules: every ``exporters/formats/*.py`` not starting with an underscore."""
    return sorted(p for p in FORMATS_DIR.glob("*.py") if not p.name.startswith("_"))


def format_help() -> str:
    """The CLI's list of formats: ``onnx (ONNX), pt2 (torch.export), ...``."""
    return ", ".join(f"{i.name} ({i.title})" for i in describe_formats())


def _described(path: Path) -> FormatInfo | None:
    """``_describe`` once per version of the file (every main window's menus read the formats)."""
    stat = path.stat()
    return _describe(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _describe(path: Path, mtime_ns: int, size: int) -> FormatInfo | None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(_is_register(d) for d in node.decorator_list):
            values: dict[str, Any] = {}
            for stmt in node.body:
                for target, value in _assignments(stmt):
                    if target in _DESCRIBED:
                        try:
                            values[target] = ast.literal_eval(value)
                        except ValueError:
                            raise ValueError(f"{path.name}: {node.name}.{target} must be a plain literal "
                                             "(menus read it without importing the format)") from None
            missing = [k for k in ("name", "title", "menu_text", "tip") if not values.get(k)]
            if missing:
                raise ValueError(f"{path.name}: {node.name} sets no {', '.join(missing)}")
            return FormatInfo(**values)
    return None


def _is_register(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Name) and decorator.id == "export_format"


def _assignments(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [(stmt.target.id, stmt.value)]
    if isinstance(stmt, ast.Assign):
        out: list[tuple[str, ast.expr]] = []
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                out.append((target.id, stmt.value))
            elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                out += [(t.id, v) for t, v in zip(target.elts, stmt.value.elts, strict=True)
                        if isinstance(t, ast.Name)]
        return out
    return []


def get_format(name: str) -> Format:
    """The registered format ``name``; an ExportError lists the known ones otherwise."""
    _ensure_loaded()
    try:
        return _FORMATS[name]
    except KeyError:
        from .errors import ExportError

        raise ExportError(f"unknown export format '{name}'; known: {', '.join(sorted(_FORMATS))}") from None


def format_names() -> list[str]:
    """Every registered format name, in menu order."""
    _ensure_loaded()
    return [f.name for f in sorted(_FORMATS.values(), key=lambda f: (f.order, f.name))]
