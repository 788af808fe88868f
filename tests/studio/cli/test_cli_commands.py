"""The command line imports only the module of the command it runs: its table of owners is complete."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys

import pytest

from studio import cli

from .test_cli_pipe import ROOT


def test_every_command_has_its_owner_and_each_owner_registers_its_commands(capsys):
    registered: dict[str, str] = {}
    for module in cli.COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        registered |= dict.fromkeys(sub.choices, module)
    assert registered == cli.COMMAND_OWNERS
    with pytest.raises(SystemExit):     # an unknown command: the error lists every command
        cli.build_parser("nonsense").parse_args(["nonsense"])
    listed = re.search(r"invalid choice: 'nonsense' \(choose from (.*)\)", capsys.readouterr().err)
    assert listed is not None and set(re.findall(r"'([a-z]+)'", listed.group(1))) == set(registered)


@pytest.mark.process
def test_a_command_imports_its_own_module_only():
    code = ("import sys; from studio.cli import build_parser; build_parser('validate'); "
            "print(sorted(m for m in sys.modules if m.startswith('studio.cli_')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.strip() == "['studio.cli_graph']"
