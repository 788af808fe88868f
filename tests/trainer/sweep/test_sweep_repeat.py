"""A block's repeat count as a sweep variable (``block.<group id>.repeat=1..4``): parsed and checked by
building the graph out at each end, put into a trial's graph, and trained as that many copies by the
real worker (two trials, two at a time, minimising val_loss: an objective other than the default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_editor.model import Graph, InputSpec, graph_to_dict, save_graph
from graph_editor.model.graph import Group
from trainer.metrics import names
from trainer.store.runs import RunStore
from trainer.sweep import Sweep, SweepPlan, parse_space
from trainer.sweep.space import SpaceError
from trainer.sweep.study import load_study, make_pruner, open_storage


def blocky() -> Graph:
    """The digits (1x8x8) through a stem conv, a conv+ReLU block of 8 channels (repeatable), a pool and a head."""
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "blocky"})
    g.chain(("Input", "input"), ("Conv2d", "stem", {"out_channels": 8, "kernel_size": [3, 3], "padding": [1, 1]}),
            ("Conv2d", "conv", {"out_channels": 8, "kernel_size": [3, 3], "padding": [1, 1]}), ("ReLU", "relu"),
            ("AdaptiveAvgPool2d", "pool", {"output_size": [1, 1]}), ("Flatten", "flat"),
            ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    g.groups["blk"] = Group("blk", "block", ["conv", "relu"])
    g.groups["tail"] = Group("tail", "tail", ["pool", "flat"])
    return g


def test_a_block_s_repeat_count_is_searched_and_checked_at_both_ends():
    g = blocky()
    space = parse_space("lr=1e-3..1e-2:log,block.blk.repeat=1..4", graph=g)
    (dim,) = [d for d in space.dimensions if d.target == "block"]
    assert (dim.path, dim.kind, dim.low, dim.high) == ("blk.repeat", "int", 1, 4)
    _, trial_graph = space.apply({}, graph_to_dict(g), {"block.blk.repeat": 3})
    assert next(x for x in trial_graph["groups"] if x["id"] == "blk")["repeat"] == 3
    assert "repeat" not in next(x for x in graph_to_dict(g)["groups"] if x["id"] == "blk")   # the base untouched
    for text, says in (("block.nope.repeat=1..2", "token 1 'block.nope.repeat=1..2': the graph has no block 'nope'"),
                       ("block.blk.width=1..2", "a block's repeat count is block.<group id>.repeat"),
                       ("block.blk.repeat=0..3", "whole number from 1 to 32, not 0"),
                       ("block.tail.repeat=1..2", "with block tail repeated 2 times the graph does not work")):
        with pytest.raises(SpaceError) as err:
            parse_space(text, graph=g)
        assert says in str(err.value), err.value


@pytest.mark.process
def test_trials_train_the_block_repeated_as_drawn(db, tmp_path):
    path = tmp_path / "blocky.graph.json"
    save_graph(blocky(), path)
    study = load_study(open_storage(db), "r", metric="val_loss", pruner=make_pruner("none", 1))
    for count in (1, 3):
        study.enqueue_trial({"block.blk.repeat": count})
    plan = SweepPlan(graph=str(path), space="block.blk.repeat=1..4", trials=2, parallel=2, epochs=1, db=db,
                     study="r", device="cpu", prune="none", metric="val_loss")    # another objective, minimised
    result = Sweep(plan).run()
    assert [t["state"] for t in result["trials"]] == ["complete", "complete"], result
    store = RunStore(db)
    assert (result["metric"], result["direction"]) == ("val_loss", "minimize")
    losses = {t["number"]: min(v for _, _, v in store.metrics(t["run_id"], "val/loss")) for t in result["trials"]}
    assert {t["number"]: t["value"] for t in result["trials"]} == pytest.approx(losses)
    assert result["best"]["number"] == min(losses, key=losses.__getitem__)
    runs = {t["params"]["block.blk.repeat"]: store.run(t["run_id"]) for t in result["trials"]}
    assert [next(g for g in runs[c].graph["groups"] if g["id"] == "blk").get("repeat", 1) for c in (1, 3)] == [1, 3]
    conv = 8 * 8 * 3 * 3 + 8
    assert runs[3].params - runs[1].params == 2 * conv       # two more copies of the block's conv
    assert Path(store.checkpoint_path(runs[3].id, "last") or "").name  # trained and kept like any run
    cpu = [v for _, _, v in store.metrics(runs[3].id, names.CPU_PERCENT.name)]   # its system curves too
    rss = [v for _, _, v in store.metrics(runs[3].id, names.RSS.name)]
    assert cpu and rss and max(cpu) > 0 and min(rss) > 50 * 2**20
    assert store.metrics(runs[3].id, names.GPU_UTIL.name) == []      # on the CPU: no GPU curve
