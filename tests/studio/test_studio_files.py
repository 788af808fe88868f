"""Files through the shell: save/open, broken files, unsaved changes, autosave and recovery,
drag-and-drop of a graph file, templates, recent files and module import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QUrl

from graph_editor.model import graph_to_dict, load_graph
from studio.dialogs.template_gallery import TemplateGallery
from studio.prompts import ImportRequest
from studio.recovery import RecoveryStore
from studio.resources import TEMPLATES, template_paths

from .helpers import open_template, snapshot
from .test_studio_editing import drop_on

pytestmark = pytest.mark.qt
ROOT = Path(__file__).resolve().parents[2]


def edit(window) -> None:
    window.controller.select(["conv1"])
    assert window.inspector.commit("conv1", "out_channels", 12) is None


def test_save_as_then_open_round_trips_the_graph(window, prompts, tmp_path):
    open_template(window, "lenet5")
    edit(window)
    window.controller.rename("conv1", "stem")
    assert window.isWindowModified()
    target = tmp_path / "mine.graph.json"
    prompts.answer("save_path", str(target))
    window.action["save_as"].trigger()
    assert target.is_file()
    assert not window.isWindowModified()
    assert window.windowTitle().startswith("mine.graph.json")
    saved = snapshot(window)
    assert not list(tmp_path.glob(".mine.graph.json.*"))  # the atomic write left no temporary file

    window.action["new"].trigger()
    assert set(window.controller.graph.nodes) == {"input", "output"}
    prompts.answer("open_path", str(target))
    window.action["open"].trigger()
    assert snapshot(window) == saved
    assert window.controller.graph.nodes["conv1"].label == "stem"
    assert window.s.settings.recent_files()[0] == str(target.resolve())

    edit_again = window.inspector.commit("conv1", "out_channels", 4)
    assert edit_again is None
    window.action["save"].trigger()  # Save writes to the same file without asking
    assert load_graph(target).nodes["conv1"].params["out_channels"] == 4


def test_a_broken_file_shows_the_problem_and_keeps_the_current_graph(window, prompts, tmp_path):
    open_template(window, "lenet5")
    edit(window)
    before, graph = snapshot(window), window.controller.graph
    broken = tmp_path / "broken.graph.json"
    broken.write_text('{"schema_version": 2, "nodes": [', encoding="utf-8")
    assert not window.files.open(broken)
    assert len(prompts.errors) == 1
    assert "broken.graph.json" in prompts.errors[0] and "truncated" in prompts.errors[0]
    bad_node = json.loads((TEMPLATES / "lenet5.graph.json").read_text())
    bad_node["nodes"][1]["params"]["kernel_size"] = "big"
    broken.write_text(json.dumps(bad_node), encoding="utf-8")
    assert not window.files.open(broken)
    assert "node 'conv1'" in prompts.errors[1] and "kernel_size" in prompts.errors[1]
    assert window.controller.graph is graph and snapshot(window) == before
    assert window.isWindowModified()  # the unsaved edit is still there
    assert prompts.asked("save_changes") == []  # nothing to decide: the file was never going to open
    assert any("Cannot open" in line for line in window.log.lines())


def test_closing_with_unsaved_changes_asks_and_cancel_keeps_the_window(window, prompts, tmp_path):
    open_template(window, "lenet5")
    edit(window)
    prompts.answer("save_changes", "cancel")
    assert not window.close()
    assert window.isVisible()
    assert prompts.asked("save_changes") == [("lenet5.graph.json",)]
    target = tmp_path / "kept.graph.json"
    prompts.answer("save_changes", "save")
    prompts.answer("save_path", str(target))
    window.document.path = None  # an unsaved graph: Save asks where
    assert window.close()
    assert load_graph(target).nodes["conv1"].params["out_channels"] == 12


def test_a_clean_window_closes_without_asking(window, prompts):
    open_template(window, "mlp")
    assert window.close()
    assert prompts.calls == []


@pytest.mark.process
def test_autosave_writes_only_unsaved_work_and_a_crash_is_offered_for_recovery(make_window, prompts, tmp_path):
    recovery = tmp_path / "recovery"
    first = make_window(recovery_dir=recovery)
    open_template(first, "lenet5")
    assert first.autosaver.tick() is None  # nothing unsaved: nothing written
    edit(first)
    written = first.autosaver.tick()
    assert written is not None and load_graph(written).nodes["conv1"].params["out_channels"] == 12
    # A second studio running at the same time is not offered the first one's live work.
    assert RecoveryStore(recovery).crashed() == []

    # A studio that crashes leaves its recovery file and a lock whose process is gone.
    crash = textwrap.dedent(f"""
        import os
        from graph_editor.model import load_graph
        from studio.recovery import RecoveryStore
        store = RecoveryStore({str(recovery)!r})
        graph = load_graph({str(TEMPLATES / 'mlp.graph.json')!r})
        graph.num_classes = 3
        store.write(graph, None)
        os._exit(1)
    """)
    subprocess.run([sys.executable, "-c", crash], cwd=ROOT, check=False, timeout=60)
    second = make_window(recovery_dir=recovery, settings_file=tmp_path / "second.ini")
    prompts.answer("recover", True)
    assert second.files.offer_recovery(second.s.recovery)
    assert "unsaved graph" in prompts.asked("recover")[0][0]
    assert second.controller.graph.num_classes == 3
    assert second.isWindowModified()  # recovered work is unsaved until the user saves it
    assert second.s.recovery.crashed() == []  # offered once


@pytest.mark.process
def test_declining_recovery_forgets_the_file(make_window, prompts, tmp_path):
    recovery = tmp_path / "recovery"
    crash = textwrap.dedent(f"""
        import os
        from graph_editor.model import Graph
        from studio.recovery import RecoveryStore
        RecoveryStore({str(recovery)!r}).write(Graph(), None)
        os._exit(1)
    """)
    subprocess.run([sys.executable, "-c", crash], cwd=ROOT, check=False, timeout=60)
    window = make_window(recovery_dir=recovery)
    prompts.answer("recover", False)
    assert not window.files.offer_recovery(window.s.recovery)
    assert window.s.recovery.crashed() == []
    assert list(recovery.glob("*.graph.json")) == []


@pytest.mark.process
def test_an_unreadable_autosave_is_reported_once_and_kept(make_window, prompts, tmp_path):
    recovery = tmp_path / "recovery"
    crash = textwrap.dedent(f"""
        import os
        from graph_editor.model import Graph
        from studio.recovery import RecoveryStore
        path = RecoveryStore({str(recovery)!r}).write(Graph(), None)
        path.write_text('{{"schema_version": 2, "nodes": [', encoding="utf-8")   # cut off mid-write
        os._exit(1)
    """)
    subprocess.run([sys.executable, "-c", crash], cwd=ROOT, check=False, timeout=60)
    window = make_window(recovery_dir=recovery)
    prompts.answer("recover", True)
    assert not window.files.offer_recovery(window.s.recovery)
    [(title, message)] = prompts.asked("error")
    kept = next(recovery.glob("unreadable-*.graph.json"))
    assert title == "Cannot recover the autosaved graph" and f"The file is kept as {kept}." in message
    assert kept.read_text(encoding="utf-8").startswith('{"schema_version": 2')     # nothing lost
    assert window.s.recovery.crashed() == []            # the next start does not report it again


def test_dropping_a_graph_file_on_the_window_opens_it(window, tmp_path):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(TEMPLATES / "vgg11.graph.json"))])
    drop = drop_on(window, mime, QPoint(20, 200))
    assert drop.isAccepted()
    assert window.document.path == (TEMPLATES / "vgg11.graph.json").resolve()
    assert graph_to_dict(window.controller.graph) == graph_to_dict(load_graph(TEMPLATES / "vgg11.graph.json"))


def test_the_template_gallery_lists_every_template_with_its_parameter_count(qtbot):
    gallery = TemplateGallery()
    qtbot.addWidget(gallery)
    expected = [json.loads(p.read_text())["metadata"]["name"] for p in template_paths()]
    assert gallery.names() == expected and len(expected) >= 6
    assert gallery.errors == []
    by_name = {card.info.name: card for card in gallery.cards}
    assert by_name["ResNet-18"].info.params == 11_689_512
    assert by_name["LeNet-5"].info.params == 61_706
    assert all(not card.thumb.pixmap().isNull() for card in gallery.cards)
    gallery.choose(by_name["VGG-11"])
    assert gallery.chosen() == TEMPLATES / "vgg11.graph.json"


def test_new_from_template_opens_an_unsaved_copy(window, prompts):
    prompts.answer("template", TEMPLATES / "resnet18.graph.json")
    window.action["new_template"].trigger()
    assert window.document.path is None
    assert window.windowTitle().startswith("ResNet-18")
    assert len(window.controller.graph) == len(load_graph(TEMPLATES / "resnet18.graph.json"))


def test_recent_files_are_listed_and_a_missing_one_is_reported_and_dropped(window, prompts, tmp_path):
    target = tmp_path / "a.graph.json"
    target.write_text((TEMPLATES / "mlp.graph.json").read_text())
    assert window.files.open(target)
    names = [a.text() for a in window.recent_menu.actions()]
    assert names[0].endswith("a.graph.json")
    target.unlink()
    window.recent_menu.actions()[0].trigger()
    assert "no longer exists" in prompts.errors[0]
    assert str(target.resolve()) not in window.s.settings.recent_files()


def test_import_module_from_a_factory(window, prompts, tmp_path, monkeypatch):
    (tmp_path / "tiny_net.py").write_text(textwrap.dedent("""
        from torch import nn

        def make():
            return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

        def broken():
            return nn.Sequential(nn.LSTM(8, 8))
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts.answer("import_module", ImportRequest("tiny_net:make", (64,), 0))
    window.action["import_module"].trigger()
    graph = window.controller.graph
    assert graph.input_spec.shape == (64,) and graph.num_classes == 10
    assert sorted(n.type for n in graph)[:2] == ["Flatten", "Input"]
    assert window.isWindowModified()
    before = snapshot(window)
    prompts.answer("save_changes", "discard")
    prompts.answer("import_module", ImportRequest("tiny_net:missing", (64,), 0))
    assert not window.files.import_module()
    assert "has no function 'missing'" in prompts.errors[-1]
    assert snapshot(window) == before


