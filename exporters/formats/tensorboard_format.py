"""A run's metrics as TensorBoard event files (``tensorboard --logdir PATH`` shows them).

Verification reads the files back with TensorBoard's own ``EventAccumulator`` and requires every
metric row of the run to be there with its step and value.
"""

from __future__ import annotations

import math
import shutil
from collections import defaultdict
from pathlib import Path

from ..options import ExportOptions
from ..registry import Format, Written, export_format
from ..report import Check
from ..source import ExportSource


def metric_series(rows: list[tuple[int, str, float | None]]) -> dict[str, list[tuple[int, float]]]:
    """(step, name, value) rows -> per metric name, its (step, value) points in step order; empty
    values are skipped, and a step written twice (a resumed run) keeps its last value."""
    by_step: dict[str, dict[int, float]] = defaultdict(dict)
    for step, name, value in rows:
        if value is not None and math.isfinite(value):
            by_step[name][int(step)] = float(value)
    return {name: sorted(points.items()) for name, points in by_step.items()}


def tag(name: str) -> str:
    """``train_loss`` -> ``train/loss``: TensorBoard groups the charts by the part before the slash."""
    head, _, rest = name.partition("_")
    return f"{head}/{rest}" if rest and head in ("train", "val", "test") else name


@export_format
class TensorBoardFormat(Format):
    name = "tensorboard"
    title = "TensorBoard"
    suffix = ""
    needs_run = True
    menu_text = "&TensorBoard Logs"
    tip = "The current run's metrics as TensorBoard event files"
    order = 60
    requires = ("tensorboard",)
    install_hint = "Install it with: pip install tensorboard"

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        from torch.utils.tensorboard import SummaryWriter

        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        series = metric_series(source.metrics or [])
        writer = SummaryWriter(log_dir=str(path))
        try:
            for name, points in series.items():
                for step, value in points:
                    writer.add_scalar(tag(name), value, global_step=step)
            writer.add_text("run", source.description)
        finally:
            writer.close()
        count = sum(len(p) for p in series.values())
        return Written([path], {"scalars": len(series), "points": count},
                       [f"view with: tensorboard --logdir {path}"])

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(str(written.files[0]), size_guidance={"scalars": 0})
        acc.Reload()
        tags = set(acc.Tags().get("scalars", []))
        problems = []
        for name, points in metric_series(source.metrics or []).items():
            if tag(name) not in tags:
                problems.append(f"{tag(name)} is missing")
                continue
            read = [(e.step, e.value) for e in acc.Scalars(tag(name))]
            if len(read) != len(points) or any(s != rs or abs(v - rv) > 1e-6 * max(1.0, abs(v))
                                               for (s, v), (rs, rv) in zip(points, read, strict=False)):
                problems.append(f"{tag(name)}: {len(read)} points read back, {len(points)} written")
        detail = "; ".join(problems) if problems else f"{len(tags)} scalar series read back with TensorBoard"
        return [Check("read back", not problems, detail)], {"tags_read": len(tags)}
