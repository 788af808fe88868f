"""The typed worker protocol: every event and command round-trips, unknown things are kept, bad lines refused."""

from __future__ import annotations

import json

import pytest

from trainer.protocol import events as ev

PER_CLASS = {"precision": [1.0, 0.5], "recall": [0.5, 1.0], "f1": [0.667, 0.667], "support": [2, 1]}

# One event of each type, as the worker writes it (every field it sends).
SAMPLES: dict[str, dict] = {
    ev.RUN_STARTED: dict(name="digits", device="cpu", params=94410, epochs=2, steps_per_epoch=19, batch_size=64,
                         train_size=1257, val_size=180, test_size=360, classes=["0", "1"], start_step=0,
                         precision="fp32", compile="off", run_dir="/runs/run-1"),
    ev.COMPILE_PROGRESS: dict(stage="backward 1", compiled=1, cache_hits=0, cache_misses=2, seconds=4.5),
    ev.COMPILE_DONE: dict(seconds=12.5, mode="default", graph_breaks=1, recompiles=0),
    ev.GRAPH_BREAK: dict(reason="Unsupported Tensor.item() call with capture_scalar_outputs=False", node="scale",
                         where="models.py:40 `return x / x.max().item()`", count=1),
    ev.RECOMPILE: dict(function="forward", reason="0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
                       count=1),
    ev.METRICS: dict(step=5, epoch=1, loss=1.25, accuracy=0.5, lr=0.003, samples_per_s=5120.0),
    ev.EPOCH_END: dict(epoch=1, step=19, train_loss=0.9, train_accuracy=0.7, val_loss=0.8, val_accuracy=0.75,
                       lr=0.003, seconds=1.5, best=True, per_class=PER_CLASS, confusion=[[1, 1], [0, 1]],
                       classes=["0", "1"]),
    ev.MEMORY: dict(step=19, device="cuda:0", allocated=1024, reserved=2048, peak=1536),
    ev.CHECKPOINT: dict(kind="best", path="/runs/run-1/checkpoints/best.safetensors", step=19, epoch=1,
                        metric="val_accuracy", value=0.75),
    ev.STATE: dict(state="paused", reason="pause"),
    ev.FINISHED: dict(status="completed", epoch=2, step=38, test_loss=0.5, test_accuracy=0.9,
                      test_per_class=PER_CLASS, test_confusion=[[2, 0], [0, 1]],
                      best={"metric": "val_accuracy", "value": 0.75, "epoch": 1}, seconds=3.25),
    ev.FAILED: dict(kind="spec", message="train.epochs: must be positive", problems=["train.epochs: must be positive"],
                    traceback="", step=None),
    ev.INSPECT: dict(step=40, path="/runs/run-1/inspect/step-00000040.json", nodes=15, loss=0.7,
                     flags=[["fc", "exploding", "grad_w", 2500.0]]),
    ev.MEMORY_TRACE: dict(step=41, steps=2, path="/runs/run-1/memory/trace-step41.json", peak_bytes=5000000,
                          attributed=0.999, peak_phase="forward", peak_node="relu", at_peak={"conv": 4000000},
                          timeline={"t_ms": [0.0, 1.5], "live": [0, 5000000], "nodes": {"conv": [0, 4000000]}}),
    ev.SKIPPED_FILES: dict(step=12, split="train", files=[["/data/cats/07.jpg", "not a readable image"]], count=1),
}

CLASSES = {ev.RUN_STARTED: ev.RunStarted, ev.COMPILE_PROGRESS: ev.CompileProgress, ev.COMPILE_DONE: ev.CompileDone, ev.METRICS: ev.Metrics,
           ev.EPOCH_END: ev.EpochEnd, ev.MEMORY: ev.Memory, ev.CHECKPOINT: ev.Checkpoint, ev.STATE: ev.State,
           ev.FINISHED: ev.Finished, ev.FAILED: ev.Failed, ev.INSPECT: ev.Inspect,
           ev.MEMORY_TRACE: ev.MemoryTimeline, ev.GRAPH_BREAK: ev.GraphBreakEvent, ev.RECOMPILE: ev.Recompile,
           ev.SKIPPED_FILES: ev.SkippedFiles}


def typed(event: str, run_id: int, /, **fields) -> ev.Event:
    """The sample built as the worker builds it: its dataclass (a misspelt field is a TypeError here)."""
    cls = CLASSES[event]
    return cls(run_id=run_id, **{k: cls.NESTED[k].from_dict(v) if k in cls.NESTED else v for k, v in fields.items()})


