"""``torch-studio``: with no arguments it opens the studio; subcommands work headless.

Each group of subcommands lives in its own module with a ``register(subparsers)`` function,
so that adding a command is one new small file and one line in ``COMMAND_MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# The exit status of a command whose reader closed the pipe early (``torch-studio predict ... | head``),
# as a shell reports a program that SIGPIPE ended.
BROKEN_PIPE_STATUS = 128 + 13

COMMAND_MODULES = (
    "studio.cli_graph",
    "studio.cli_export",
    "studio.cli_train",
    "studio.cli_sweep",
    "studio.cli_inspect",
    "studio.cli_memory",
    "studio.cli_explain",
    "studio.cli_launch",
    "studio.cli_predict",
)


# The module that registers each command: a command line names one, and only its module is imported
# (the others' imports cost ~0.7 s of CPU on every command; tests/studio/cli checks this table).
COMMAND_OWNERS = {
    "import": "studio.cli_graph", "summary": "studio.cli_graph", "validate": "studio.cli_graph",
    "export": "studio.cli_export", "train": "studio.cli_train", "runs": "studio.cli_train",
    "show": "studio.cli_train", "sweep": "studio.cli_sweep", "inspect": "studio.cli_inspect",
    "autograd": "studio.cli_inspect", "memory": "studio.cli_memory", "explain": "studio.cli_explain",
    "launch": "studio.cli_launch", "predict": "studio.cli_predict",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or only ``command``'s (its module alone is imported;
    an unknown name gets every command, so that the error lists them)."""
    parser = argparse.ArgumentParser(
        prog="torch-studio",
        description="Design, inspect, train and export PyTorch classification networks. "
                    "Run without a command to open the studio.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    owner = COMMAND_OWNERS.get(command or "")
    for name in (owner,) if owner else COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if not args_list or args_list[0].endswith(".graph.json"):
        return _open_studio(args_list)
    parser = build_parser(args_list[0])
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit where it cannot be caught
    except BrokenPipeError:
        return _reader_left()
    return code


def _reader_left() -> int:
    """The reader of stdout went away: end quietly, as ``head`` expects of the program it cuts short.

    stdout is pointed at the null device so that Python's own flush at exit has nowhere to fail.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE_STATUS


def _open_studio(paths: list[str]) -> int:
    from studio.app import run  # Qt only: the studio imports torch after its window shows

    return int(run(paths))
