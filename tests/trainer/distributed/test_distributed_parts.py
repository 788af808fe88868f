"""The parts of the torchrun runs, in this process: torchrun's options, the failed rank found, FSDP2
units from the graph, each rank's slice of the global batch, sharded checkpoints (a one-rank gloo
group) written whole, verified, gathered and pruned. The runs themselves: test_distributed_runs.py."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from graph_editor.building import build_module
from graph_editor.model import Graph, InputSpec
from graph_editor.model.graph import Group
from studio.cli_train import build_spec
from trainer.checkpoints.single_file import (
    CheckpointError,
    discard_after,
    load_checkpoint_weights,
    prune,
    verify_checkpoint,
)
from trainer.data import Split
from trainer.data.loaders import Augment, DeviceLoader
from trainer.distributed.data import ShardEvalLoader, ShardEvalStreamLoader, ShardLoader, eval_rows
from trainer.distributed.lifeline import is_torchrun_child
from trainer.distributed.parallel import (
    fsdp_units,
    resolve_backend,
    root_cause,
    torchrun_args,
    write_failure,
)
from trainer.distributed.sharded_checkpoints import (
    MANIFEST,
    checkpoint_dir,
    load_full,
    save_sharded,
    verify_sharded,
)
from trainer.loop import evaluate
from trainer.memory.recomputation import SegmentError
from trainer.spec import DistributedSpec


def test_torchrun_options_for_one_node_and_for_several():
    one = torchrun_args(DistributedSpec(strategy="ddp", nproc_per_node=2))
    assert "--nproc-per-node=2" in one and "--rdzv-endpoint=localhost:0" in one and "--max-restarts=0" in one
    many = torchrun_args(DistributedSpec(strategy="fsdp2", nproc_per_node=8, nnodes=4, node_rank=3,
                                         rdzv_endpoint="head:29400", rdzv_id="job7"), Path("logs"))
    assert {"--nnodes=4", "--node-rank=3", "--rdzv-endpoint=head:29400", "--rdzv-id=job7",
            "--rdzv-backend=c10d", "--log-dir=logs"} <= set(many)


def test_backend_and_environment():
    assert resolve_backend("auto", torch.device("cpu")) == "gloo"
    assert resolve_backend("auto", torch.device("cuda", 0)) == "nccl"
    assert resolve_backend("gloo", torch.device("cuda", 0)) == "gloo"
    assert is_torchrun_child({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert not is_torchrun_child({"RANK": "1"})


@dataclass
class FakeFailure:        # torchrun's ProcessFailure, as far as root_cause reads it
    rank: int
    pid: int
    exitcode: int

    def signal_name(self) -> str:
        return "SIGKILL"


def test_the_rank_that_died_silently_is_the_cause(tmp_path):
    write_failure(tmp_path, 0, "error", "DistBackendError: Connection closed by peer", step=12, peer=True)
    cause = root_cause([FakeFailure(0, 100, 1), FakeFailure(1, 101, -9)], tmp_path)
    assert (cause.rank, cause.message) == (1, "rank 1 (pid 101) killed by SIGKILL")


@dataclass
class CrashedRank(FakeFailure):
    error_file: str = ""

    def signal_name(self) -> str:
        return "SIGABRT"


def test_a_rank_that_crashed_is_named_with_its_last_words(tmp_path):
    """issue 22: a rank that died of a signal was only "rank 1 (pid N) killed by SIGABRT": its last
    stderr lines (torchrun's --tee copy beside its error file) now reach the message and traceback."""
    folder = tmp_path / "attempt_0" / "1"
    folder.mkdir(parents=True)
    (folder / "stderr.log").write_text("[rank1]: epoch 1\n[rank1]:terminate called without an active exception\n\n")
    cause = root_cause([CrashedRank(1, 101, -6, str(folder / "error.json"))], tmp_path)
    assert cause.message == "rank 1 (pid 101) killed by SIGABRT: terminate called without an active exception"
    assert cause.traceback == "epoch 1\nterminate called without an active exception"
    assert "--tee=2" in torchrun_args(DistributedSpec(strategy="ddp"), tmp_path)


def test_a_rank_failing_on_its_own_comes_before_its_peers(tmp_path):
    write_failure(tmp_path, 0, "error", "connection closed by peer", step=5, peer=True)
    write_failure(tmp_path, 1, "nan", "the loss became nan at step 5", step=5)
    cause = root_cause([FakeFailure(0, 100, 1), FakeFailure(1, 101, 1)], tmp_path)
    assert (cause.rank, cause.kind, cause.step) == (1, "nan", 5)
    assert cause.message == "rank 1: the loss became nan at step 5"


def grouped_graph() -> Graph:
    g = Graph(InputSpec((4,)), 3, {"name": "g"})
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 8}), ("ReLU", "relu"),
            ("Linear", "fc2", {"out_features": 8}), ("Linear", "head", {"out_features": 3}), ("Output", "output"))
    g.groups["block"] = Group("block", "block", ["fc1", "relu", "fc2"])
    return g


