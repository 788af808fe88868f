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
