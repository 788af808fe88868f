"""``torch-studio`` run in the test's own process (``studio.cli.main``), its output captured."""

from __future__ import annotations

from studio.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``torch-studio ARGS``."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err
