"""The run spec: one typed config grouped by concern, saved with every run (versioned JSON).

``load_spec``/``spec_from_dict`` check every field at once and raise one :class:`SpecError`
listing each problem as ``"field.path: what is wrong"``, so a bad spec fails before anything runs.
Checks that need the data or the graph (class count, input shape, dataset path) live in
:mod:`trainer.checks`. Older files are migrated by ``_MIGRATIONS`` on load.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from graph_editor.model.serialize import MAX_DEPTH, value_depth

from .data.formats import format_names
from .image_spec import ImageSpec, check_images

SCHEMA_VERSION = 2

OPTIMIZERS = ("sgd", "adamw", "adam", "rmsprop")
SCHEDULES = ("onecycle", "cosine", "step", "constant")
PRECISIONS = ("fp32", "bf16", "fp16", "fp8")
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
STOP_METRICS = ("val_accuracy", "val_loss")
STRATEGIES = ("none", "ddp", "fsdp2")
BACKENDS = ("auto", "gloo", "nccl")
ENDPOINT_RE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")  # host:port, [v6]:port
RDZV_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_IMAGE_SIDE = 16384   # pixels: beyond any classification input (and a decompression bomb's size)
MAX_NPROC = 1024         # ranks on one machine: beyond any machine's GPUs or cores
MAX_NNODES = 4096        # machines in one run: beyond the largest published training jobs' node counts
MAX_WORKERS = 64         # DataLoader processes: more only costs memory and start-up
LR_SCALE_RE = re.compile(r"\s*[^=\s][^=]*=\s*(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")   # "block=factor"
MAX_TAG = 200            # characters in one run tag (a sweep's study:NAME, trial:N, retrain...)
DEVICE_RE = re.compile(r"auto|cpu|cuda(:\d{1,4})?")


def __getattr__(name: str) -> Any:
    """``FORMATS``: "auto" and every ``@dataset_format`` of :mod:`trainer.data.readers`, asked of the
    registry when first used (the readers import NumPy; reading a spec need not)."""
    if name == "FORMATS":
        return format_names()
    raise AttributeError(f"module 'trainer.spec' has no attribute '{name}'")


class SpecError(ValueError):
    """A run spec that cannot run; ``problems`` holds one ``"field: message"`` line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("bad run spec:\n" + "\n".join(f"  {p}" for p in self.problems))


@dataclass
class ModelSpec:
    graph: str | dict[str, Any] = "assets/templates/digits_cnn.graph.json"  # a path, or the graph itself
    init_from: str = ""       # a weights file (node-id keys: a run's checkpoint, safetensors, a state dict)
    reinit: list[str] = field(default_factory=list)   # blocks left at a fresh initialisation (a replaced head)
    frozen: list[str] = field(default_factory=list)   # blocks (group ids, first..last) that do not train
    lr_scale: list[str] = field(default_factory=list)  # "block=factor": the block learns at factor x the rate


@dataclass
class AugmentSpec:
    flip: bool = False        # random horizontal flip (batched tensor op)
    translate: int = 0        # random shift of up to N pixels each way (pad + random offsets)
    normalize: bool = True    # per-channel/feature mean and std from the train split


@dataclass
class DataSpec:
    dataset: str = "digits"   # "digits" or a path (file or folder)
    format: str = "auto"
    target: str = ""          # CSV: the target column (default: the last); HF: the label column
    val_fraction: float = 0.1
    test_fraction: float = 0.2
    image_size: list[int] = field(default_factory=list)  # image folder: [H, W] (default: first image's)
    augment: AugmentSpec = field(default_factory=AugmentSpec)
    device_budget_mb: float = 1024.0  # data up to this size lives on the device as tensors
    workers: int = 2                  # DataLoader workers when the data does not fit the budget
    images: ImageSpec = field(default_factory=ImageSpec)


@dataclass
class OptimSpec:
    name: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 5e-4
    momentum: float = 0.9     # sgd, rmsprop
    nesterov: bool = False    # sgd
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # adam, adamw
    label_smoothing: float = 0.0