def test_every_event_type_has_a_sample_and_a_class():
    assert set(SAMPLES) == set(ev.EVENT_TYPES) == set(CLASSES)
    assert {name: cls for name, cls in ev.EVENT_TYPES.items()} == CLASSES


@pytest.mark.parametrize("name", list(SAMPLES))
def test_event_round_trips_and_the_wire_is_unchanged(name):
    line = typed(name, 4, **SAMPLES[name]).to_json()
    wire = json.loads(line)
    # exactly what the worker wrote: the three header keys and the fields, nothing added or renamed
    assert wire == {"event": name, "run_id": 4, "time": wire["time"], **SAMPLES[name]}
    event = ev.Event.from_json(line)
    assert type(event) is CLASSES[name] and event.event == name and event.run_id == 4
    assert event.extra == {}
    assert json.loads(event.to_json()) == wire
    assert ev.Event.from_json(event.to_json()) == event


def test_nested_records_are_typed():
    end = typed(ev.EPOCH_END, 1, **SAMPLES[ev.EPOCH_END])
    assert isinstance(end, ev.EpochEnd) and isinstance(end.per_class, ev.PerClass)
    assert end.per_class.recall == [0.5, 1.0] and len(end.per_class) == 2
    fin = typed(ev.FINISHED, 1, **SAMPLES[ev.FINISHED])
    assert isinstance(fin, ev.Finished) and fin.best == ev.Best("val_accuracy", 0.75, 1)
    assert fin.test_per_class is not None and fin.test_per_class.support == [2, 1]


def test_fields_that_do_not_apply_stay_off_the_wire():
    cpu = json.loads(ev.Memory(run_id=1, step=3, device="cpu", rss=10, peak_rss=20).to_json())
    assert set(cpu) == {"event", "run_id", "time", "step", "device", "rss", "peak_rss"}
    memory = ev.Event.from_json(json.dumps(cpu))
    assert isinstance(memory, ev.Memory) and memory.figures() == {"rss": 10, "peak_rss": 20} and not memory.cuda
    no_val = json.loads(ev.EpochEnd(run_id=1, epoch=1, step=2, train_loss=0.5, train_accuracy=0.5, val_loss=None,
                                     val_accuracy=None, lr=0.1, seconds=1.0, best=False).to_json())
    assert "per_class" not in no_val and "confusion" not in no_val and no_val["val_loss"] is None
    during = json.loads(ev.Failed(run_id=1, kind="nan", message="diverged", traceback="", step=7).to_json())
    assert "problems" not in during and "memory" not in during


def test_events_are_read_by_field_never_by_key():
    memory = ev.Event.from_json(ev.Memory(run_id=1, step=3, device="cpu", rss=10, peak_rss=20).to_json())
    assert isinstance(memory, ev.Memory)
    assert memory.event == "memory" and memory.rss == 10 and memory.allocated is None and memory.run_id == 1
    end = typed(ev.EPOCH_END, 1, **SAMPLES[ev.EPOCH_END])
    assert isinstance(end, ev.EpochEnd) and end.per_class is not None and end.per_class.to_dict() == PER_CLASS
    unknown = ev.Event.from_json(json.dumps({"event": "newer", "run_id": 1, "time": 2.0, "step": 4}))
    for event in (memory, end, unknown):      # the dict-style reads are gone, a typo cannot read None
        with pytest.raises(TypeError):
            event["step"]
        assert not hasattr(event, "get")
        with pytest.raises(TypeError):
            "step" in event   # noqa: B015 - the membership test itself must fail


def test_non_finite_floats_are_null_on_the_wire():
    wire = json.loads(ev.Metrics(run_id=1, step=1, epoch=1, loss=float("nan"), accuracy=float("inf")).to_json())
    assert wire["loss"] is None and wire["accuracy"] is None


def test_unknown_event_and_unknown_fields_are_kept():
    newer = {"event": "from_a_newer_worker", "run_id": 2, "time": 1.5, "step": 9, "path": "/runs/trace-9.json"}
    event = ev.Event.from_json(json.dumps(newer))
    assert isinstance(event, ev.UnknownEvent) and event.event == "from_a_newer_worker" and event.extra["step"] == 9
    assert json.loads(event.to_json()) == newer
    added = {"event": "metrics", "run_id": 2, "time": 1.5, "step": 3, "grad_norm": 0.25}
    m = ev.Event.from_json(json.dumps(added))
    assert isinstance(m, ev.Metrics) and m.step == 3 and m.loss is None and m.extra == {"grad_norm": 0.25}
    assert json.loads(m.to_json())["grad_norm"] == 0.25
    bad_nested = ev.Event.from_json(json.dumps({"event": "epoch_end", "epoch": 1, "per_class": "garbage"}))
    assert isinstance(bad_nested, ev.EpochEnd) and bad_nested.per_class is None
    assert bad_nested.extra == {"per_class": "garbage"}


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"no_event": 1}', '{"event": 3}', b"\xff\xfe{",
                                  "[" * 100_000 + "]" * 100_000])
