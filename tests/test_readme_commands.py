"""The README's commands are the commands there are (issue 22: it said ``runs ... show RUN_ID`` for
``torch-studio show``, and gave ``--db`` a path that the store refuses)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studio.cli import COMMAND_OWNERS
from trainer.store.runs import RunStore, StoreError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"torch-studio +([^\s`'\"]+)")


def test_every_torch_studio_command_in_the_docs_is_a_command():
    named = {(doc.name, m.group(1)) for doc in DOCS for m in COMMAND.finditer(doc.read_text(encoding="utf-8"))}
    assert {word for _doc, word in named} & set(COMMAND_OWNERS)       # the check finds what it looks for
    unknown = sorted((doc, word) for doc, word in named
                     if word not in COMMAND_OWNERS and not word.endswith(".graph.json") and not word.startswith("-"))
    assert unknown == []
    readme = {word for doc, word in named if doc == "README.md"}
    assert sorted(set(COMMAND_OWNERS) - readme) == []             # and the README names every command


def test_a_path_given_as_db_is_refused_naming_the_url_to_use(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`--db /path/runs.sqlite` is refused" in readme     # what the README promises, the store does
    path = tmp_path / "runs.sqlite"
    with pytest.raises(StoreError) as refused:
        RunStore(str(path)).runs()                             # every command opens --db this way
    assert str(refused.value) == f"'{path}' is not a database URL: for a SQLite file use sqlite:///{path}"
    assert not path.exists()                                   # nothing was made at the path