@dataclass
class ScheduleSpec:
    name: str = "onecycle"
    warmup_epochs: float = 0.0   # cosine, constant: linear warm-up
    pct_start: float = 0.25      # onecycle: fraction of steps spent rising
    step_epochs: int = 10        # step: decay every N epochs
    gamma: float = 0.1           # step: decay factor
    min_lr_ratio: float = 0.0    # cosine: final lr as a fraction of the peak


@dataclass
class TrainSpec:
    epochs: int = 10
    batch_size: int = 64
    seed: int = 0
    metrics_interval_s: float = 0.25  # host reads device-side loss/accuracy at most this often
    inspect_every_s: float = 0.0      # inspect a step (per-node gradients, trainer.inspection) this often; 0 = off


@dataclass
class PrecisionSpec:
    dtype: str = "fp32"
    compile: str = "off"
    channels_last: bool = True   # for convnets on image data (see Setup.channels_last)


@dataclass
class EarlyStopSpec:
    metric: str = "val_loss"
    patience: int = 0            # epochs without improvement before stopping; 0 = off
    min_delta: float = 0.0


@dataclass
class MemorySpec:
    # Activation checkpointing (trainer.memory.recomputation): blocks recomputed in backward, not kept.
    checkpoint: list[str] = field(default_factory=list)
    budget_mb: float = 0.0    # refuse a run predicted to need more; 0: the GPU's memory on CUDA, no check on the CPU


@dataclass
class CheckpointSpec:
    best: bool = True
    last: bool = True
    metric: str = "val_loss"  # what "best" means (a small val split ties often on accuracy, rarely on loss)
    every_s: float = 5.0      # of the run between writes (0: every epoch); epochs between are held (checkpoints.saving)


@dataclass
class DistributedSpec:
    """Data parallelism under ``torchrun`` (trainer.distributed.parallel). ``strategy`` none: one process."""

    strategy: str = "none"              # none, ddp (DistributedDataParallel), fsdp2 (fully_shard)
    nproc_per_node: int = 1             # processes (ranks) on each machine
    nnodes: int = 1                     # machines
    node_rank: int = 0                  # this machine's number, 0..nnodes-1
    rdzv_endpoint: str = "localhost:29500"  # host:port every node meets at (one node: a free local port)
    rdzv_id: str = "torch-studio"       # the job's name at the rendezvous: the same on every node
    backend: str = "auto"               # auto: nccl on CUDA, gloo on the CPU
    # FSDP2: graph node or group ids that become fully_shard units; empty: every top-level group
    # (block), or the whole model where the graph has none.
    fsdp_units: list[str] = field(default_factory=list)
    reshard_after_forward: bool = True  # FSDP2: free gathered parameters after forward (memory vs. traffic)


@dataclass
class RunSpec:
    """Everything a run needs; ``to_dict`` is what the store and checkpoints keep."""

    name: str = ""
    model: ModelSpec = field(default_factory=ModelSpec)
    data: DataSpec = field(default_factory=DataSpec)
    optim: OptimSpec = field(default_factory=OptimSpec)
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    precision: PrecisionSpec = field(default_factory=PrecisionSpec)
    early_stopping: EarlyStopSpec = field(default_factory=EarlyStopSpec)
    checkpoints: CheckpointSpec = field(default_factory=CheckpointSpec)
    memory: MemorySpec = field(default_factory=MemorySpec)
    distributed: DistributedSpec = field(default_factory=DistributedSpec)
    device: str = "auto"
    tags: list[str] = field(default_factory=list)    # the run's tags in the store
    base_dir: str = field(default="", metadata={"internal": True})  # relative paths resolve here

    def to_dict(self) -> dict[str, Any]:
        out = {"schema_version": SCHEMA_VERSION, **asdict(self)}
        out.pop("base_dir")
        return out

    def resolve(self, path: str) -> Path:
        """A path from the spec: absolute, or relative to the spec file's folder."""
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() or not self.base_dir else Path(self.base_dir) / p


