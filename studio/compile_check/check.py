"""Graph > Check Compile: where ``torch.compile`` breaks the graph's model, as warnings on its nodes.

The check runs ``python -m trainer.compilation.explain`` (:mod:`trainer.compilation.explain`) in a child process, so the
window never waits and never imports dynamo; its graph breaks go to the Problems dock under their
own source, each on its node (a click selects it), and leave it as soon as the graph changes.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QProcess, Signal

from graph_editor.model import Graph, Problem, dumps, save_graph, validate
from trainer.compilation.explain import ExplainError, Explanation, explain_command, read_explanation

from ..actions import ActionSpec

if TYPE_CHECKING:
    from ..port import StudioPort

SOURCE = "compile"
CHECK_COMPILE = ActionSpec("check_compile", "Check &Compile", "&Graph", "Shift+F7", "", False,
                           "Run torch._dynamo.explain in the background: graph breaks of torch.compile, "
                           "in Problems on their nodes")


class CompileCheck(QObject):
    """One check at a time; ``done`` carries the :class:`Explanation` (None when the check failed).
    Installed through the window's port: Graph > Check Compile (Shift+F7) runs it."""

    done = Signal(object)

    def __init__(self, port: StudioPort, parent: QObject | None = None) -> None:
        super().__init__(parent or port.owner)
        self.port = port
        self.proc: QProcess | None = None
        self.checked = ""  # the graph the shown breaks belong to (its JSON)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.action = port.add_action(CHECK_COMPILE, self.run)
        port.inferred.connect(self._on_edit)
        port.add_close_guard(self.stop)

    @property
    def running(self) -> bool:
        return self.proc is not None

    def run(self) -> bool:
        """Start the check of the current graph; False (saying why) when it cannot start now."""
        graph: Graph = self.port.graph
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
        program, *args = explain_command(path)
        self.proc.start(program, args)
        self._say("Check Compile: running torch._dynamo.explain in the background…", "info")
        self.port.status("Checking where torch.compile breaks the graph…")
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
            result = read_explanation(code, out, err)
        except ExplainError as exc:
            self._say(f"Check Compile failed: {exc}", "error")
            self.done.emit(None)
            return
        self.show(result)
        self.done.emit(result)

    def show(self, result: Explanation) -> None:
        """Put the breaks into Problems (on their nodes) and say the counts in the log."""
        self.port.set_problems(result.problems(), source=SOURCE)
        level = "warning" if result.break_count else "info"
        self._say(f"Check Compile: {result.graph_count} graph(s), {result.break_count} graph break(s)"
                  f" ({result.seconds:.1f} s on {result.inputs} inputs)", level)
        if result.breaks:
            self.port.show_problems()

    def _on_edit(self, _inference: object) -> None:
        if self.checked and dumps(self.port.graph) != self.checked:
            self.checked = ""
            self.port.set_problems(list[Problem](), source=SOURCE)

    def _say(self, text: str, level: str) -> None:
        """The outcome in the status bar, where the check was started from, and in the log."""
        self.port.status(text, 15_000)
        self.port.log(text, level)
