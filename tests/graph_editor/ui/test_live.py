"""LiveAnalysis: debounced validation, then the torch analysis."""

from __future__ import annotations

import pytest

from graph_editor.ui.live import LiveAnalysis


def test_debounced_validate_then_analyze(editor, qtbot):
    live = LiveAnalysis(editor)
    with qtbot.waitSignal(live.analyzed, timeout=20000) as sig:
        pass
    analysis, problems = sig.args
    assert analysis is not None and analysis.total_params > 0 and not problems
    assert live.inference.shapes["fc2"] == (1, 10)
    with qtbot.waitSignal(live.inferred) as sig:
        editor.set_param("fc1", "out_features", 50)
        editor.set_param("fc1", "out_features", 60)  # a burst: one check
    assert sig.args[0].shapes["fc1"] == (1, 60)


def test_linear_mismatch_is_a_problem_and_no_analysis(editor, qtbot):
    live = LiveAnalysis(editor)
    editor.set_param("fc2", "in_features", 99)
    with qtbot.waitSignal(live.analyzed, timeout=20000) as sig:
        pass
    analysis, problems = sig.args
    assert analysis is None
    assert any(p.node == "fc2" and "expects 99 input features, receives 84" in p.message for p in problems)


def test_follows_a_replaced_graph(editor, graph, qtbot):
    live = LiveAnalysis(editor, analyze=False)
    other = graph.copy()
    other.remove_node("output1")
    editor.set_graph(other)
    with qtbot.waitSignal(live.inferred) as sig:
        pass
    assert any("no Output" in p.message for p in sig.args[0].problems)
    assert live.up_to_date
    graph.set_param("fc1", "out_features", 3)  # the old graph is no longer followed: nothing goes stale
    assert live.up_to_date
    other.set_param("fc1", "out_features", 3)  # the followed one is, until its check has run
    assert not live.up_to_date
    with qtbot.waitSignal(live.inferred, timeout=20000):
        pass
    assert live.up_to_date


def test_the_graph_is_validated_once_per_change(editor, qtbot, monkeypatch):
    """The analysis reuses the validation that was just shown (validating twice was a third of opening
    a 20,000-node graph), but not one an edit has made stale."""
    import graph_editor.analysis.per_node as analysis_module
    import graph_editor.ui.live as live_module

    calls: list[str] = []
    for module in (analysis_module, live_module):
        real = module.validate

        def counted(*args, real=real, **kwargs):
            calls.append("validate")
            return real(*args, **kwargs)
        monkeypatch.setattr(module, "validate", counted)
    live = LiveAnalysis(editor)
    with qtbot.waitSignal(live.analyzed, timeout=20000) as sig:
        pass
    assert sig.args[0] is not None and len(calls) == 1
    editor.set_param("fc1", "out_features", 60)      # an edit, then the analysis at once (no refresh between)
    assert live.analyze_now().nodes[[n.id for n in live.analysis.nodes].index("fc1")].shape == (1, 60)
    assert len(calls) == 2


def test_the_analysis_runs_off_the_gui_thread_and_a_stale_result_is_dropped(editor, qtbot, monkeypatch):
    """An edit made while the analysis of the graph before it runs: that result comes back after the edit
    and is dropped; the analysis of the edited graph is the one shown, and both ran on another thread."""
    import gc
    import threading

    import graph_editor.ui.live as live_module

    real, gate, threads, started = live_module.check, threading.Event(), [], threading.Event()

    def slow_first(graph, batch, inf):
        if graph.metadata.get("name") != "stale":  # another test's LiveAnalysis, not yet collected
            return real(graph, batch, inf)
        threads.append(threading.get_ident())
        if len(threads) == 1:
            started.set()
            assert gate.wait(20)
        return real(graph, batch, inf)

    monkeypatch.setattr(live_module, "check", slow_first)
    editor.graph.metadata["name"] = "stale"
    live = LiveAnalysis(editor)
    shown, dropped = [], []
    live.analyzed.connect(lambda analysis, problems: shown.append(analysis))
    live.jobs.on_dropped = dropped.append
    qtbot.waitUntil(started.is_set, timeout=10000)
    # the worker would collect the GUI's garbage Qt objects on its own thread: collection waits for it
    assert not gc.isenabled()
    editor.set_param("fc1", "out_features", 60)          # the running analysis is of 84 features
    with qtbot.waitSignal(live.analyzed, timeout=20000) as sig:
        gate.set()
    assert len(shown) == 1 and len(dropped) == 1 and len(threads) == 2
    fc1 = sig.args[0].by_id()["fc1"]
    assert fc1.shape == (1, 60) and fc1.params == 16 * 5 * 5 * 6 * 0 + 6 * 14 * 14 * 60 + 60
    assert live.analysis is sig.args[0]
    assert threading.get_ident() not in threads
    assert gc.isenabled()


