"""The Train dialog with several GPUs listed: DDP and FSDP2 choices with one GPU's predicted memory,
the spec's distributed section written, and the several-machines view (torchrun lines, sbatch script).

GPUs cannot exist here: the device listing's nvidia-smi query is replaced by a fixed list (the one
mock); everything else is real, driven by real key presses and clicks."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from torch.distributed.run import get_args_parser

from graph_editor.model.serialize import load_graph
from graph_editor.model.units import nbytes
from studio.training import devices
from studio.training.devices import Device
from studio.training.train_dialog import TrainDialog
from trainer.checks import load_data
from trainer.distributed.scripts import commands_text, launch_from_spec
from trainer.memory.doctor import resident_data_bytes
from trainer.memory.per_rank import per_rank
from trainer.spec import load_spec, spec_from_dict

ROOT = Path(__file__).resolve().parents[3]
DIGITS_CNN = ROOT / "assets/templates/digits_cnn.graph.json"
pytestmark = pytest.mark.qt


def gpus(n: int, mib: int = 40960) -> list[Device]:
    return [Device(f"cuda:{i}", "NVIDIA A100-SXM4-40GB", mib) for i in range(n)]


def dialog(qtbot, monkeypatch, listed: list[Device]) -> TrainDialog:
    monkeypatch.setattr(devices, "find_gpus", lambda timeout=5.0: listed)
    d = TrainDialog(load_graph(DIGITS_CNN), devices.available_devices())
    qtbot.addWidget(d)
    d.show()
    qtbot.waitUntil(lambda: d.dataset_summary is not None or bool(d.data_error), timeout=60_000)
    return d


def choose(d: TrainDialog, label_start: str) -> None:
    """Move the device box to the entry starting with ``label_start`` with arrow keys, as a user would."""
    target = next(i for i in range(d.device.count()) if d.device_box.choices[i].label.startswith(label_start))
    d.device.setFocus()
    key = Qt.Key.Key_Down if target > d.device.currentIndex() else Qt.Key.Key_Up
    while d.device.currentIndex() != target:
        QTest.keyClick(d.device, key)


def test_the_choices_follow_the_listed_gpus(qtbot, monkeypatch):
    four = dialog(qtbot, monkeypatch, gpus(4))
    labels = [c.label for c in four.device_box.choices]
    assert labels[4:6] == ["all 4 GPUs (DDP)", "FSDP2 over 4 GPUs"] and labels[-1].startswith("CPU")
    assert [four.device.itemData(i) for i in range(4, 6)] == ["cuda", "cuda"]
    one = dialog(qtbot, monkeypatch, gpus(1))
    assert [c.strategy for c in one.device_box.choices] == ["none", "none"]
    assert not one.device_box.figures.isVisible()


@pytest.mark.slow
def test_ddp_and_fsdp2_write_the_distributed_section_with_per_gpu_memory(qtbot, monkeypatch):
    d = dialog(qtbot, monkeypatch, gpus(4))
    d.wait_memory()
    assert d.device_box.wait()
    qtbot.waitUntil(lambda: d.device_box.per_gpu is not None, timeout=60_000)
    spec = spec_from_dict(d.spec())
    expected = oracle(spec, 4)
    for strategy, label in (("ddp", "all 4 GPUs (DDP)"), ("fsdp2", "FSDP2 over 4 GPUs")):
        choose(d, label)
        assert d.device.currentText() == f"{label}: {nbytes(expected[strategy].peak_bytes)} per GPU"
        spec = spec_from_dict(d.spec())
        assert (spec.device, spec.distributed.strategy, spec.distributed.nproc_per_node) == ("cuda", strategy, 4)
        assert d.device_box.figures.isVisible()
        assert d.device_box.figures.text().startswith(f"Each of 4 GPUs runs batch {spec.train.batch_size // 4}: "
                                                      f"peak {nbytes(expected[strategy].peak_bytes)}")
    assert expected["fsdp2"].peak_bytes < expected["ddp"].peak_bytes
    choose(d, "CPU")
    spec = spec_from_dict(d.spec())
    assert (spec.device, spec.distributed.strategy, spec.distributed.nproc_per_node) == ("cpu", "none", 1)
    assert not d.device_box.figures.isVisible()


def oracle(spec, n: int):
    """The trainer's formulas, with the digits held on the device by every rank."""
    resident = resident_data_bytes(spec, load_data(spec, []))
    assert resident > 0
    return per_rank(load_graph(DIGITS_CNN), spec, n, device="cuda", resident=resident)


