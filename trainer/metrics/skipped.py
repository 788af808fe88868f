"""Files of a dataset on disk that could not be decoded: skipped by the loaders, reported here.

Each newly skipped file becomes one line of the run's ``skipped_files.tsv`` (recorded once as the
run's ``skipped_files`` artifact), the running count the metric ``data/skipped_files``, and a
``skipped_files`` event; all on the recorder thread, never failing the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..protocol import events as ev
from ..store.runs import RunStore
from .recorder import Recorder

SHOWN = 20   # files named in one event


class Job(Protocol):
    """What reporting needs of a run in progress (:class:`trainer.job.Job` has it)."""

    loaders: dict[str, Any]
    store: RunStore
    emitter: ev.Emitter
    run_id: int
    run_dir: Path
    recorder: Recorder
    step: int


def watch(job: Job) -> None:
    """Have every loader of files report its skipped files to the run."""
    for name, loader in job.loaders.items():
        if hasattr(loader, "on_skip"):
            loader.on_skip = lambda new, split=name: _report(job, split, new)


def _report(job: Job, split: str, new: list[tuple[str, str]]) -> None:
    step = job.step
    total = sum(len(getattr(loader, "skipped", {})) for loader in job.loaders.values())
    path = job.run_dir / "skipped_files.tsv"

    def write() -> None:
        first = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.writelines(f"{split}\t{p}\t{why}\n" for p, why in new)
        if first:
            job.store.add_artifact(job.run_id, "skipped_files", str(path))
        job.store.add_metrics(job.run_id, [(step, "data/skipped_files", float(total))])
        job.emitter.emit(ev.SkippedFiles(step=step, split=split, files=[list(f) for f in new[:SHOWN]], count=total))

    job.recorder.submit(write)
