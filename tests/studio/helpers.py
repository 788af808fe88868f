"""Helpers for the studio tests: scripted answers to the studio's questions, templates opened in a
window, the graph as saved."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from graph_editor.model import graph_to_dict
from studio.resources import TEMPLATES


class ScriptedPrompts:
    """Answers the studio's questions from queues; an unexpected question fails the test."""

    def __init__(self) -> None:
        self.answers: dict[str, list[Any]] = defaultdict(list)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.errors: list[str] = []

    def answer(self, question: str, *values: Any) -> None:
        self.answers[question].extend(values)

    def asked(self, question: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == question]

    def _next(self, question: str, *args: Any) -> Any:
        self.calls.append((question, args))
        queue = self.answers[question]
        assert queue, f"the studio asked {question}{args} and the test had no answer"
        return queue.pop(0)

    def save_changes(self, parent, document):
        return self._next("save_changes", document)

    def open_path(self, parent, directory):
        return self._next("open_path", directory)

    def save_path(self, parent, suggested):
        return self._next("save_path", suggested)

    def error(self, parent, title, message):
        self.calls.append(("error", (title, message)))
        self.errors.append(f"{title}: {message}")

    def recover(self, parent, description):
        return self._next("recover", description)

    def template(self, parent):
        return self._next("template")

    def import_module(self, parent):
        return self._next("import_module")

    def block_name(self, parent, suggested):
        return self._next("block_name", suggested)

    def running_run(self, parent):
        return self._next("running_run")

    def delete_runs(self, parent, description):
        return self._next("delete_runs", description)

    def number(self, parent, title, label, value, low, high, decimals):
        return self._next("number", title, value)


def settle(window) -> None:
    """Run the debounced validation and the analysis now."""
    window.live.refresh()
    window.live.analyze_now()


def open_template(window, name: str = "lenet5") -> None:
    assert window.files.open(TEMPLATES / f"{name}.graph.json")
    settle(window)


def snapshot(window) -> dict:
    """The graph as saved, nodes in id order (undoing a delete puts nodes back at the end)."""
    data = graph_to_dict(window.controller.graph)
    data["nodes"] = sorted(data["nodes"], key=lambda n: n["id"])
    return data
