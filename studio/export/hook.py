"""The Export menu and the toolbar's one-click ONNX, plugged into the window through its port."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from .dialog import ExportDialog

if TYPE_CHECKING:
    from ..port import StudioPort

EXPORT_MENU = "E&xport"


def default_export_dir(graph_path: str | Path | None) -> Path:
    """Where exports of the graph at ``graph_path`` go (see :meth:`ExportHook._default_dir`)."""
    import os

    import platformdirs

    from ..resources import ASSETS

    if graph_path is not None:
        folder = Path(graph_path).resolve().parent
        if not folder.is_relative_to(ASSETS.resolve()) and os.access(folder, os.W_OK):
            return folder / "exports"
    return Path(platformdirs.user_documents_dir()) / "Torch Studio exports"


class ExportHook(QObject):
    """The Export menu and the one-click "Export ONNX" toolbar button, added through the window's port.

    One click exports the best checkpoint of the newest completed run of the current run's graph
    (``current_run()`` gives the run this window started last; :func:`exporters.run_source.one_click_run`
    chooses), or, with no run, the graph being edited (a snapshot taken at the click), into ``export_dir()``, and opens the
    report dialog. Installed by the composition root: ``ExportHook(port, db_url=..., current_run=...)``.
    """

    def __init__(self, port: StudioPort, db_url: str | None = None,
                 current_run: Callable[[], int | None] | None = None,
                 export_dir: Callable[[], Path] | None = None) -> None:
        super().__init__(port.owner)
        from exporters.registry import describe_formats  # read from the format files: no torch at start-up

        from ..actions import ActionSpec

        self.port, self.db_url = port, db_url
        self.current_run = current_run or (lambda: None)
        self.export_dir = export_dir or self._default_dir
        self.dialogs: list[ExportDialog] = []
        self.actions: dict[str, Any] = {}
        formats = describe_formats()
        last = max((k for k, i in enumerate(formats) if i.toolbar), default=len(formats) - 1)
        for k, info in enumerate(formats):
            spec = ActionSpec(f"export_{info.name}", info.menu_text, EXPORT_MENU, info.shortcut or None,
                              "export" if info.toolbar else "", info.toolbar, info.tip,
                              separator=k == last + 1)   # the one-click format(s) apart from the rest
            self.actions[info.name] = port.add_action(spec, partial(self.export, info.name))
        self.menu = port.menu(EXPORT_MENU)
        self.menu.aboutToShow.connect(self._refresh)
        port.add_close_guard(self.close_guard)

    def _refresh(self) -> None:
        from exporters import get_format

        has_run = self.current_run() is not None
        for fmt, action in self.actions.items():
            form = get_format(fmt)
            missing = form.missing()
            action.setEnabled(missing is None and (has_run or not form.needs_run))
            action.setToolTip(missing or ("needs a run: train first" if form.needs_run and not has_run
                                          else action.statusTip()))

    def _default_dir(self) -> Path:
        """Beside the graph file (``exports/``), unless it is one of the studio's own files (a
        template inside the installed package) or its folder is not writable: then the user's
        documents folder."""
        return default_export_dir(self.port.document_path)

    def export(self, fmt: str, run_id: int | None = None) -> ExportDialog:
        """Start exporting run ``run_id`` as ``fmt`` and show the dialog; returns it. Without ``run_id``
        (one click): the best checkpoint of the newest completed run of the current run's graph
        (:func:`exporters.run_source.one_click_run`), or else the graph being edited."""
        from exporters import from_graph, from_run

        current = self.current_run() if run_id is None else None
        if run_id is not None or current is not None:
            def make() -> Any:
                from exporters.run_source import one_click_run

                chosen = run_id if run_id is not None else one_click_run(current, self.db_url)
                assert chosen is not None   # one_click_run gives a run for a current run
                return from_run(chosen, store=self.db_url)
        else:
            graph = self.port.graph.copy()  # the user may keep editing while it exports

            def make() -> Any:
                return from_graph(graph)
        dialog = ExportDialog(make, fmt, self.export_dir(), parent=self.port.owner,
                              untrained=run_id is None and current is None)
        dialog.node_chosen.connect(self.port.reveal)
        dialog.exported.connect(lambda ok, d=dialog: self._log(d, ok))
        self.dialogs = [d for d in self.dialogs if d.isVisible() or not d.finished_export] + [dialog]
        dialog.show()
        dialog.start()
        return dialog

    def _log(self, dialog: ExportDialog, ok: bool) -> None:
        if dialog.report is not None:
            level = "info" if ok else "warning"
            self.port.log(f"{dialog.windowTitle()}: {dialog.verdict.text()} ({dialog.report.path})", level)
        else:
            self.port.log(f"{dialog.windowTitle()} failed: {dialog.status.text()}", "warning")

    def close_guard(self) -> bool:
        """Let the window close after any export still running has ended (it writes files)."""
        for dialog in self.dialogs:
            dialog.wait()
        return True