# ------------------------------------------------------------------------- loading
def load_spec(path: str | os.PathLike[str]) -> RunSpec:
    """Read and check a spec file; relative paths in it resolve against its folder."""
    p = Path(path)
    try:
        data = parse_spec_text(p.read_text(encoding="utf-8"), p)
    except FileNotFoundError:
        raise SpecError([f"spec: file not found: {p}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([f"spec: cannot read {p}: {exc}"]) from None
    spec = spec_from_dict(data)
    spec.base_dir = str(p.resolve().parent)
    return spec


def parse_spec_text(text: str, path: Path | str = "spec") -> Any:
    """Decoded JSON, or a SpecError that says where it is bad (nesting too deep for the decoder and
    integers of thousands of digits included: a spec file comes from anywhere)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError([f"spec: {path} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}"]) from None
    except RecursionError:
        raise SpecError([f"spec: {path} is nested too deeply to be a run spec"]) from None
    except ValueError:  # the interpreter's limit on the digits of an integer
        m = re.search(r"\d{4000,}", text)
        where = f" at line {text.count(chr(10), 0, m.start()) + 1}" if m else ""
        digits = f"{len(m.group())} digits" if m else "thousands of digits"
        raise SpecError([f"spec: {path} holds a number of {digits}{where}; no field takes numbers that large"]) from None


def spec_from_dict(data: Any) -> RunSpec:
    """Build a RunSpec from parsed JSON, migrating old versions; raises SpecError with every problem."""
    if not isinstance(data, dict):
        raise SpecError(["spec: must be a JSON object"])
    data = migrate(dict(data))
    problems: list[str] = []
    spec = _build(RunSpec, data, "", problems)
    if not problems:
        check_values(spec, problems)
    if problems:
        raise SpecError(problems)
    return spec


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 reads image folders from disk by default; a version 1 spec read them whole into memory
    at ``data.image_size``, and keeps doing so (a resumed run continues on the data it started with)."""
    out = dict(data)
    d = out.get("data", {})
    if isinstance(d, dict):
        images = d.get("images", {})
        out["data"] = {**d, "images": {**images, "source": "memory"} if isinstance(images, dict) else images}
    return out


# schema_version -> function that upgrades a dict of that version to the next one.
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.pop("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version < 1 or version > SCHEMA_VERSION:
        raise SpecError([f"schema_version: {_show(version)} is not a version this program reads (1..{SCHEMA_VERSION})"])
    while version < SCHEMA_VERSION:
        data = _MIGRATIONS[version](data)
        version += 1
    return data


def _build(cls: type, data: Any, where: str, problems: list[str]) -> Any:
    if not isinstance(data, dict):
        problems.append(f"{where.rstrip('.') or 'spec'}: must be an object")
        return cls()
    known = {f.name: f for f in fields(cls) if not f.metadata.get("internal")}
    for key in data:
        if key not in known:
            name = key if len(key) <= 40 else key[:37] + "..."
            problems.append(f"{where}{name}: unknown field (known: {', '.join(known)})")
    kwargs: dict[str, Any] = {}
    defaults = cls()
    for name in known:
        if name not in data:
            continue
        value, default = data[name], getattr(defaults, name)
        if is_dataclass(default):
            kwargs[name] = _build(type(default), value, f"{where}{name}.", problems)
        elif not _type_ok(value, default, name):
            problems.append(f"{where}{name}: expected {_type_name(default, name)}, got {_show(value)}")
        elif (trouble := _range_trouble(value, default, f"{where}{name}")) is not None:
            problems.append(f"{where}{name}: {trouble}, got {_show(value)}")
        else:
            kwargs[name] = float(value) if isinstance(default, float) else value
    return cls(**kwargs)


# Integers a spec may hold: counts and sizes fit 32 bits; a seed takes what torch.manual_seed takes.
INT_LIMIT = 2**31 - 1
SEED_LIMIT = 2**63 - 1


def _range_trouble(value: Any, default: Any, where: str) -> str | None:
    """What is wrong with a number of the right type (NaN, Infinity, an integer of absurd size)."""
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if isinstance(default, int) and not isinstance(default, bool):
            limit = SEED_LIMIT if where == "train.seed" else INT_LIMIT
            if abs(v) > limit:
                return f"must be at most {limit:,} in size"
        elif not math.isfinite(v) if isinstance(v, float) else abs(v) > 1e300:
            return "must be a finite number"
    return None


def _show(value: Any) -> str:
    """The value as JSON, cut short (a hostile spec can hold megabytes in one field)."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _type_ok(value: Any, default: Any, name: str) -> bool:
    if name == "graph":  # a graph object is checked as a graph file is, when the run is set up
        return isinstance(value, str) or isinstance(value, dict) and value_depth(value) <= MAX_DEPTH
    if name in ("checkpoint", "fsdp_units", "reinit", "frozen", "lr_scale", "tags"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, list):
        return isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                               for v in value)
    return isinstance(value, type(default))


def _type_name(default: Any, name: str) -> str:
    if name == "graph":
        return f"a graph file path or a graph object (nested at most {MAX_DEPTH} deep)"
    lists = {"checkpoint": "group ids or 'first..last' node id ranges", "fsdp_units": "graph node or group ids",
             "lr_scale": "'block=factor' entries", "tags": "tags (strings)"}
    if name in lists or name in ("reinit", "frozen"):
        return f"a list of {lists.get(name, lists['checkpoint'])}"
    return {bool: "true or false", int: "an integer", float: "a number", list: "a list of numbers",
            str: "a string"}.get(type(default), type(default).__name__)


def _choice(problems: list[str], where: str, value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:    # the value cut short, as _show cuts (a hostile spec can hold megabytes in it)
        shown = value if len(value) <= 60 else value[:57] + "..."
        problems.append(f"{where}: unknown {what} '{shown}' (choose {', '.join(choices)})")


def check_values(spec: RunSpec, problems: list[str]) -> None:
    """Range and choice checks that need nothing but the spec itself."""
    o, s, t, d = spec.optim, spec.schedule, spec.train, spec.data
    _choice(problems, "optim.name", o.name, OPTIMIZERS, "optimizer")
    _choice(problems, "schedule.name", s.name, SCHEDULES, "schedule")
    _choice(problems, "precision.dtype", spec.precision.dtype, PRECISIONS, "precision")
    _choice(problems, "precision.compile", spec.precision.compile, COMPILE_MODES, "compile mode")
    _choice(problems, "data.format", d.format, format_names(), "dataset format")
    _choice(problems, "early_stopping.metric", spec.early_stopping.metric, STOP_METRICS, "metric")
    _choice(problems, "checkpoints.metric", spec.checkpoints.metric, STOP_METRICS, "metric")
    positive = {"optim.lr": o.lr, "train.epochs": t.epochs, "train.batch_size": t.batch_size}
    for where, value in positive.items():
        if not value > 0:
            problems.append(f"{where}: must be positive, got {value}")
    nonneg = {"optim.weight_decay": o.weight_decay, "optim.momentum": o.momentum, "schedule.warmup_epochs":
              s.warmup_epochs, "early_stopping.patience": spec.early_stopping.patience,
              "data.workers": d.workers, "data.device_budget_mb": d.device_budget_mb,
              "data.augment.translate": d.augment.translate, "train.seed": t.seed,
              "memory.budget_mb": spec.memory.budget_mb, "checkpoints.every_s": spec.checkpoints.every_s}
    for where, value in nonneg.items():
        if value < 0:
            problems.append(f"{where}: must not be negative, got {value}")
    for where, value, lo, hi in (("optim.label_smoothing", o.label_smoothing, 0.0, 0.99),
                                 ("schedule.pct_start", s.pct_start, 0.0, 1.0),
                                 ("schedule.min_lr_ratio", s.min_lr_ratio, 0.0, 1.0),
                                 ("schedule.gamma", s.gamma, 0.0, 1.0),
                                 ("data.val_fraction", d.val_fraction, 0.0, 0.9),
                                 ("data.test_fraction", d.test_fraction, 0.0, 0.9)):
        if not lo <= value <= hi:
            problems.append(f"{where}: must be between {lo} and {hi}, got {value}")
    if d.val_fraction + d.test_fraction >= 0.95:
        problems.append("data.val_fraction: val and test fractions leave almost nothing to train on")
    if len(o.betas) != 2 or not all(0.0 <= b < 1.0 for b in o.betas):
        problems.append(f"optim.betas: must be two numbers in [0, 1), got {o.betas}")
    if o.nesterov and o.name == "sgd" and o.momentum <= 0:
        problems.append("optim.nesterov: needs a positive optim.momentum")
    if t.metrics_interval_s < 0.1:
        problems.append(f"train.metrics_interval_s: must be at least 0.1 (events stay under ~10 a second), "
                        f"got {t.metrics_interval_s}")
    if t.inspect_every_s != 0 and not t.inspect_every_s >= 0.5:
        problems.append(f"train.inspect_every_s: must be 0 (off) or at least 0.5 (an inspected step costs a few "
                        f"steps' time), got {t.inspect_every_s}")
    if s.step_epochs < 1:
        problems.append(f"schedule.step_epochs: must be at least 1, got {s.step_epochs}")
    if d.image_size and (len(d.image_size) != 2 or any(int(v) != v or not 1 <= v <= MAX_IMAGE_SIDE
                                                       for v in d.image_size)):
        problems.append(f"data.image_size: must be [height, width] in pixels, each 1 to {MAX_IMAGE_SIDE}, "
                        f"got {_show(d.image_size)}")
    check_images(d.images, problems, _choice, _show, MAX_IMAGE_SIDE)
    for k, entry in enumerate(spec.model.lr_scale):
        if not LR_SCALE_RE.fullmatch(entry) or float(entry.partition("=")[2]) > 100.0:
            problems.append(f"model.lr_scale[{k}]: must be 'block=factor' with a factor 0 to 100, got {_show(entry)}")
    problems += [f"tags[{k}]: must be 1 to {MAX_TAG} characters without a comma (Runs edits tags as one "
                 f"comma-separated line), got {_show(tag)}" for k, tag in enumerate(spec.tags)
                 if not tag.strip() or "," in tag or len(tag) > MAX_TAG]
    if d.workers > MAX_WORKERS:
        problems.append(f"data.workers: at most {MAX_WORKERS} DataLoader processes, got {d.workers}")
    if not DEVICE_RE.fullmatch(spec.device):
        problems.append(f"device: unknown device {_show(spec.device)} (choose auto, cpu, cuda or cuda:N, N from 0)")
    check_distributed(spec, problems)


def check_distributed(spec: RunSpec, problems: list[str]) -> None:
    """The ``distributed`` section's own checks (the graph's ids for ``fsdp_units`` are checked at setup)."""
    dist = spec.distributed
    _choice(problems, "distributed.strategy", dist.strategy, STRATEGIES, "strategy")
    _choice(problems, "distributed.backend", dist.backend, BACKENDS, "backend")
    for where, value in (("distributed.nproc_per_node", dist.nproc_per_node), ("distributed.nnodes", dist.nnodes)):
        if value < 1:
            problems.append(f"{where}: must be at least 1, got {value}")
    if dist.nproc_per_node > MAX_NPROC:
        problems.append(f"distributed.nproc_per_node: at most {MAX_NPROC} processes a machine, got {dist.nproc_per_node}")
    if dist.nnodes > MAX_NNODES:
        problems.append(f"distributed.nnodes: at most {MAX_NNODES} machines, got {dist.nnodes}")
    if not 0 <= dist.node_rank < max(dist.nnodes, 1):
        problems.append(f"distributed.node_rank: must be 0..{max(dist.nnodes, 1) - 1} (distributed.nnodes is "
                        f"{dist.nnodes}), got {dist.node_rank}")
    m = ENDPOINT_RE.fullmatch(dist.rdzv_endpoint)
    if m is None or not 0 < int(m.group(2)) < 65536:
        problems.append(f"distributed.rdzv_endpoint: must be host:port with a port 1..65535, got "
                        f"{_show(dist.rdzv_endpoint)}")
    if not RDZV_ID_RE.fullmatch(dist.rdzv_id):
        problems.append(f"distributed.rdzv_id: must be 1 to 128 letters, digits, '.', '_' or '-', got "
                        f"{_show(dist.rdzv_id)}")
    for unit in dist.fsdp_units:
        if not unit.strip():
            problems.append("distributed.fsdp_units: holds an empty id")
            break
    if dist.backend == "nccl" and spec.device == "cpu":
        problems.append("distributed.backend: nccl needs CUDA devices, but device is 'cpu' (use gloo or auto)")
    world = dist.nproc_per_node * dist.nnodes
    if dist.strategy != "none" and world >= 1 and spec.train.batch_size % world:
        problems.append(f"train.batch_size: the global batch {spec.train.batch_size} must divide evenly among "
                        f"{world} processes (distributed.nproc_per_node x distributed.nnodes)")
