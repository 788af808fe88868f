"""Fuzz: a run spec mangled as text or as JSON either parses, or fails with one SpecError whose every
problem names its field ("optim.lr: ...") or the file; never another exception.

Bounded for ``make test``: fixed example counts, no deadline (the machine may be shared).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer.spec import RunSpec, SpecError, load_spec, spec_from_dict

GOOD = RunSpec().to_dict()
# Every top-level section of the spec, from the spec itself (a section added later is covered too).
ROOTS = "|".join(["spec", *GOOD])
FIELD = re.compile(rf"^({ROOTS})[.:]")

HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 2**31, 2**63, 2**64, 10**40, 1e308, float("nan"), float("inf"),
                     float("-inf"), "", "adamw", "cuda:abc", "cuda:-1"]),
    # made anew for every draw: a later edit may write inside one, and a shared object would carry
    # that edit into the next example (hypothesis then reports a flaky strategy)
    st.sampled_from([lambda: [], lambda: {}, lambda: [0.9], lambda: [0.9, 0.999, 1],
                     lambda: [float("nan"), 0.5], lambda: {"a": 1}]).map(lambda make: make()),
    st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from([65, 900, 3000]).map(lambda n: _nested(n)),
    st.lists(st.floats(allow_nan=True), max_size=3),
)
TOKENS = ["{", "}", "[", "]", ",", ":", '"', "NaN", "Infinity", "-1", "1e999", "9" * 4400, "[" * 5000, "null",
          '"optim"', '"lr"', "\u00e9", "\x00"]


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _check(problems: list[str]) -> None:
    assert problems
    for p in problems:
        assert FIELD.match(p) or ": unknown field (known: " in p, p
        assert len(p) < 400, p


def _paths(obj, prefix=()):
    """Every place in ``obj`` down to 6 levels (what the fuzz put deeper is not walked again)."""
    yield prefix
    if len(prefix) < 6 and isinstance(obj, dict | list):
        for key, value in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            yield from _paths(value, (*prefix, key))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_values_anywhere_parse_or_name_their_field(data):
    doc = json.loads(json.dumps(GOOD))
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(HOSTILE)
    try:
        spec = spec_from_dict(doc)
    except SpecError as err:
        _check(err.problems)
        return
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))).to_dict() == spec.to_dict()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["insert", "replace", "cut"]), st.floats(0, 1), st.floats(0, 0.1),
                          st.sampled_from(TOKENS)), min_size=1, max_size=3))
def test_a_spec_file_mangled_as_text_parses_or_says_where(tmp_path_factory, edits):
    text = json.dumps(GOOD, indent=1)
    for op, at, span, token in edits:
        i, j = int(at * len(text)), int(at * len(text)) + int(span * len(text))
        text = text[:i] + token + text[i:] if op == "insert" else text[:i] + token + text[j:] if op == "replace" \
            else text[:i]
    path = tmp_path_factory.mktemp("spec") / "spec.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_spec(path)
    except SpecError as err:
        _check(err.problems)


def test_an_unknown_choice_is_quoted_cut_short(tmp_path):
    """The fuzz above found it in CI: a schedule name of 200+ characters was quoted whole in its line."""
    spec = json.loads(json.dumps(GOOD))
    spec["schedule"]["name"] = "onecyc" + "9" * 500 + "le"
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    _check(err.value.problems)
    assert any(p.startswith("schedule.name: unknown schedule 'onecyc999") for p in err.value.problems)
