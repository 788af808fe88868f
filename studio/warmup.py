"""Load torch in the background once the window is up.

The live analysis imports torch (through ``graph_editor.analysis``) the first time a graph is
valid; done on the GUI thread that freezes the window for seconds. Importing it first on a
worker thread keeps the window responsive (Python still stalls it briefly while the big
libraries load); if the analysis asks before the import is done, it simply waits for it.
"""

from __future__ import annotations

import importlib
import logging
import threading

from graph_editor.ui.background import start_thread

log = logging.getLogger("studio")
MODULE = "graph_editor.analysis"


def warm_up(module: str = MODULE, *, after: threading.Thread | None = None) -> threading.Thread:
    """Start importing ``module`` on a daemon thread and return the thread; with ``after``, once
    that thread is done (two threads importing torch's packages at once could deadlock)."""

    def load() -> None:
        if after is not None:
            after.join()
        try:
            importlib.import_module(module)
        except Exception as exc:  # whoever needs the module will report the same failure where the user looks
            log.warning("Loading %s in the background failed: %s", module, exc)

    thread = threading.Thread(target=load, name="torch-warm-up", daemon=True)
    start_thread(thread)   # importing torch allocates without end: no collection on that thread
    return thread