@pytest.mark.process
def test_start_offers_recovery_first_and_then_opens_the_file_asked_for(make_window, prompts, tmp_path):
    from studio.app import start

    recovery = tmp_path / "recovery"
    crash = textwrap.dedent(f"""
        import os
        from graph_editor.model import load_graph
        from studio.recovery import RecoveryStore
        RecoveryStore({str(recovery)!r}).write(load_graph({str(TEMPLATES / 'mlp.graph.json')!r}), None)
        os._exit(1)
    """)
    subprocess.run([sys.executable, "-c", crash], cwd=ROOT, check=False, timeout=60)
    window = make_window(recovery_dir=recovery)
    prompts.answer("recover", False)
    start(window, [str(TEMPLATES / "lenet5.graph.json")])
    assert len(prompts.asked("recover")) == 1
    assert window.document.path == (TEMPLATES / "lenet5.graph.json").resolve()


def test_a_save_that_fails_is_reported_and_the_work_stays_unsaved(window, prompts, tmp_path):
    open_template(window, "lenet5")
    edit(window)
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where a folder should be")
    prompts.answer("save_path", str(blocker / "mine.graph.json"))
    assert not window.files.save_as()
    assert prompts.errors and prompts.errors[0].startswith("Cannot save the graph")
    assert window.isWindowModified()
    assert window.document.path == (TEMPLATES / "lenet5.graph.json").resolve()


def test_save_on_a_template_opened_from_the_package_asks_where_and_never_overwrites_it(window, prompts, tmp_path):
    template = TEMPLATES / "lenet5.graph.json"
    before = template.read_bytes()
    prompts.answer("open_path", str(template))
    window.action["open"].trigger()
    edit(window)
    prompts.answer("save_path", None)                    # Ctrl+S asks where; cancelled: nothing written
    window.action["save"].trigger()
    assert prompts.asked("save_path")[0][0].endswith("lenet5.graph.json")
    assert not prompts.asked("save_path")[0][0].startswith(str(TEMPLATES))
    assert window.isWindowModified() and template.read_bytes() == before
    target = tmp_path / "lenet5.graph.json"
    prompts.answer("save_path", str(target))
    window.action["save"].trigger()
    assert load_graph(target).nodes["conv1"].params["out_channels"] == 12
    assert template.read_bytes() == before and not window.isWindowModified()
    prompts.answer("save_path", str(template))           # typed the template's own path: refused, said why
    window.action["save_as"].trigger()
    assert "one of the studio's own templates" in prompts.errors[-1]
    assert template.read_bytes() == before