def test_fsdp_units_from_groups_nodes_and_ranges():
    g = grouped_graph()
    model = build_module(g)
    assert fsdp_units(g, model, []) == [["fc1", "relu", "fc2"]]       # every top-level group
    assert fsdp_units(g, model, ["head", "fc1..fc2"]) == [["head"], ["fc1", "relu", "fc2"]]
    assert fsdp_units(g, model, ["relu"]) == []                      # no parameters: not a unit
    with pytest.raises(SegmentError, match=r"distributed.fsdp_units\[0\]: 'nope' is neither"):
        fsdp_units(g, model, ["nope"])


@pytest.mark.parametrize("augment", [Augment(False, 0), Augment(True, 1)])
def test_the_ranks_slices_make_the_one_process_batches(augment):
    split = Split(torch.randn(40, 1, 4, 4), torch.arange(40) % 3)
    one = DeviceLoader(split, 8, torch.device("cpu"), train=True, augment=augment, seed=5)
    ranks = [ShardLoader(split, 8, torch.device("cpu"), train=True, augment=augment, seed=5, rank=r, world=2)
             for r in range(2)]
    order = one.order()
    assert all(torch.equal(order, r.order()) for r in ranks)         # the same seed, the same epoch
    for (x, y, valid), *parts in zip(one.batches(order, 1), *(r.batches(order, 1) for r in ranks), strict=True):
        assert valid == 8 and [p[2] for p in parts] == [4, 4]
        torch.testing.assert_close(torch.cat([p[0] for p in parts]), x)
        assert torch.equal(torch.cat([p[1] for p in parts]), y)


