"""Training commands: ``train``, ``runs`` and ``show``.

``train`` writes a run spec and runs the worker (``python -m trainer run``) as a child process,
exactly as the studio does, drawing a progress bar from its events; Ctrl-C stops the run cleanly
(the worker checkpoints first; a double press is one request, never a traceback). ``runs`` and
``show`` only read: a store that does not exist is said, not created.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer.protocol import events as ev
from trainer.run_outcome import default_run_name
from trainer.spec import COMPILE_MODES, PRECISIONS, SCHEMA_VERSION, STRATEGIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a graph in the worker process, with a progress bar")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--data", default="digits", help="'digits' (embedded) or a dataset file/folder")
    p.add_argument("--epochs", type=int, help="epochs (default 10)")
    p.add_argument("--batch-size", type=int, help="batch size (default 64)")
    p.add_argument("--lr", type=float, help="peak learning rate (default 0.003)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--precision", choices=PRECISIONS, help="fp32 (default), bf16, fp16, fp8")
    p.add_argument("--compile", choices=COMPILE_MODES, help="torch.compile mode (default off)")
    p.add_argument("--seed", type=int, help="seed for the split, the weights and the batches (default 0)")
    p.add_argument("--distributed", choices=STRATEGIES, help="data parallel through torchrun: ddp or fsdp2 "
                   "(default none: one process)")
    p.add_argument("--nproc-per-node", type=_at_least_one, help="processes (ranks) under torchrun (default 1; on the CPU "
                   "they share its cores)")
    p.add_argument("--db", help="run store URL (default: $TORCH_STUDIO_DB or the user data directory)")
    p.add_argument("--json-events", action="store_true", help="print the worker's JSON events instead of a bar")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("runs", help="list the runs in the run store")
    p.add_argument("--db", help="run store URL")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="one run: spec, final metrics, per-class figures, checkpoints")
    p.add_argument("run_id", type=int)
    p.add_argument("--db", help="run store URL")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_show)


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number from 1 (argparse names the option in its one-line refusal)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The run spec for the command line's options (unset options keep the spec's defaults)."""
    data = args.data if args.data == "digits" else str(Path(args.data).expanduser().resolve())
    spec: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": default_run_name(args.graph),
                            "model": {"graph": str(Path(args.graph).expanduser().resolve())},
                            "data": {"dataset": data}, "device": args.device, "train": {}, "optim": {},
                            "precision": {}}
    for value, section, key in ((args.epochs, "train", "epochs"), (args.batch_size, "train", "batch_size"),
                                (args.seed, "train", "seed"), (args.lr, "optim", "lr"),
                                (args.precision, "precision", "dtype"), (args.compile, "precision", "compile")):
        if value is not None:
            spec[section][key] = value
    strategy, nproc = getattr(args, "distributed", None), getattr(args, "nproc_per_node", None)
    if strategy or nproc is not None:   # --nproc-per-node 0 goes to the spec's check, which refuses it
        spec["distributed"] = {"strategy": strategy or "none",
                               **({"nproc_per_node": nproc} if nproc is not None else {})}
    return spec