def test_a_new_graph_drops_the_old_graphs_pending_analysis(editor, graph, qtbot, monkeypatch):
    """Opening a graph while the last one's analysis is still to come analyses only the new one (the
    20,000-node chain was built twice on open: the starter graph's pending analysis ran on the new graph)."""
    import graph_editor.ui.live as live_module

    real, checked = live_module.check, []

    def counted(g, batch, inf):
        if g.metadata.get("name") == "new-graph":
            checked.append(len(g))
        return real(g, batch, inf)

    monkeypatch.setattr(live_module, "check", counted)
    live = LiveAnalysis(editor)
    live.refresh()                                # the first graph validated, its analysis pending
    other = graph.copy()
    other.chain(("ReLU", "extra"), start="relu2")
    graph.metadata["name"] = other.metadata["name"] = "new-graph"
    order: list[str] = []
    live.inferred.connect(lambda _inference: order.append("inferred"))
    live.analyzed.connect(lambda _analysis, _problems: order.append("analyzed"))
    editor.set_graph(other)
    # the new graph validated, then analysed: a stale analysis would have been checked (and shown) too
    qtbot.waitUntil(lambda: order[-2:] == ["inferred", "analyzed"], timeout=20000)
    assert checked == [len(other)] and live.analysis is not None


@pytest.mark.slow   # a 2,003-node graph validated three times: ~0.9 s of CPU
def test_a_big_graph_is_validated_off_the_gui_thread_and_no_stale_verdict_is_shown(qtbot, monkeypatch):
    """A graph of BACKGROUND_FROM nodes (as the studio has it): the debounced validation runs on the worker
    thread. An edit says at once that the verdict shown is no longer the graph's (``checking``); a verdict
    of the graph as it was, coming back after a newer edit, is dropped; the one shown is the newest graph's."""
    import threading

    from PySide6.QtGui import QUndoStack

    import graph_editor.ui.live as live_module
    from graph_editor.model import Graph, InputSpec
    from graph_editor.ui.controller import EditorController

    n = LiveAnalysis.BACKGROUND_FROM
    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(n)], ("Linear", "fc", {"out_features": 2}),
            ("Output", "output"))
    editor = EditorController(g, QUndoStack())
    real, gate, started, threads = live_module.validate, threading.Event(), threading.Event(), []

    def held(graph, batch=1):
        threads.append(threading.get_ident())
        if len(threads) == 2:   # the first edit's check waits until a second edit has come
            started.set()
            assert gate.wait(20)
        return real(graph, batch)

    monkeypatch.setattr(live_module, "validate", held)
    live = LiveAnalysis(editor, analyze=False)
    qtbot.waitUntil(lambda: live.up_to_date, timeout=10000)          # the graph as opened, checked
    assert live.inference.ok
    shown, checking = [], []
    live.inferred.connect(shown.append)
    live.checking.connect(lambda: checking.append(live.up_to_date))
    editor.set_param("fc", "out_features", 3)                       # 3 outputs for 2 classes: an error
    assert checking == [False] and not live.up_to_date               # said at once, before any check
    qtbot.waitUntil(started.is_set, timeout=10000)
    editor.set_param("fc", "out_features", 2)                        # valid again, while the check runs
    assert checking == [False] and not live.up_to_date               # still checking: said once
    with qtbot.waitSignal(live.inferred, timeout=20000) as sig:
        gate.set()
    assert shown == [sig.args[0]] and sig.args[0].ok                 # the stale "invalid" was never shown
    assert live.up_to_date and live.inference.shapes["fc"] == (1, 2)
    assert threading.get_ident() not in threads and len(threads) == 3
