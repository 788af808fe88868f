"""torchrun on GPUs (``make gpu-check``; skipped with fewer than 2 CUDA GPUs): nccl chosen by
``backend: auto``, every rank on its own GPU, DDP and FSDP2 in fp32 and with compile + bf16 +
channels_last; evaluation sharded over the GPUs counts every val row once. One GPU's predicted
memory against each rank's max_memory_allocated: test_memory_distributed.py."""

from __future__ import annotations

import pytest
import torch

from trainer.checkpoints.single_file import load_checkpoint_weights
from trainer.store.runs import RunStore

from ..helpers import DIGITS_CNN, run_worker, write_spec

pytestmark = [pytest.mark.cuda, pytest.mark.slow, pytest.mark.process,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")]


def _run(folder, strategy: str, precision: dict) -> tuple[str, list]:
    folder.mkdir()
    db = f"sqlite:///{folder / 'runs.sqlite'}"
    spec = write_spec(folder, DIGITS_CNN, device="cuda", precision=precision, train={"epochs": 3, "batch_size": 64},
                      distributed={"strategy": strategy, "nproc_per_node": 2})
    code, events, stderr = run_worker(spec, db, timeout=600)
    assert code == 0, stderr[-3000:]
    return db, events


@pytest.mark.parametrize("precision", [{"dtype": "fp32", "compile": "off"},
                                       {"dtype": "bf16", "compile": "default", "channels_last": True}])
def test_ddp_and_fsdp2_on_two_gpus_with_nccl(tmp_path, precision):
    ddp_db, ddp = _run(tmp_path / "ddp", "ddp", precision)
    fsdp_db, fsdp = _run(tmp_path / "fsdp2", "fsdp2", precision)
    for events in (ddp, fsdp):
        started = events[0]
        assert started.device.startswith("cuda") and started.distributed["backend"] == "nccl"
        assert started.distributed["world_size"] == 2 and events[-1].status == "completed"
        assert events[-1].test_accuracy > 0.8
        compiled = [e for e in events if e.event == "compile_done"]     # rank 0's first step, as on one GPU
        assert len(compiled) == (precision["compile"] != "off") and all(e.seconds > 0 for e in compiled)
        ends = [e for e in events if e.event == "epoch_end"]            # the ranks' evaluation sums, all-reduced
        assert sum(map(sum, ends[-1].confusion)) == started.val_size
    assert len(RunStore(fsdp_db).runs()) == 1
    assert load_checkpoint_weights(RunStore(fsdp_db).checkpoint_path(1, "last")).keys() == \
        load_checkpoint_weights(RunStore(ddp_db).checkpoint_path(1, "last")).keys()
    if precision["dtype"] == "fp32":   # cuDNN's TF32 convolutions and reduction orders: close, not equal
        val = [[e.val_loss for e in events if e.event == "epoch_end"] for events in (ddp, fsdp)]
        assert val[0] == pytest.approx(val[1], rel=0.02)