def test_a_line_that_is_no_event_is_a_protocol_error(line):
    with pytest.raises(ev.ProtocolError):
        ev.Event.from_json(line)


def test_registering_an_event_name_twice_is_refused():
    with pytest.raises(ValueError, match="an event type for 'metrics' is already registered"):
        ev.event_type(ev.METRICS)(type("Again", (ev.Event,), {}))


# ---------------------------------------------------------------- commands
@pytest.mark.parametrize("command", [ev.Pause(), ev.Resume(), ev.Stop(), ev.SetLr(lr=0.001),
                                     ev.InspectNow()])
def test_command_round_trips(command):
    line = command.to_json()
    assert json.loads(line)["command"] == command.COMMAND
    assert ev.parse_command(line) == command == ev.Command.from_json(line)
    assert ev.encode_command(command) == line


def test_command_wire_format_is_unchanged():
    assert json.loads(ev.encode_command(ev.SET_LR, lr=0.5)) == {"command": "set_lr", "lr": 0.5}
    assert json.loads(ev.encode_command(ev.PAUSE)) == {"command": "pause"}
    assert set(ev.COMMAND_TYPES) == {"pause", "resume", "stop", "set_lr", "inspect", "record_memory",
                                     "write_checkpoints"}
    assert ev.parse_command('{"command": "write_checkpoints"}') == ev.WriteCheckpoints()
    assert json.loads(ev.encode_command(ev.INSPECT)) == {"command": "inspect"}
    assert ev.parse_command('{"command": "stop", "why": "newer field"}') == ev.Stop()   # extra fields ignored


@pytest.mark.parametrize(("line", "says"), [
    ('{"command": "set_lr", "lr": ' + "9" * 400 + "}", "too large"),
    ('{"command": "set_lr", "lr": 1e999}', "positive finite"),
    ("[" * 100_000 + "]" * 100_000, "longer than"),
    ("[" * 1500 + "]" * 1500, "nested too deep"),
    ('{"command": "set_lr", "lr": -1}', "positive"),
    ('{"command": "set_lr", "lr": NaN}', "positive finite"),
    ('{"command": "set_lr", "lr": true}', "positive number"),
    ('{"command": "set_lr"}', "needs 'lr'"),
    ('{"command": "explode"}', "unknown command"),
    ("[]", "unknown command"),
    ("not json", "not JSON"),
    (b'{"command": "\xff"}', "not JSON"),
])
def test_any_bad_command_line_is_one_command_error(line, says):
    with pytest.raises(ev.CommandError, match=says):
        ev.parse_command(line)


# ---------------------------------------------------------------- writing
def test_emitter_writes_a_built_event_stamped_with_the_run_and_the_time():
    import io

    out = io.StringIO()
    emitter = ev.Emitter(out)
    emitter.run_id = 9
    emitter.emit(ev.Metrics(step=3, epoch=1, loss=0.5, accuracy=0.25, lr=0.1, samples_per_s=10.0))
    line = json.loads(out.getvalue())
    assert line.pop("time") > 0
    assert line == {"event": "metrics", "run_id": 9, "step": 3, "epoch": 1, "loss": 0.5, "accuracy": 0.25,
                    "lr": 0.1, "samples_per_s": 10.0}


def test_a_misspelt_field_is_refused_where_the_event_is_written():
    import io

    out = io.StringIO()
    emitter = ev.Emitter(out)
    with pytest.raises(TypeError, match="lsos"):
        emitter.emit(ev.Metrics(step=3, lsos=0.5))     # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'step'"):
        emitter.emit(ev.METRICS, step=3, loss=0.5)     # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes an event"):
        emitter.emit(ev.METRICS)                       # type: ignore[arg-type]
    assert out.getvalue() == ""                        # nothing half-written


def test_a_closed_stream_silences_the_emitter():
    import io

    out = io.StringIO()
    out.close()
    emitter = ev.Emitter(out)
    emitter.emit(ev.State(state="paused", reason="pause"))     # no exception: training goes on
    assert emitter.closed


def test_events_are_written_from_their_dataclasses_only():
    """No builder of an event from its name and keyword fields (a misspelt field landed in ``extra``)."""
    assert not hasattr(ev, "encode") and not hasattr(ev, "make_event")
    with pytest.raises(TypeError):
        ev.Metrics(run_id=1, step=1, los=1.0)  # type: ignore[call-arg]
