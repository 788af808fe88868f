"""The one torch.compile test: a tiny model through the real worker, compile caches in the session's
inductor cache folder (a temporary one, shared with the other compiled runs)."""

from __future__ import annotations

import pytest

from trainer.protocol.client import WorkerClient, environ_with

from ..helpers import kinds, tiny_cnn, write_spec

pytestmark = pytest.mark.process


@pytest.mark.slow
def test_compiled_run_reports_compile_time_and_keeps_one_graph(tmp_path, db, inductor_cache):
    spec = write_spec(tmp_path, tiny_cnn(), train={"epochs": 2, "batch_size": 128},
                      precision={"compile": "default"}, schedule={"name": "cosine"})
    env = environ_with(TORCHINDUCTOR_CACHE_DIR=str(inductor_cache), TORCH_LOGS="recompiles")
    cached = set(inductor_cache.rglob("*"))
    with WorkerClient.run(spec, db=db, env=env) as w:
        events = list(w.events(timeout=600))
        assert w.wait(60) == 0, w.stderr
    names = kinds(events)
    assert names.count("compile_done") == 1 and names.index("compile_done") < names.index("metrics")
    compiled = next(e for e in events if e.event == "compile_done")
    assert compiled.seconds > 0 and compiled.mode == "default"
    assert events[-1].event == "finished" and events[-1].status == "completed"
    lrs = [e.lr for e in events if e.event == "metrics"]
    assert len(set(lrs)) > 1      # the tensor lr changed every step...
    # ...and the training step never recompiled for it (evaluation adds its own graph once).
    assert w.stderr.count("Recompiling function") <= 1, w.stderr[-3000:]
    assert "Recompiling function step" not in w.stderr
    assert set(inductor_cache.rglob("*")) - cached, "the run wrote nothing to its compile cache"
