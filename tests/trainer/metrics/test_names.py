"""The one table of metric names: the store rows of an event, and the event's fields back from them."""

from __future__ import annotations

import pytest

from graph_editor.model.registry import DuplicateError
from trainer.metrics import names
from trainer.protocol import events as ev


def test_an_event_s_store_rows_are_its_metrics_under_their_names_and_read_back_as_its_fields():
    e = ev.EpochEnd(epoch=2, step=40, train_loss=0.5, train_accuracy=0.8, val_loss=0.6, val_accuracy=None, lr=0.1)
    rows = names.rows(e, 40)
    assert rows == [(40, "epoch/train_loss", 0.5), (40, "epoch/train_accuracy", 0.8), (40, "val/loss", 0.6)]
    back = names.fields(ev.EPOCH_END, {name: v for _, name, v in rows})
    assert back == {"train_loss": 0.5, "train_accuracy": 0.8, "val_loss": 0.6, "val_accuracy": None}
    m = ev.Metrics(step=3, loss=1.5, accuracy=0.25, lr=0.01, samples_per_s=100.0)
    assert names.values(m) == {"train/loss": 1.5, "train/accuracy": 0.25, "lr": 0.01, "samples_per_s": 100.0}


def test_every_carried_metric_names_a_field_of_its_event_and_a_name_is_registered_once():
    for _, m in names.METRICS.items():
        if m.event:
            assert m.field in ev.EVENT_TYPES[m.event].__dataclass_fields__, m
    with pytest.raises(DuplicateError, match="train/loss"):
        names.metric("train/loss", "again")
