"""The Problems panel and ``torch-studio validate`` give one verdict on a graph (one code path:
graph_editor.analysis.check.check_graph): the same errors and warnings, word for word."""

from __future__ import annotations

import json

import pytest

from studio.cli import main
from studio.docks.problems import SEVERITY_ROLE

from ..helpers import TEMPLATES, settle

pytestmark = pytest.mark.qt

MLP = json.loads((TEMPLATES / "mlp.graph.json").read_text())


def _variant(tmp_path, name: str, edit) -> str:
    data = json.loads(json.dumps(MLP))
    edit(data)
    path = tmp_path / f"{name}.graph.json"
    path.write_text(json.dumps(data))
    return str(path)


def _rename(old: str, new: str):
    def edit(data: dict) -> None:
        text = json.dumps(data).replace(f'"{old}"', f'"{new}"')
        data.clear()
        data.update(json.loads(text))
    return edit


def _widen(data: dict) -> None:
    next(n for n in data["nodes"] if n["id"] == "fc1")["params"]["out_features"] = 2_015_625_000


def _validate_lines(capsys, path: str) -> list[str]:
    main(["validate", path])
    out = capsys.readouterr()
    return sorted(line for line in (out.out + out.err).splitlines() if line.startswith(("error: ", "warning: ")))


def _panel_lines(window) -> list[str]:
    items = [window.problems.list.item(i) for i in range(window.problems.count())]
    return sorted(f"{i.data(SEVERITY_ROLE)}: {i.text()}" for i in items)


@pytest.mark.parametrize("case", ["forward", "training", "__init__", "billion", "template"])
def test_the_problems_panel_says_what_validate_says(window, capsys, tmp_path, case):
    """The panel listed nothing for a node named 'forward' (training and validate refuse it) and said
    nothing of a 129-billion-parameter Linear (validate warns of its size)."""
    edits = {"billion": _widen, "template": lambda d: None}
    path = _variant(tmp_path, case, edits.get(case) or _rename("fc1", case))
    expected = _validate_lines(capsys, path)
    assert window.files.open(path)
    settle(window)
    assert _panel_lines(window) == expected
    assert (expected == []) == (case == "template")
