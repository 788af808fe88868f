"""LiveAnalysis: debounced validation, then the torch analysis."""

from __future__ import annotations

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
    graph.set_param("fc1", "out_features", 3)  # the old graph is no longer followed
    assert not live._timer.isActive()
