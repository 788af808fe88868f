"""``export()``: write a format's files, prove them, keep the report, record it with the run.

A failed check is a failed export: the report says which check failed and why, and the main file
is renamed ``<name>.unverified`` so nothing at the requested path looks like a good export.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .errors import ExportError
from .locate import short
from .options import ExportOptions
from .registry import Format, Written, get_format
from .report import Check, ExportReport, files_size
from .source import ExportSource

UNVERIFIED = ".unverified"


def output_path(form: Format, source: ExportSource, output: str | Path) -> Path:
    """The file to write: ``output`` itself, or ``<output>/<model name><suffix>`` for a folder (an existing
    folder, a path ending in a separator, or a path without a suffix for a format that has one)."""
    out = Path(output).expanduser()
    if form.suffix and (out.is_dir() or str(output).endswith(("/", os.sep)) or not out.suffix):
        return out / f"{source.name}{form.suffix}"
    return out


def export(source: ExportSource, fmt: str, output: str | Path, options: ExportOptions | None = None,
           progress: Callable[[str], None] | None = None) -> ExportReport:
    """Export ``source`` as ``fmt`` to ``output`` and verify it (unless ``options.verify`` is False).

    Returns the report (also saved beside the output, and added to the run's artifacts for a run).
    Raises ExportError when nothing can be written (naming the node a format cannot express).
    """
    options = options or ExportOptions()
    say = progress or (lambda _msg: None)
    form = get_format(fmt)
    form.ensure_available()
    if form.needs_run and source.metrics is None:
        raise ExportError(f"the {form.title} format exports a run's metrics: give a run id, not a graph file")
    path = output_path(form, source, output)
    say(f"writing {form.title} to {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = form.write(source, path, options)
    except OSError as exc:  # a read-only folder, a file where a folder should be, a full disk
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    report = ExportReport(format=fmt, path=str(written.files[0]), source=source.description,
                          files=[str(f) for f in written.files], metrics=dict(written.metrics),
                          notes=[*source.notes, *written.notes], verified=options.verify)
    report.metrics["file_bytes"] = files_size(written.files)
    if options.verify:
        say(f"verifying the {form.title} export")
        report.checks, figures = _verify(form, source, written, options)
        report.metrics.update(figures)
    else:
        report.notes.append("verification skipped (--no-verify): nothing proves this file matches PyTorch")
    if not report.ok:
        _set_aside(report, written)
    if source.run_id is not None:
        _record_artifact(source, source.run_id, report, path)
    report.save(path)
    return report


def _verify(form: Format, source: ExportSource, written: Written, options: ExportOptions,
            ) -> tuple[list[Check], dict[str, object]]:
    try:
        checks, figures = form.verify(source, written, options)
    except Exception as exc:  # any failure of the proof is a failed check, reported, never a traceback
        return [Check("verification", False, f"{type(exc).__name__}: {short(exc)}")], {}
    if not checks:
        checks = [Check("verification", False, f"the {form.title} format made no checks")]
    return checks, figures


def _set_aside(report: ExportReport, written: Written) -> None:
    main = written.files[0]
    if not main.exists():
        return
    aside = main.with_name(main.name + UNVERIFIED)
    if aside.is_dir():
        import shutil

        shutil.rmtree(aside)
    os.replace(main, aside)
    report.files = [str(aside) if f == str(main) else f for f in report.files]
    report.path = str(aside)
    report.notes.append(f"a check failed: the file was renamed to {aside.name} so it is not mistaken for a "
                        "verified export")


def _record_artifact(source: ExportSource, run_id: int, report: ExportReport, path: Path) -> None:
    """Add the export to the run's artifacts; a store that cannot take it (read-only, gone, full) leaves
    the verified files as they are and a note in the report saying the export is not recorded."""
    from trainer.store.runs import RunStore, StoreError

    try:
        store = RunStore(source.store_url, create=False)
    except StoreError as exc:
        report.notes.append(f"not recorded with run {run_id}: {exc}")
        return
    try:
        meta = {"ok": report.ok, "verified": report.verified, "metrics": report.metrics,
                "report": str(path.with_name(path.name + ".report.json")), "files": report.files,
                "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in report.checks]}
        artifact = store.add_artifact(run_id, f"export.{report.format}", report.path, meta)
        report.metrics["artifact_id"] = artifact
    except StoreError as exc:
        report.notes.append(f"not recorded with run {run_id}: {exc}")
    finally:
        store.close()
