"""``python -m trainer run SPEC.json``: the training worker (see :mod:`trainer.worker`).

SIGINT and SIGTERM are noted from the first line, before torch is imported: a Ctrl-C while the worker
starts is a stop at its first step, never a KeyboardInterrupt traceback, and one after the run ended
leaves the exit status alone.

Python's cyclic garbage collector is off while the worker imports torch, SQLAlchemy and the rest: they make
~234,000 objects that live as long as the process, and meanwhile the collector ran ~540 times (4 of them
over every object), 0.25 s. After the imports every object alive moves to the permanent generation
(``gc.freeze``) and the collector is on again: a later collection looks only at what the run makes (the
setup, ``torch._dynamo`` imported with the first optimizer). A digits_cnn run's ``run_started`` came after
2.18-2.42 s against 2.89-3.03 s (four paired starts on two cores); the imports' own garbage in cycles
(~2 MiB) stays, frozen.
"""

import gc
import signal
import sys

gc.disable()   # on again after the imports, below

_early: list[str] = []
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda signum, _frame: _early.append(signal.Signals(signum).name))

from trainer.distributed.lifeline import die_with_parent, gloo_threads_alive, is_torchrun_child  # noqa: E402

if is_torchrun_child():   # a rank dies with its launcher, even one killed with SIGKILL (trainer.distributed.lifeline)
    die_with_parent()

from trainer.compilation.cache import compile_cache_dir as _compile_cache_dir  # noqa: E402
from trainer.threads import compiles as _compiles  # noqa: E402
from trainer.threads import configure as _configure_threads  # noqa: E402

# before torch is imported: OpenMP reads its wait policy and thread count once
_configure_threads(compiled=_compiles(sys.argv[1:]))
_compile_cache_dir()   # before torch is imported too: importing it sets Inductor's /tmp default

from trainer.data.forkserver import start_early as _start_loader_helper  # noqa: E402
from trainer.memory.heap import keep_freed_heap as _keep_freed_heap  # noqa: E402

if not _start_loader_helper(sys.argv[1:]):   # an image run's loader helper imports torch beside this import
    _keep_freed_heap()   # data held in memory: the pages a CPU step frees stay for the next (trainer.memory.heap)

from trainer.worker import main  # noqa: E402 - after the handlers: this import takes seconds

gc.freeze()   # what the imports made lives as long as the process: no collection looks at it again
gc.enable()

_code = main(early_signals=_early)
for _sig in (signal.SIGINT, signal.SIGTERM):   # the run has ended: a late Ctrl-C must not turn exit 0 into
    signal.signal(_sig, signal.SIG_IGN)       # -2 while the interpreter shuts down (it drops Python handlers)
if is_torchrun_child() and (_code != 0 or gloo_threads_alive()):
    # A rank whose gloo threads still run ends here, not in the interpreter's teardown, where one of them
    # freeing a tensor would ask the finalizing interpreter for the GIL and the process would be terminated
    # ("terminate called without an active exception"). A failed rank leaves its groups as they are (a peer
    # may be gone: destroying them could hang); under FSDP2 torch's DTensor caches keep the mesh and its
    # group alive past destroy_process_group. A DDP rank that finished has destroyed its groups and joined
    # their threads (trainer.distributed.rank) and ends as any process does. Everything the run writes is
    # committed by now; the exit handlers still run.
    import atexit
    import os

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
raise SystemExit(_code)
