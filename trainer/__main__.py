"""``python -m trainer run SPEC.json``: the training worker (see :mod:`trainer.worker`)."""

from trainer.threads import configure as _configure_threads

_configure_threads()   # before torch is imported: OpenMP reads its wait policy and thread count once

from trainer.worker import main  # noqa: E402

raise SystemExit(main())