def cmd_train(args: argparse.Namespace) -> int:
    from trainer.protocol.client import WorkerClient

    with tempfile.TemporaryDirectory(prefix="torch-studio-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(build_spec(args), indent=1), encoding="utf-8")
        worker = WorkerClient.run(spec_path, db=args.db)
        bar = Progress(sys.stderr)
        last: ev.Event | None = None
        with stopping_on_ctrl_c(worker):
            for event in worker.events():
                last = event
                if args.json_events:
                    print(event.to_json(), flush=True)
                else:
                    bar.update(event)
            code = worker.wait()
    if not args.json_events:
        bar.done()
        print_outcome(last, worker.stderr)
    return code


@contextlib.contextmanager
def stopping_on_ctrl_c(worker: Any, grace_s: float = 2.0) -> Iterator[None]:
    """Ctrl-C stops the run cleanly (the worker checkpoints, tests and ends; its events keep coming).
    More presses within ``grace_s`` are the same request (a double press); one after that kills the
    worker (its run reads interrupted, resumable from its last checkpoint). Never a KeyboardInterrupt."""
    first: list[float] = []

    def handler(_signum: int, _frame: object) -> None:
        if not first:
            first.append(time.monotonic())
            print(f"\nstopping: the run saves a checkpoint first (Ctrl-C again after {grace_s:.0f} s kills it)",
                  file=sys.stderr, flush=True)
            worker.terminate()      # a terminal sent it SIGINT too; a `kill -INT` of this process did not
        elif time.monotonic() - first[0] > grace_s:
            print("killing the worker", file=sys.stderr, flush=True)
            worker.kill()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def print_outcome(last: ev.Event | None, stderr: str) -> None:
    """The run's result from its last event: a finished run's figures, a failure's message, or the
    worker's last stderr when it ended without saying why."""
    if isinstance(last, ev.Finished):
        print(f"run {last.run_id} {last.status} after {last.epoch} epoch(s), {last.step} steps, "
              f"{last.seconds or 0:.1f} s of training")
        if last.test_accuracy is not None:
            loss = "" if last.test_loss is None else f"  test loss {last.test_loss:.4f}"
            print(f"test accuracy {last.test_accuracy * 100:.2f}%{loss}")
        if last.best is not None and last.best.value is not None:
            print(f"best {last.best.metric} {last.best.value:.4f} at epoch {last.best.epoch}")
    elif isinstance(last, ev.Failed):
        print(f"error: {last.message}", file=sys.stderr)
    else:
        print("error: the worker ended without a result\n" + stderr[-2000:], file=sys.stderr)


class Progress:
    """One redrawn line on a terminal (one line per epoch otherwise)."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.tty = stream, stream.isatty()
        self.epochs, self.steps = 0, 1

    def update(self, e: ev.Event) -> None:
        if isinstance(e, ev.RunStarted):
            self.epochs, self.steps = e.epochs, max(e.steps_per_epoch, 1)
            self.line(f"run {e.run_id} on {e.device}: {e.params:,} parameters, {e.train_size} train / "
                      f"{e.val_size} val / {e.test_size} test samples", end="\n")
        elif isinstance(e, ev.Metrics) and self.tty:
            done = (e.step - (e.epoch - 1) * self.steps) / self.steps
            fill = int(24 * min(done, 1.0))
            self.line(f"epoch {e.epoch}/{self.epochs} [{'#' * fill}{'.' * (24 - fill)}] loss {_num(e.loss, '.4f')} "
                      f"acc {_pct(e.accuracy, '5.1f')} lr {_num(e.lr, '.2e')} {_num(e.samples_per_s, ',.0f')} samples/s")
        elif isinstance(e, ev.EpochEnd):
            val = "" if e.val_accuracy is None else (f", val loss {_num(e.val_loss, '.4f')} acc "
                                                     f"{_pct(e.val_accuracy, '.2f')}")
            self.line(f"epoch {e.epoch}/{self.epochs}: train loss {_num(e.train_loss, '.4f')} acc "
                      f"{_pct(e.train_accuracy, '.2f')}{val} ({_num(e.seconds, '.1f')} s)", end="\n")
        elif isinstance(e, ev.CompileDone):
            self.line(f"compiled ({e.mode}) in {_num(e.seconds, '.1f')} s", end="\n")
        elif isinstance(e, ev.State):
            self.line(f"{e.state} ({e.reason})", end="\n")

    def line(self, text: str, end: str = "") -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + end)
        elif end:
            self.stream.write(text + end)
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def _num(v: float | None, fmt: str) -> str:
    """A figure, or '-' where the worker sent none (a NaN loss travels as null)."""
    return "-" if v is None else format(v, fmt)


def _pct(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v * 100, fmt) + "%"


# ------------------------------------------------------------------ runs / show
def open_store(url: str | None):  # noqa: ANN201 - trainer.store.runs.RunStore
    from trainer.store.runs import RunStore, StoreError

    try:
        return RunStore(url, create=False)   # reading: a store that is not there is said, never made
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_runs(args: argparse.Namespace) -> int:
    from trainer.store.runs import StoreError, run_to_dict

    try:
        runs = open_store(args.db).runs()   # reading only: works on a full disk and on read-only media
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        rows = [{k: v for k, v in run_to_dict(r).items() if k not in ("spec", "graph")} for r in runs]
        print(json.dumps(rows, indent=1))
        return 0
    if not runs:
        print("no runs yet")
        return 0
    print(f"{'id':>4}  {'name':<20} {'status':<13} {'epoch':>5} {'test acc':>8} {'best':>18}  {'device':<7} started")
    for r in runs:
        test = (r.summary or {}).get("test_accuracy")
        best = f"{r.best_metric} {r.best_value:.4f}" if r.best_value is not None else ""
        started = r.started_at.strftime("%Y-%m-%d %H:%M") if r.started_at else ""
        print(f"{r.id:>4}  {r.name[:20]:<20} {r.status:<13} {r.epoch:>5} "
              f"{'' if test is None else f'{test * 100:.2f}%':>8} {best:>18}  {r.device:<7} {started}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from trainer.store.runs import StoreError, run_to_dict

    store = open_store(args.db)
    try:                      # a damaged store fails on any read: one error line, never a traceback
        run = store.run(args.run_id)
        final = {name: {"step": step, "value": value} for step, name, value in store.metrics(run.id)}
        checkpoints = [{"kind": c.kind, "path": c.path, "step": c.step, "epoch": c.epoch, "metric": c.metric}
                       for c in store.checkpoints(run.id)]
        artifacts = [{"kind": a.kind, "path": a.path, "meta": a.meta} for a in store.artifacts(run.id)]
        epochs = store.epoch_reports(run.id) if args.json else []
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**run_to_dict(run), "final_metrics": final, "checkpoints": checkpoints,
                          "artifacts": artifacts, "epochs": epochs}, indent=1))
        return 0
    print_run(run, final, checkpoints, artifacts)
    return 0


def print_run(run: Any, final: dict[str, Any], checkpoints: list[dict], artifacts: list[dict]) -> None:
    spec = run.spec
    print(f"run {run.id}: {run.name}  [{run.status}]")
    print(f"  device {run.device}, {run.params:,} parameters, graph {run.graph_hash[:12]}, "
          f"epoch {run.epoch}, step {run.step}")
    print(f"  started {run.started_at}  ended {run.ended_at or '-'}  ({run.host}, pid {run.pid})")
    o, t = spec.get("optim", {}), spec.get("train", {})
    print(f"  data {spec.get('data', {}).get('dataset')}, {o.get('name')} lr {o.get('lr')}, "
          f"{spec.get('schedule', {}).get('name')} schedule, {t.get('epochs')} epochs x batch {t.get('batch_size')}, "
          f"{spec.get('precision', {}).get('dtype')}, compile {spec.get('precision', {}).get('compile')}")
    if run.error:      # a pruned run's "error" is the sweep's reason: the rule and the epoch
        print(f"  {'pruned' if run.status == 'pruned' else 'error (' + (run.error_kind or 'unknown') + ')'}: {run.error}")
        tb = (run.summary or {}).get("traceback") or ""
        if tb:     # where it happened: the traceback's last lines (all of it in --json)
            print("  traceback (last lines):\n" + "\n".join(f"    {line}" for line in tb.strip().splitlines()[-6:]))
    for name in ("epoch/train_loss", "epoch/train_accuracy", "val/loss", "val/accuracy", "test/loss", "test/accuracy"):
        if name in final and final[name]["value"] is not None:
            print(f"  {name:<22} {final[name]['value']:.4f}")
    summary = run.summary or {}
    if summary.get("test_per_class"):
        pc = summary["test_per_class"]
        print("  test per class:   precision  recall     f1  support")
        classes = (spec.get("model", {}).get("graph") or {}).get("num_classes", len(pc["f1"]))
        for i in range(min(classes, len(pc["f1"]))):
            print(f"    class {i:<10} {pc['precision'][i]:>8.3f} {pc['recall'][i]:>7.3f} {pc['f1'][i]:>6.3f} "
                  f"{pc['support'][i]:>8}")
        print("  test confusion (rows true, columns predicted):")
        for row in summary["test_confusion"]:
            print("    " + " ".join(f"{v:>4}" for v in row))
    latest = {c["kind"]: c for c in checkpoints}
    for c in latest.values():
        print(f"  checkpoint {c['kind']:<5} epoch {c['epoch']} step {c['step']}: {c['path']}")
    for a in artifacts:
        print(f"  artifact {a['kind']}: {a['path']}")