@pytest.mark.parametrize(("n", "world"), [(43, 2), (40, 4), (5, 4)])
def test_each_evaluation_row_is_on_one_rank_once(n, world):
    """Every step the ranks together run one process's batch of 8; rows past the end are padding."""
    order = torch.arange(n) * 10
    steps = -(-n // 8)
    seen = []
    for step in range(steps):
        for rank in range(world):
            idx, valid = eval_rows(order, step, 8, rank, world)
            assert len(idx) == 8 // world                   # the per-rank batch, every step, every rank
            seen += idx[:valid].tolist()
    assert seen == order.tolist()


def test_a_streamed_split_is_shared_as_a_held_one():
    """The streamed evaluation loader (workers read the rows) gives each rank the held loader's rows."""
    split = Split(torch.randint(0, 255, (21, 1, 4, 4), dtype=torch.uint8), torch.arange(21) % 3)
    cpu, zero, one = torch.device("cpu"), torch.zeros(1), torch.ones(1)
    for rank in range(2):
        held = ShardEvalLoader(Split(split.x.float(), split.y), 8, cpu, train=False, rank=rank, world=2)
        streamed = ShardEvalStreamLoader(split, 8, cpu, train=False, mean=zero, std=one, workers=0, rank=rank,
                                         world=2)
        pairs = list(zip(held.batches(held.order()), streamed.batches(streamed.order()), strict=True))
        assert len(pairs) == 3
        for (hx, hy, hv), (sx, sy, sv) in pairs:
            assert hv == sv and torch.equal(hy, sy)
            torch.testing.assert_close(hx, sx)


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_evaluation_sums_are_one_process_evaluation(world):
    """Each rank evaluates its share; the sums its reduce gets, added over the ranks (what all_reduce
    does), give one process's loss, accuracy and confusion matrix."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    split = Split(torch.randn(41, 1, 4, 4), torch.arange(41) % 3)
    cpu = torch.device("cpu")
    one = evaluate(model, DeviceLoader(split, 12, cpu, train=False), 3, device=cpu, precision="fp32")
    sums = []
    for rank in range(world):
        loader = ShardEvalLoader(split, 12, cpu, train=False, rank=rank, world=world)
        assert loader.steps == 4
        evaluate(model, loader, 3, device=cpu, precision="fp32", reduce=lambda t: sums.append(t.clone()) or t)
    total = torch.stack(sums).sum(0)
    got = evaluate(model, ShardEvalLoader(split, 12, cpu, train=False, rank=0, world=world), 3, device=cpu,
                   precision="fp32", reduce=lambda t: total)
    assert int(total[1]) == 41
    assert got.loss == pytest.approx(one.loss, rel=1e-6) and got.accuracy == one.accuracy
    assert (got.confusion == one.confusion).all()


@pytest.fixture
def one_rank(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"model.fc.weight": torch.randn(5, 3, generator=g), "model.fc.bias": torch.randn(5, generator=g),
            "optim.0.step": torch.tensor(7.0), "rng.data": torch.arange(16, dtype=torch.uint8)}


def test_a_sharded_checkpoint_is_whole_verified_and_gathered(tmp_path, one_rank):
    folder = tmp_path / "checkpoints"
    path = save_sharded(checkpoint_dir(folder, "last", 12), state(), {"step": 12, "epoch": 1}, rank=0)
    assert path.name == "last-00000012.dcp" and (path / MANIFEST).is_file()
    assert not list(folder.glob(".*.tmp"))
    tensors, meta = verify_checkpoint(path, step=12)                 # the one-file checkpoint's interface
    assert meta["step"] == 12 and meta["world_size"] == 1 and meta["format"] == "dcp"
    for k, v in state().items():
        assert torch.equal(tensors[k], v), k
    assert set(load_checkpoint_weights(path)) == {"fc.weight", "fc.bias"}
    with pytest.raises(CheckpointError, match="holds step 12, its record says step 13"):
        verify_sharded(path, step=13)


def test_a_damaged_or_unfinished_sharded_checkpoint_is_refused(tmp_path, one_rank):
    path = save_sharded(checkpoint_dir(tmp_path, "last", 3), state(), {"step": 3}, rank=0)
    shard = next(p for p in path.iterdir() if p.suffix == ".safetensors")
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        load_full(path)
    (path / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="no manifest.json"):
        verify_sharded(path)
    manifest = {"format": "dcp", "step": 3, "files": {"other.safetensors": "0"}}
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="its manifest names"):
        verify_sharded(path)


def test_sharded_checkpoints_are_pruned_and_discarded_as_files_are(tmp_path, one_rank):
    for step in (10, 20, 30):
        save_sharded(checkpoint_dir(tmp_path, "last", step), state(), {"step": step}, rank=0)
    (tmp_path / ".last-00000040.dcp.tmp").mkdir()                       # a killed save's folder
    gone = prune(tmp_path, "last", 30)
    assert sorted(p.name for p in gone) == [".last-00000040.dcp.tmp", "last-00000010.dcp"]
    discard_after(tmp_path, 20)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "pg") == ["last-00000020.dcp"]


def test_cli_train_flags_write_the_distributed_section():
    args = argparse.Namespace(graph="net.graph.json", data="digits", device="cpu", epochs=None, batch_size=64,
                              seed=None, lr=None, precision=None, compile=None, distributed="fsdp2",
                              nproc_per_node=2)
    assert build_spec(args)["distributed"] == {"strategy": "fsdp2", "nproc_per_node": 2}
    args.distributed = args.nproc_per_node = None
    assert "distributed" not in build_spec(args)


def test_cli_train_refuses_zero_processes(capsys):
    """issue 22: `--nproc-per-node 0` ran 1 rank; now argparse refuses it before anything starts, and a
    0 that reaches the spec another way is the spec's refusal, not dropped."""
    from studio.cli import main as cli_main

    with pytest.raises(SystemExit) as exc:
        cli_main(["train", "net.graph.json", "--distributed", "ddp", "--nproc-per-node", "0"])
    assert exc.value.code == 2
    assert "argument --nproc-per-node: must be at least 1, got 0" in capsys.readouterr().err
    args = argparse.Namespace(graph="net.graph.json", data="digits", device="cpu", epochs=None, batch_size=64,
                              seed=None, lr=None, precision=None, compile=None, distributed="ddp", nproc_per_node=0)
    assert build_spec(args)["distributed"] == {"strategy": "ddp", "nproc_per_node": 0}


def test_a_ranks_checkpoint_exception_is_reported_as_its_own_error(tmp_path):
    """issue 22: DCP raises CheckpointException, a BaseException, that run_rank's `except Exception`
    let through: the rank died with a traceback and the user saw "rank 0 exited with status 1". The
    rank's own inner error is what is reported (here safetensors refusing a non-contiguous tensor)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from trainer.distributed.rank import own_error

    weight = torch.zeros(4, 3, 2, 2).to(memory_format=torch.channels_last)
    with pytest.raises(CheckpointException) as caught:
        dcp.save({"model.w": weight}, storage_writer=dcp.HuggingFaceStorageWriter(str(tmp_path)), no_dist=True)
    assert not isinstance(caught.value, Exception)
    inner = own_error(caught.value, 0)
    assert isinstance(inner, ValueError) and "non contiguous tensor" in str(inner)
    assert own_error(caught.value, 5) is inner and own_error(inner, 0) is inner


def test_channels_last_weights_are_saved_and_a_failed_save_leaves_no_folder(tmp_path, one_rank):
    """issue 22: a convnet trained channels_last has non-contiguous weights (and Adam moments), which
    safetensors refused mid-run ("non contiguous tensor model.conv3.weight"), leaving .best-*.dcp.tmp."""
    from torch.distributed.checkpoint.api import CheckpointException

    from trainer.checkpoints.common import remove_unfinished

    folder = tmp_path / "checkpoints"
    conv = torch.randn(8, 4, 3, 3).to(memory_format=torch.channels_last)
    assert not conv.is_contiguous()
    path = save_sharded(checkpoint_dir(folder, "best", 3), {"model.conv.weight": conv, "optim.0.exp_avg": conv * 2},
                        {"step": 3, "epoch": 1}, rank=0)
    tensors, _ = load_full(path)
    assert torch.equal(tensors["model.conv.weight"], conv) and torch.equal(tensors["optim.0.exp_avg"], conv * 2)
    with pytest.raises(CheckpointException):        # a tensor DCP cannot write: the save fails on every rank
        save_sharded(checkpoint_dir(folder, "best", 4), {"model.x": torch.zeros(2, dtype=torch.complex32)},
                     {"step": 4, "epoch": 1}, rank=0)
    assert sorted(p.name for p in folder.iterdir()) == ["best-00000003.dcp"]
    (folder / ".last-00000009.dcp.tmp").mkdir()     # a killed save's leftover: the launcher removes it
    assert [p.name for p in remove_unfinished(folder)] == [".last-00000009.dcp.tmp"]
    assert sorted(p.name for p in folder.iterdir()) == ["best-00000003.dcp"]


def test_a_failed_ranks_traceback_reaches_the_event_the_store_and_show(tmp_path, capsys):
    """issue 22: `torch-studio show` gave no reason for a failed distributed run; the launcher's record
    of the rank's failure now keeps its traceback in the store, and `show` prints its last lines."""
    import io
    import json

    from studio.cli import main as cli_main
    from trainer.distributed.launch import report_failure
    from trainer.protocol import events as ev
    from trainer.store.runs import RunStore

    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore(db)
    rid = store.create_run(name="r", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    write_failure(tmp_path, 1, "error", "ValueError: non contiguous tensor model.conv3.weight", step=19,
                  tb='Traceback (most recent call last):\n  File "sharded_checkpoint.py", line 50\nValueError: non contiguous')
    cause = root_cause([FakeFailure(1, 101, 1)], tmp_path)
    out = io.StringIO()
    assert report_failure(store, ev.Emitter(out), rid, cause.kind, cause.message, step=cause.step, tb=cause.traceback,
                          rank=cause.rank) == ev.EXIT_FAILED
    event = json.loads(out.getvalue())
    assert event["event"] == "failed" and event["rank"] == 1 and "sharded_checkpoint.py" in event["traceback"]
    run = RunStore(db).run(rid)
    assert run.status == "failed" and run.error == "rank 1: ValueError: non contiguous tensor model.conv3.weight"
    assert run.summary["traceback"].endswith("ValueError: non contiguous")
    capsys.readouterr()
    assert cli_main(["show", str(rid), "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "error (error): rank 1: ValueError" in shown and '    File "sharded_checkpoint.py", line 50' in shown
