"""Every architecture family of timm through the importer (issue 23): nobody chose this list.

``python tools/import_walk.py --timm`` lands here. Each family of ``timm.list_modules()`` is walked with
its smallest variant by parameter count (counted on the meta device: no memory, no initialisation, a
tenth of a second a variant; variants are counted smallest-named first until the family's are all
counted or a few seconds are spent). A family whose every variant is over 100M parameters is walked
with its smallest all the same, and marked so: the 30 s import goal is for models up to 100M.

The walk is resumable: each choice and each outcome is one JSON line in ``--results`` as soon as it
is known, and a walk started again with the same file skips what it already holds (a killed walk
continues where it stopped). ``--per-model-timeout`` ends a model that runs too long (a failure saying
so), so one model cannot stall the rest.
"""

from __future__ import annotations

import json
import re
import signal
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import import_walk as walk
import torch

MAX_PARAMS = 100_000_000
COUNT_BUDGET_S = 4.0  # seconds of meta counting per family, smallest-named variants first
# Words that mark timm's small variants, smallest first
_SIZES = ("pico", "femto", "atto", "zepto", "nano", "xxs", "xxsmall", "tiny", "xs", "xsmall", "mini", "small", "lite",
          "_s", "050", "075", "100", "b0", "18", "base")


def size_rank(name: str) -> tuple[int, int, int, str]:
    """Smallest-looking first: a size word, then the smallest number in the name, then the shortest."""
    found = [i for i, word in enumerate(_SIZES) if word in name]
    numbers = [int(n) for n in re.findall(r"\d+", name)]
    return (min(found) if found else len(_SIZES), min(numbers) if numbers else 0, len(name), name)


def count_on_meta(name: str) -> int:
    """``name``'s parameter count, its model built on the meta device."""
    return sum(p.numel() for p in walk.build_without_weights(walk.Case("timm", name, (3, 224, 224))).parameters())


def smallest_variant(family: str, budget_s: float = COUNT_BUDGET_S) -> tuple[str, int] | None:
    """The family's variant with the fewest parameters among those counted within ``budget_s``."""
    import timm

    best: tuple[str, int] | None = None
    start = time.perf_counter()
    # timm's test_* models are tiny stand-ins for its own unit tests, no variant anyone uses
    for name in sorted((n for n in timm.list_models(module=family) if not n.startswith("test_")), key=size_rank):
        if best is not None and time.perf_counter() - start > budget_s:
            break
        try:
            count = count_on_meta(name)
        except Exception:  # a variant that cannot be built here (needs a download, a GPU kernel)
            continue
        if best is None or count < best[1]:
            best = (name, count)
    return best


def family_case(family: str, name: str) -> walk.Case:
    import timm

    cfg = timm.get_pretrained_cfg(name)
    size = tuple(cfg.input_size) if cfg is not None and cfg.input_size else (3, 224, 224)
    return walk.Case("timm", name, (int(size[0]), int(size[1]), int(size[2])), family)


class Results:
    """The walk's JSON-lines file: choices (family -> model, parameters) and outcomes, appended as known."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.choices: dict[str, dict[str, Any]] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by a kill
                    continue
                book = self.choices if record.get("kind") == "choice" else self.outcomes
                book[record["family"] if record.get("kind") == "choice" else record["name"]] = record

    def add(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if record["kind"] == "choice":
            self.choices[record["family"]] = record
        else:
            self.outcomes[record["name"]] = record


def choose(results: Results, families: list[str] | None = None) -> list[tuple[walk.Case, int]]:
    """Each family's case and parameter count, smallest first; counted once, then read from ``results``."""
    import timm

    chosen = []
    for family in families or timm.list_modules():
        if family not in results.choices:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                best = smallest_variant(family)
            results.add({"kind": "choice", "family": family, "name": best[0] if best else None,
                         "params": best[1] if best else None})
        record = results.choices[family]
        if record["name"]:
            chosen.append((family_case(family, record["name"]), int(record["params"])))
    return sorted(chosen, key=lambda c: c[1])


CHOICES = Path(__file__).with_name("timm_families.json")  # the walk's choices, for the tests


