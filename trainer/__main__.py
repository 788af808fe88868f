"""``python -m trainer run SPEC.json``: the training worker (see :mod:`trainer.worker`)."""

from trainer.worker import main

raise SystemExit(main())
