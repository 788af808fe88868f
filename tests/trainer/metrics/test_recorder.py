"""The recorder thread (trainer.metrics.recorder): once a write is done it holds nothing of it.

A DDP rank's recorder thread held its last write, a closure over the job, and so the wrapped model and
its process groups, past ``destroy_process_group`` (tests/trainer/distributed/test_rank_end.py).
"""

from __future__ import annotations

import functools
import gc
import threading
import weakref

from trainer.metrics.recorder import Recorder


def recorder_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "trainer-recorder" and t.is_alive())


def test_the_recorder_holds_no_write_once_done_and_its_thread_ends():
    class Held:
        pass

    held = Held()
    ref = weakref.ref(held)
    recorder = Recorder()
    recorder.submit(functools.partial(id, held))   # a write holding an object (as the job's writes hold the job)
    recorder.flush()
    del held
    gc.collect()
    assert ref() is None                           # the waiting thread keeps nothing of the last write alive
    recorders = recorder_threads()
    recorder.close()
    assert recorder_threads() == recorders - 1