def write_choices(results: Results, path: Path = CHOICES) -> None:
    """The chosen model of every family as ``{family: [model, parameters]}`` (null: none could be built)."""
    book = {f: [r["name"], r["params"]] for f, r in sorted(results.choices.items())}
    lines = [f" {json.dumps(f)}: {json.dumps(v)}" for f, v in book.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def chosen_cases(path: Path = CHOICES) -> list[walk.Case]:
    """The cases of :data:`CHOICES`, smallest first (no model is counted: the choice was made by the walk)."""
    book = json.loads(path.read_text(encoding="utf-8"))
    return [family_case(f, name) for f, (name, params) in sorted(book.items(), key=lambda kv: kv[1][1] or 0) if name]


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """TimeoutError out of whatever runs past ``seconds`` (0: no limit)."""
    if seconds <= 0:
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"over the walk's limit of {seconds} s a model")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def walk_families(results: Results, *, onnx: bool, timeout: int, only: list[str] | None = None,
                  largest_first: bool = False, retry_failed: bool = False) -> list[dict[str, Any]]:
    """Walk every chosen family not yet in ``results`` (or whose record lacks the ONNX proof asked for),
    smallest first (``largest_first``: a second walk on the same file, from the other end)."""
    rows = []
    chosen = choose(results)
    for case, params in reversed(chosen) if largest_first else chosen:
        if only and case.name not in only and case.family not in only:
            continue
        done = results.outcomes.get(case.name)
        if done is None or (onnx and not done["onnx"] and done["ok"]) or (retry_failed and not done["ok"]):
            with warnings.catch_warnings(), time_limit(timeout):
                warnings.simplefilter("ignore")
                outcome = walk.walk_one(case, onnx=onnx, strict=False)
            done = {"kind": "outcome", "family": case.family, "name": case.name, "params": params,
                    "ok": outcome.ok, "programs": outcome.programs, "onnx": onnx and outcome.ok,
                    "import_s": round(outcome.import_s, 2), "import_cpu_s": round(outcome.import_cpu_s, 2), "total_s": round(outcome.total_s, 2),
                    "onnx_cpu_s": round(outcome.onnx_cpu_s, 2),
                    "cause": outcome.cause, "checks": outcome.checks, "load": round(_load(), 1),
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "torch": torch.__version__}
            results.add(done)
        rows.append(done)
        print(format_row(done), flush=True)
    return rows


def _load() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return -1.0


def format_row(r: dict[str, Any]) -> str:
    result = ("ok" if r["ok"] else "failed") + (" +onnx" if r["onnx"] else "")
    said = walk._first_line(r["cause"]) if r["cause"] else ", ".join(r["checks"])
    return (f"{r['family']:<26} {r['name']:<34} {r['params'] / 1e6:7.1f}M {result:<10} {r['programs']:4d} "
            f"{r['import_s']:7.1f} {r['total_s']:7.1f}  {said}")


def summary(rows: list[dict[str, Any]], families: int) -> str:
    exact = [r for r in rows if r["ok"]]
    small = [r for r in rows if r["params"] <= MAX_PARAMS]
    slow = [r for r in small if r["import_s"] > 30]
    return "\n".join([
        f"families {families}, walked {len(rows)}: exact {len(exact)}/{len(rows)} "
        f"(ONNX proven {sum(r['onnx'] for r in exact)}), strictly (no Program node) "
        f"{sum(r['programs'] == 0 for r in exact)}/{len(rows)}",
        f"imports over 30 s up to 100M parameters: {', '.join(r['name'] for r in slow) or 'none'}",
    ])


def markdown(results: Results) -> str:
    """The docs' table: one row per family, smallest model first, from what ``results`` holds."""
    rows = ["| family | model | parameters | exact | ONNX | programs | import s | import CPU s | walk s | load | walked (UTC) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    walked = []
    for case, params in choose(results):
        r = results.outcomes.get(case.name)
        if r is None:
            rows.append(f"| {case.family} | {case.name} | {params / 1e6:.1f}M | not walked | | | | | | | |")
            continue
        walked.append(r)
        exact = "yes" if r["ok"] else f"no: {walk._first_line(r['cause'], 90).replace('|', '/')}"
        rows.append(f"| {r['family']} | {r['name']} | {params / 1e6:.1f}M | {exact} | {'yes' if r['onnx'] else '-'} | "
                    f"{r['programs']} | {r['import_s']:.1f} | {_cpu(r)} | {r['total_s']:.1f} | {r['load']:.0f} | "
                    f"{r.get('at', '')[5:16].replace('T', ' ') or '-'} |")
    return "\n".join([*rows, "", summary(walked, len(results.choices))])


def _cpu(r: dict[str, Any]) -> str:
    return f"{r['import_cpu_s']:.1f}" if "import_cpu_s" in r else "-"


def main(results_path: Path, *, onnx: bool, timeout: int, only: list[str] | None, largest_first: bool = False,
         save_choices: bool = False, report: bool = False, retry_failed: bool = False) -> int:
    results = Results(results_path)
    if report:
        print(markdown(results))
        return 0
    if save_choices:
        choose(results)
        write_choices(results)
        print(f"{len(results.choices)} families' choices written to {CHOICES.name}")
        return 0
    print(f"{'family':<26} {'model':<34} {'params':>8} {'result':<10} {'prog':>4} {'import':>7} {'total':>7}  "
          "cause or checks")
    rows = walk_families(results, onnx=onnx, timeout=timeout, only=only, largest_first=largest_first,
                         retry_failed=retry_failed)
    print(summary(rows, len(results.choices)))
    return 0 if all(r["ok"] for r in rows) else 1
