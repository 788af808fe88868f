"""The compile check (issue 16): torch._dynamo.explain on a graph, its breaks on their nodes; and the
worker forwarding dynamo's graph-break and recompile records while it compiles."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from graph_editor.building import build_module
from studio import cli
from tests.graph_editor.compile_graphs import item_graph
from trainer.compilation.explain import explain_graph, frames_in_text, node_of, split_reason
from trainer.compilation.log import CompileLog, watch
from trainer.protocol import events as ev
from trainer.protocol.client import WorkerClient, environ_with

from ..helpers import DIGITS_CNN, kinds, write_spec


@pytest.mark.slow
def test_an_item_read_breaks_the_graph_on_its_module_node():
    result = explain_graph(item_graph())
    assert result.graph_count >= 2 and result.break_count >= 1
    (brk,) = result.breaks  # the resumed frame's report of the same break is merged into it
    assert brk.node == "scale"
    assert "Tensor.item()" in brk.reason and "module_node_models.py:" in brk.where
    assert any("capture_scalar_outputs" in h for h in brk.hints)
    assert result.inputs.startswith("cpu (meta:")  # .item() cannot run on meta: a small real batch instead
    (problem,) = result.problems()
    assert problem.node == "scale" and problem.severity == "warning" and "graph break" in problem.message


@pytest.mark.process
def test_the_cli_explains_digits_cnn_without_breaks(capsys):
    assert cli.main(["explain", str(DIGITS_CNN), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["graph_count"] == 1 and result["break_count"] == 0 and result["breaks"] == []
    assert result["inputs"] == "meta"


def test_reasons_and_frames_are_read_from_dynamo_text():
    reason, explanation, hints = split_reason(
        "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\n"
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing `Tensor.item()`.\n  Hint: Set capture_scalar_outputs.\n")
    assert reason.startswith("Unsupported Tensor.item()") and explanation.startswith("Dynamo")
    assert hints == ["Set capture_scalar_outputs."]
    frames = frames_in_text('  File "<eval_with_key>.3", line 7, in forward\n    scale = self.scale(conv);  conv = None\n')
    assert frames == [("<eval_with_key>.3", 7, "scale = self.scale(conv);  conv = None")]
    assert node_of(frames, build_module(item_graph(), device="meta")) == "scale"


class Events:
    def __init__(self) -> None:
        self.seen: list[ev.Event] = []

    def emit(self, event: ev.Event) -> None:
        self.seen.append(event)


@pytest.mark.slow
def test_the_log_handler_turns_dynamo_records_into_events_on_their_node():
    model = build_module(item_graph())
    sink = Events()
    handler = watch(sink, model)
    try:
        compiled = torch.compile(model, backend="eager")  # dynamo's records are the same for any backend
        compiled(torch.randn(2, 1, 8, 8))
        compiled(torch.randn(3, 1, 8, 8))  # a new batch size: a recompile
    finally:
        for log in ("torch._dynamo.symbolic_convert.__graph_breaks", "torch._dynamo.guards.__recompiles"):
            logging.getLogger(log).removeHandler(handler)
        torch._dynamo.reset()
    breaks = [e for e in sink.seen if isinstance(e, ev.GraphBreakEvent)]
    recompiles = [e for e in sink.seen if isinstance(e, ev.Recompile)]
    assert breaks and all(b.node == "scale" and "Tensor.item()" in b.reason for b in breaks)
    assert recompiles and "size mismatch" in recompiles[0].reason
    assert handler.breaks == len(breaks) and handler.recompiles == len(recompiles)


def test_a_handler_past_its_limit_only_counts():
    sink = Events()
    handler = CompileLog(sink, build_module(item_graph(), device="meta"), limit=1)
    for _ in range(3):
        handler.emit(logging.LogRecord("torch._dynamo.symbolic_convert.__graph_breaks", logging.DEBUG, "", 0,
                                       "Graph break in user code at /x.py:3\nGraph Break Reason: why\n", (), None))
    assert handler.breaks == 3 and len(sink.seen) == 1
    assert isinstance(sink.seen[0], ev.GraphBreakEvent) and sink.seen[0].where == "x.py:3"


@pytest.mark.slow
def test_a_compiled_worker_run_reports_the_break_on_its_node(tmp_path, db, inductor_cache):
    spec = write_spec(tmp_path, item_graph(), train={"epochs": 1, "batch_size": 128},
                      precision={"compile": "default"})
    env = environ_with(TORCHINDUCTOR_CACHE_DIR=str(inductor_cache))
    with WorkerClient.run(spec, db=db, env=env) as w:
        events = list(w.events(timeout=600))
        assert w.wait(60) == 0, w.stderr
    names = kinds(events)
    assert "graph_break" in names and names.index("graph_break") < names.index("compile_done")
    brk = next(e for e in events if e.event == "graph_break")
    assert brk.node == "scale" and "Tensor.item()" in brk.reason
    done = next(e for e in events if e.event == "compile_done")
    assert done.graph_breaks >= 1 and done.recompiles >= 0
    assert events[-1].event == "finished"


def test_the_check_s_command_and_its_answer_are_read_in_one_place():
    """The studio's QProcess and explain_in_subprocess start the same command and read its answer alike."""
    from trainer.compilation.explain import ExplainError, Explanation, explain_command, read_explanation

    assert explain_command("g.graph.json")[1:] == ["-m", "trainer.compilation.explain", "g.graph.json", "--batch",
                                                   "2", "--json"]
    with pytest.raises(ExplainError, match="^no such graph file$"):
        read_explanation(1, "", "Traceback (most recent call last):\nerror: no such graph file\n\n")
    with pytest.raises(ExplainError, match="wrote no explanation"):
        read_explanation(0, "a warning, no JSON\n", "")
    e = Explanation(graph_count=1, break_count=0, breaks=[], ops_per_graph=[3], inputs="meta", batch=2, seconds=0.5)
    assert read_explanation(0, "noise\n" + json.dumps(e.to_dict()) + "\n", "") == e
