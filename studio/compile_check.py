"""Graph > Check Compile: where ``torch.compile`` breaks the graph's model, as warnings on its nodes.

The check runs ``python -m trainer.explain`` (:mod:`trainer.explain`) in a child process, so the
window never waits and never imports dynamo; its graph breaks go to the Problems dock under their
own source, each on its node (a click selects it), and leave it as soon as the graph changes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Protocol

from PySide6.QtCore import QObject, QProcess, Signal

from graph_editor.model import Graph, Problem, dumps, save_graph, validate
from trainer.explain import Explanation

SOURCE = "compile"


class Window(Protocol):  # the narrow port this feature needs of the main window
    controller: object
    problems: object
    log: object
    docks: dict

    def statusBar(self) -> object: ...  # noqa: N802 (Qt's name)


class CompileCheck(QObject):
    """One check at a time; ``done`` carries the :class:`Explanation` (None when the check failed)."""

    done = Signal(object)

    def __init__(self, window: Window, parent: QObject | None = None) -> None:
        super().__init__(parent or window)  # type: ignore[arg-type]
        self.window = window
        self.proc: QProcess | None = None
        self.checked = ""  # the graph the shown breaks belong to (its JSON)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        window.live.inferred.connect(self._on_edit)  # type: ignore[attr-defined]
        window.add_close_guard(self.stop)  # type: ignore[attr-defined]

    @property
    def running(self) -> bool:
        return self.proc is not None

    def run(self) -> bool:
        """Start the check of the current graph; False (saying why) when it cannot start now."""
        graph: Graph = self.window.controller.graph  # type: ignore[attr-defined]
        if self.proc is not None:
            self._say("Check Compile: a check is already running", "warning")
            return False
        errors = [p for p in validate(graph).problems if p.severity == "error"]
        if errors:
            self._say(f"Check Compile: fix the graph's {len(errors)} problem(s) first", "error")
            return False
        self._tmp = tempfile.TemporaryDirectory(prefix="torch-studio-compile-")
        path = os.path.join(self._tmp.name, "graph.graph.json")
        save_graph(graph, path)
        self.checked = dumps(graph)
        self.proc = QProcess(self)
        self.proc.setWorkingDirectory(os.getcwd())  # Module nodes import their classes from here too
        self.proc.finished.connect(self._on_finished)
        self.proc.start(sys.executable, ["-m", "trainer.explain", path, "--json"])
        self._say("Check Compile: running torch._dynamo.explain in the background…", "info")
        self.window.statusBar().showMessage("Checking where torch.compile breaks the graph…", 6000)  # type: ignore[attr-defined]
        return True

    def stop(self) -> bool:
        """End a running check (the window is closing: nothing waits for its answer); always True."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.finished.disconnect(self._on_finished)
            proc.kill()
            proc.waitForFinished(5000)
            proc.deleteLater()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return True

    def _on_finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        proc, self.proc = self.proc, None
        assert proc is not None
        out = bytes(proc.readAllStandardOutput().data()).decode("utf-8", "replace").strip()
        err = bytes(proc.readAllStandardError().data()).decode("utf-8", "replace").strip()
        proc.deleteLater()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        try:
            if code != 0:
                raise ValueError(next((ln for ln in reversed(err.splitlines()) if ln.strip()), f"exit {code}"))
            result = Explanation.from_dict(json.loads(out.splitlines()[-1]))
        except (ValueError, IndexError, TypeError) as exc:
            self._say(f"Check Compile failed: {str(exc).removeprefix('error: ')}", "error")
            self.done.emit(None)
            return
        self.show(result)
        self.done.emit(result)

    def show(self, result: Explanation) -> None:
        """Put the breaks into Problems (on their nodes) and say the counts in the log."""
        self.window.problems.set_problems(result.problems(), source=SOURCE)  # type: ignore[attr-defined]
        level = "warning" if result.break_count else "info"
        self._say(f"Check Compile: {result.graph_count} graph(s), {result.break_count} graph break(s)"
                  f" ({result.seconds:.1f} s on {result.inputs} inputs)", level)
        if result.breaks:
            self.window.docks["problems"].show()
            self.window.docks["problems"].raise_()

    def _on_edit(self, _inference: object) -> None:
        if self.checked and dumps(self.window.controller.graph) != self.checked:  # type: ignore[attr-defined]
            self.checked = ""
            self.window.problems.set_problems(list[Problem](), source=SOURCE)  # type: ignore[attr-defined]

    def _say(self, text: str, level: str) -> None:
        self.window.log.append(text, level)  # type: ignore[attr-defined]
