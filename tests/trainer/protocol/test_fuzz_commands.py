"""Fuzz: worker command lines. Any line parses to a Command or raises CommandError (nothing else),
a parsed command survives its own round trip, and on the real reader thread no sequence of bad
lines stops the good commands after them from arriving, in order.

Bounded for ``make test``: fixed example counts, no deadline (the machine may be shared).
"""

from __future__ import annotations

import contextlib
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer.protocol.controls import Controls, StdinClosed
from trainer.protocol.events import (
    COMMAND_TYPES,
    Command,
    CommandError,
    Pause,
    Resume,
    SetLr,
    Stop,
    parse_command,
)

NAMES = sorted(COMMAND_TYPES) + ["", "PAUSE", "set-lr", "explode"]


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


VALUES = st.one_of(
    st.sampled_from([None, True, 0, -1, 0.0, 1e-3, 2**64, 10**400, float("nan"), float("inf"), "0.1", [], {}]),
    st.integers(), st.floats(), st.text(max_size=6), st.sampled_from([50, 3000]).map(_nested),
)
OBJECTS = st.dictionaries(st.sampled_from(["command", "lr", "reason", "x"]), VALUES, max_size=3) | st.builds(
    lambda name, extra: {"command": name, **extra}, st.sampled_from(NAMES),
    st.dictionaries(st.sampled_from(["lr", "x"]), VALUES, max_size=2))


def _text(obj: object) -> str:
    try:
        return json.dumps(obj)
    except (ValueError, RecursionError):   # an integer beyond the digit limit, or nested too deep for dumps
        return "[" * 3000 + "]" * 3000


LINES = st.one_of(
    OBJECTS.map(_text),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.sampled_from(['{"command": "set_lr", "lr": ' + "9" * 400 + "}", '{"command": "set_lr", "lr": 1e999}',
                     "[" * 100000, '{"command": "pause"', "\udcff", b"\xff\xfe{", "null", '"pause"', " " * 5000]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINES)
def test_any_line_is_a_command_or_one_command_error(line):
    try:
        command = parse_command(line)
    except CommandError as exc:
        assert str(exc) and len(str(exc)) < 400
        return
    assert isinstance(command, Command)
    assert parse_command(command.to_json()) == command


GOOD = [Pause(), Resume(), SetLr(lr=0.01), Stop()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(LINES, max_size=3), st.sampled_from(GOOD)), min_size=1, max_size=4))
def test_bad_lines_never_stop_the_good_commands_after_them(script):
    """The real reader thread on a stream: every good command arrives, in order, and EOF last."""
    stream, expected = io.BytesIO(), []
    for bad_lines, good in script:
        for bad in bad_lines:
            raw = bad if isinstance(bad, bytes) else bad.encode("utf-8", "surrogateescape")
            stream.write(raw.replace(b"\n", b" ").replace(b"\r", b" ") + b"\n")
            with contextlib.suppress(CommandError):    # a bad-looking line may still be a valid command
                expected.append(parse_command(raw.replace(b"\n", b" ").replace(b"\r", b" ")))
        stream.write(good.to_json().encode() + b"\n")
        expected.append(good)
    stream.seek(0)
    controls = Controls(lambda state, reason: None)
    controls.listen(stream).join(timeout=30)
    received = []
    while not controls.commands.empty():
        received.append(controls.commands.get_nowait())
    assert isinstance(received[-1], StdinClosed)
    assert received[:-1] == expected
