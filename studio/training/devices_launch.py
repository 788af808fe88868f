""""Launch on several machines...": the ``torchrun`` line of each machine and a Slurm script.

The Train dialog's spec, with the machines, processes per machine, strategy and rendezvous set here,
is saved as a spec file every machine reads (a shared folder); :mod:`trainer.distributed.scripts` writes
the lines from it, exactly as ``torch-studio launch SPEC [--slurm]`` prints them. Each text has a
Copy button; a problem (a batch that does not divide among the processes, a bad endpoint) is shown
instead of lines that would fail.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from trainer.distributed.scripts import commands_text, launch_from_spec, sbatch_script, slug
from trainer.spec import MAX_NNODES, MAX_NPROC, SpecError, spec_from_dict


class LaunchDialog(QDialog):
    """The launch lines for ``spec`` (a run spec dict) on several machines."""

    def __init__(self, spec: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Launch on several machines")
        self.base = copy.deepcopy(spec)
        dist = dict(self.base.get("distributed") or {})
        graph = (self.base.get("model") or {}).get("graph")
        name = str(self.base.get("name") or (graph.get("metadata", {}).get("name") if isinstance(graph, dict) else "")
                   or "run").strip() or "run"
        root = QVBoxLayout(self)
        form = QFormLayout()
        self.nnodes = QSpinBox(minimum=1, maximum=MAX_NNODES, value=max(2, int(dist.get("nnodes", 1))))
        self.nproc = QSpinBox(minimum=1, maximum=MAX_NPROC, value=max(1, int(dist.get("nproc_per_node", 1))))
        self.strategy = QComboBox()
        self.strategy.addItems(["ddp", "fsdp2"])
        self.strategy.setCurrentText(str(dist.get("strategy")) if dist.get("strategy") in ("ddp", "fsdp2") else "ddp")
        endpoint = str(dist.get("rdzv_endpoint") or "")
        self.endpoint = QLineEdit("" if endpoint.startswith("localhost") else endpoint)
        self.endpoint.setPlaceholderText("first machine's address:port, e.g. node01:29500")
        self.rdzv_id = QLineEdit(str(dist.get("rdzv_id") or "torch-studio"))
        self.db = QLineEdit()
        self.db.setPlaceholderText("postgresql://user@dbhost/runs (a store every machine reaches)")
        self.path = QLineEdit(str(Path.home() / "torch-studio-launch" / f"{slug(name) or 'run'}.spec.json"))
        save_row = QHBoxLayout()
        save_row.addWidget(self.path, 1)
        self.browse = QPushButton("Browse...")
        self.browse.clicked.connect(self._browse)
        self.save_button = QPushButton("Save spec")
        self.save_button.clicked.connect(self.save)
        save_row.addWidget(self.browse)
        save_row.addWidget(self.save_button)
        form.addRow("machines", self.nnodes)
        form.addRow("processes per machine", self.nproc)
        form.addRow("strategy", self.strategy)
        form.addRow("rendezvous (host:port)", self.endpoint)
        form.addRow("rendezvous id", self.rdzv_id)
        form.addRow("run store URL", self.db)
        form.addRow("spec file (shared folder)", save_row)
        root.addLayout(form)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        root.addWidget(self.status)
        self.tabs = QTabWidget()
        self.lines, self.copy_lines = self._text_tab("torchrun, each machine", True)
        self.script, self.copy_script = self._text_tab("Slurm (sbatch)", False)
        root.addWidget(self.tabs, 1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        root.addWidget(close)
        for w in (self.nnodes, self.nproc):
            w.valueChanged.connect(self.refresh)
        self.strategy.currentIndexChanged.connect(self.refresh)
        for e in (self.endpoint, self.rdzv_id, self.db, self.path):
            e.textChanged.connect(self.refresh)
        self.resize(900, 640)
        self.refresh()

    def _text_tab(self, title: str, wrap: bool) -> tuple[QPlainTextEdit, QPushButton]:
        page = QWidget()
        lay = QVBoxLayout(page)
        text = QPlainTextEdit()
        text.setReadOnly(True)
        text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth if wrap else   # one long line a machine
                             QPlainTextEdit.LineWrapMode.NoWrap)
        text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        lay.addWidget(text, 1)
        button = QPushButton("Copy")
        button.clicked.connect(lambda: QGuiApplication.clipboard().setText(text.toPlainText()))
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(button)
        lay.addLayout(row)
        self.tabs.addTab(page, title)
        return text, button

    def spec(self) -> dict[str, Any]:
        """The Train dialog's spec with this view's distributed settings."""
        out = copy.deepcopy(self.base)
        dist = dict(out.get("distributed") or {})
        dist.update(strategy=self.strategy.currentText(), nnodes=self.nnodes.value(), node_rank=0,
                    nproc_per_node=self.nproc.value(), rdzv_endpoint=self.endpoint.text().strip(),
                    rdzv_id=self.rdzv_id.text().strip())
        out["distributed"] = dist
        return out

    def refresh(self) -> None:
        """Rewrite both texts from the settings, or say what stops them."""
        if not self.endpoint.text().strip():
            self._problem(["rendezvous: name the first machine's address and a free port (host:port) that "
                           "every machine reaches"])
            return
        try:
            rs = spec_from_dict(self.spec())
            launch = launch_from_spec(rs, self.path.text().strip() or "spec.json", db=self.db.text().strip())
        except SpecError as exc:
            self._problem(exc.problems)
            return
        self.lines.setPlainText(commands_text(launch))
        self.script.setPlainText(sbatch_script(launch))
        self.status.setText(f"{launch.strategy.upper()} over {launch.world_size} processes. Save the spec where "
                            "every machine reads it, then run each machine's line (or sbatch the script).")
        self.copy_lines.setEnabled(True)
        self.copy_script.setEnabled(True)
        self.save_button.setEnabled(True)

    def _problem(self, problems: list[str]) -> None:
        self.status.setText("Cannot write the launch lines:\n" + "\n".join(problems))
        self.lines.setPlainText("")
        self.script.setPlainText("")
        for b in (self.copy_lines, self.copy_script, self.save_button):
            b.setEnabled(False)

    def save(self) -> Path | None:
        """Write the spec file the lines name; its folder is made if missing."""
        path = Path(self.path.text().strip()).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.spec(), indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            self.status.setText(f"Cannot save {path}: {exc.strerror or exc}")
            return None
        self.status.setText(f"Saved {path}. Run each machine's line there (or sbatch the script).")
        return path

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Spec file", self.path.text(), "Run specs (*.json)")
        if path:
            self.path.setText(path)

