"""File > Open of a hostile graph file (issue 18, D12): a dialog that says what and where, never a
traceback swallowed by Qt with nothing shown, and the graph being edited stays."""

from __future__ import annotations

import pytest

from .helpers import open_template, snapshot

pytestmark = pytest.mark.qt

HOSTILE = {
    "deep.graph.json": ('{"schema_version": 2, "metadata": ' + "[" * 1000 + "]" * 1000 + "}", "levels deep"),
    "digits.graph.json": ('{"schema_version": ' + "9" * 5000 + "}", "a number of 5000 digits at line 1"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_file_open_of_a_hostile_file_shows_a_dialog_and_keeps_the_graph(window, prompts, tmp_path, name):
    open_template(window, "lenet5")
    before, graph = snapshot(window), window.controller.graph
    text, words = HOSTILE[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    prompts.answer("open_path", str(tmp_path / name))
    window.action["open"].trigger()                 # File > Open, the path answered by the scripted prompts
    assert len(prompts.errors) == 1
    assert name in prompts.errors[0] and words in prompts.errors[0] and len(prompts.errors[0]) < 600
    assert window.controller.graph is graph and snapshot(window) == before