@pytest.mark.slow
def test_the_memory_panel_shows_one_gpus_share_of_the_chosen_strategy(qtbot, monkeypatch):
    d = dialog(qtbot, monkeypatch, gpus(4))
    d.wait_memory()
    qtbot.waitUntil(lambda: d.predicted_peak() is not None, timeout=60_000)
    one_process = d.memory.bar.figures
    assert one_process is not None and one_process.peak == d.predicted_peak()
    assert d.memory.title() == "Memory (predicted peak of a training step)"
    for strategy, label in (("ddp", "all 4 GPUs (DDP)"), ("fsdp2", "FSDP2 over 4 GPUs")):
        choose(d, label)
        d.wait_memory()
        assert d.device_box.wait()
        tag = f"one GPU leaves for training ({strategy.upper()} over 4)"
        qtbot.waitUntil(lambda tag=tag: tag in d.memory.verdict.text(), timeout=60_000)   # both predictions shown
        rank = oracle(spec_from_dict(d.spec()), 4)[strategy]
        shown = d.memory.bar.figures
        assert d.memory.title() == f"Memory (predicted peak of a training step on each of 4 GPUs, {strategy.upper()})"
        assert (shown.peak, shown.batch) == (rank.peak_bytes, 16)
        assert sum(v for _, v, _ in shown.bands()) == rank.peak_bytes           # every part in a band
        bands = dict((label, v) for label, v, _ in shown.bands())
        assert bands["dataset"] == rank.parts["data"]                           # the whole dataset on each GPU
        assert f"Peak {nbytes(rank.peak_bytes)} at batch 16" in d.memory.verdict.text()
    choose(d, "CPU")
    d.wait_memory()
    qtbot.waitUntil(lambda: d.memory.title() == "Memory (predicted peak of a training step)", timeout=60_000)
    qtbot.waitUntil(lambda: d.predicted_peak() is not None and d.memory.bar.figures is not None
                    and d.memory.bar.figures.peak == d.predicted_peak(), timeout=60_000)
    assert d.memory.bar.figures.batch == 64


def test_a_share_that_does_not_fit_its_gpus_blocks_the_start(qtbot, monkeypatch):
    d = dialog(qtbot, monkeypatch, gpus(2, mib=513))       # 513 MiB: under a MiB left after the CUDA context
    choose(d, "all 2 GPUs (DDP)")
    d.wait_memory()
    assert d.device_box.wait()
    qtbot.waitUntil(lambda: any("per GPU" in p for p in d.problem_list()), timeout=60_000)
    line = next(p for p in d.problem_list() if p.startswith("device:"))
    assert "DDP is predicted to need" in line and "FSDP2 needs" in line
    assert "(does not fit)" in d.device.currentText() and not d.start_button.isEnabled()


def test_an_initial_spec_selects_its_strategy(qtbot, monkeypatch):
    monkeypatch.setattr(devices, "find_gpus", lambda timeout=5.0: gpus(2))
    initial = {"device": "cuda", "distributed": {"strategy": "fsdp2", "nproc_per_node": 2}}
    d = TrainDialog(load_graph(DIGITS_CNN), devices.available_devices(), initial=initial)
    qtbot.addWidget(d)
    assert d.device.currentIndex() == 3 and d.device_box.choice().strategy == "fsdp2"
    d.reject()                       # closed: its predictions stop


@pytest.mark.process
def test_the_several_machines_view_writes_lines_that_torchrun_reads(qtbot, monkeypatch, tmp_path):
    d = dialog(qtbot, monkeypatch, gpus(4))
    choose(d, "FSDP2 over 4 GPUs")
    QTest.mouseClick(d.device_box.launch_button, Qt.MouseButton.LeftButton)
    view = d.device_box.launch_dialog
    qtbot.waitExposed(view)
    assert "Cannot write the launch lines" in view.status.text() and not view.copy_lines.isEnabled()
    QTest.keyClicks(view.endpoint, "node01:29500")
    view.nnodes.setFocus()
    QTest.keyClick(view.nnodes, Qt.Key.Key_Up)                     # 2 -> 4 machines
    QTest.keyClick(view.nnodes, Qt.Key.Key_Up)
    view.path.selectAll()
    QTest.keyClicks(view.path, str(tmp_path / "shared" / "wide.spec.json"))
    QTest.keyClicks(view.db, "postgresql://team@db/runs")
    text = view.lines.toPlainText()
    lines = [line for line in text.splitlines() if line.startswith("torchrun ")]
    assert len(lines) == 4 and "fsdp2 over 16 processes (4 node(s) x 4)" in text
    for rank, line in enumerate(lines):
        a = get_args_parser().parse_args(shlex.split(line)[1:])
        assert (a.nnodes, a.nproc_per_node, a.node_rank, a.rdzv_endpoint) == ("4", "4", rank, "node01:29500")
        assert a.training_script_args == ["run", str(tmp_path / "shared" / "wide.spec.json"), "--db",
                                          "postgresql://team@db/runs"]
    QTest.mouseClick(view.copy_lines, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == text

    QTest.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    saved = tmp_path / "shared" / "wide.spec.json"
    spec = load_spec(saved)                                          # the file the lines name, as a rank reads it
    assert (spec.distributed.strategy, spec.distributed.nnodes, spec.distributed.nproc_per_node) == ("fsdp2", 4, 4)
    assert commands_text(launch_from_spec(spec, saved, db="postgresql://team@db/runs")) == text
    script = view.script.toPlainText()
    assert "#SBATCH --nodes=4" in script and "#SBATCH --gpus-per-node=4" in script
    if shutil.which("bash"):
        (tmp_path / "job.sbatch").write_text(script)
        assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")]).returncode == 0

    view.nproc.setFocus()
    view.nproc.selectAll()
    QTest.keyClicks(view.nproc, "3")                                # 64 does not divide among 12 processes
    assert "train.batch_size: the global batch 64 must divide evenly among 12" in view.status.text()
    assert view.lines.toPlainText() == "" and not view.copy_script.isEnabled()
