"""The sweep's search space, its study records and the memory gate, with no worker process: a space
parsed and checked token by token, a draw put into a spec and a graph, an interrupted trial found and
queued again, and trials over the budget pruned with the runs table left empty."""

from __future__ import annotations

import os
import socket

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import text

from graph_editor.model import graph_to_dict, load_graph
from tests.trainer.helpers import DIGITS_CNN
from trainer.store.runs import RunStore
from trainer.sweep import Sweep, SweepPlan, parse_space
from trainer.sweep.space import SpaceError
from trainer.sweep.study import counted, load_study, make_pruner, open_storage, recover_interrupted


@pytest.fixture(scope="module")
def graph():
    return load_graph(DIGITS_CNN)


def test_a_space_reads_spec_fields_aliases_and_node_parameters(graph):
    space = parse_space("lr=1e-4..3e-2:log, batch_size=32|64|128, node.conv1.out_channels=16..64:step16, "
                        "optimizer=adamw|sgd, weight_decay=0..1e-3, epochs=2..4, precision=fp32|bf16, "
                        "flip=true|false, optim.momentum=0.8..0.99", graph=graph)
    dims = {d.name: d for d in space.dimensions}
    assert (dims["lr"].path, dims["lr"].kind, dims["lr"].log) == ("optim.lr", "float", True)
    assert dims["batch_size"].choices == (32, 64, 128)
    assert (dims["node.conv1.out_channels"].kind, dims["node.conv1.out_channels"].step) == ("int", 16)
    assert dims["flip"].choices == (True, False) and dims["epochs"].kind == "int"
    spec, g = space.apply({"train": {"epochs": 3}}, graph_to_dict(graph),
                          {"lr": 0.01, "batch_size": 128, "node.conv1.out_channels": 48, "flip": True})
    assert spec == {"train": {"epochs": 3, "batch_size": 128}, "optim": {"lr": 0.01},
                    "data": {"augment": {"flip": True}}}
    assert next(n for n in g["nodes"] if n["id"] == "conv1")["params"]["out_channels"] == 48
    assert next(n for n in graph_to_dict(graph)["nodes"] if n["id"] == "conv1")["params"]["out_channels"] == 32


@pytest.mark.parametrize("text, says", [
    ("", "space: empty"),
    ("lr=1e-4..", "token 1 'lr=1e-4..': '1e-4..' is neither LOW..HIGH"),
    ("lr=1e-3..1e-2,batch_size=32|abc", "token 2 'batch_size=32|abc': 'abc' is not a number"),
    ("lr=1e-3..1e-2,foo=1..2", "token 2 'foo=1..2': unknown name 'foo'"),
    ("node.conv9.out_channels=8..16", "the graph has no node 'conv9'"),
    ("node.conv1.width=8..16", "node conv1 (Conv2d) has no parameter 'width'"),
    ("node.conv1.out_channels=0..64", "0 is refused by node conv1"),
    ("optimizer=adamw|lion", "'lion' is refused: optim.name: unknown optimizer 'lion'"),
    ("lr=0..1:log", "a :log range must be above 0"),
    ("batch_size=0..64", "0 is refused: train.batch_size: must be positive"),
    ("batch_size=1.5..3", "batch_size takes integers"),
    ("lr=1e-3..1e-2,lr=1e-2|1e-1", "token 2 'lr=1e-2|1e-1': lr is searched twice"),
    ("optimizer=1..3", "optimizer is not a number"),
    ("lr", "token 1 'lr': expected NAME=LOW..HIGH"),
    ("node.conv1.out_channels=16..64:step100", ":step100 must be above 0 and at most the range's width"),
    ("data.augment=1..2", "data.augment is not a single value"),
])
def test_a_malformed_space_names_the_token_at_fault(graph, text, says):
    with pytest.raises(SpaceError) as err:
        parse_space(text, graph=graph)
    assert says in str(err.value)


@pytest.mark.slow
def test_a_trial_whose_sweep_died_is_failed_interrupted_and_queued_again(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    study = load_study(open_storage(url), "s", metric="val_accuracy", pruner=make_pruner("median", 3))
    dead, alive = study.ask(), study.ask()
    for trial, pid in ((dead, 2147483646), (alive, os.getpid())):      # the first: no such process
        trial.suggest_float("lr", 1e-4, 1e-2, log=True)
        trial.set_user_attr("owner", f"{socket.gethostname()}:{pid}:0")
    assert counted(study) == 2
    assert recover_interrupted(study) == [dead.number]
    again = load_study(open_storage(url), "s", metric="val_accuracy", pruner=make_pruner("median", 3))
    states = {t.number: t for t in again.get_trials()}
    assert states[dead.number].state == TrialState.FAIL and states[dead.number].user_attrs["interrupted"]
    assert states[alive.number].state == TrialState.RUNNING
    queued = [t for t in states.values() if t.state == TrialState.WAITING]
    assert len(queued) == 1 and queued[0].system_attrs["fixed_params"] == dead.params
    assert counted(again) == 1
    with pytest.raises(ValueError, match="study 's' maximizes its objective; val_loss is to minimize"):
        load_study(open_storage(url), "s", metric="val_loss", pruner=optuna.pruners.NopPruner())
    with RunStore(url).engine.connect() as conn:     # Optuna's tables sit beside the run store's
        tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))}
    assert {"runs", "metrics", "studies", "trials"} <= tables


@pytest.mark.slow
def test_trials_over_the_memory_budget_are_pruned_before_any_worker_starts(tmp_path, monkeypatch):
    import trainer.protocol.client

    def no_worker(*_a, **_k):
        raise AssertionError("a worker was started for a trial over the budget")

    monkeypatch.setattr(trainer.protocol.client.WorkerClient, "__init__", no_worker)
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    plan = SweepPlan(graph=str(DIGITS_CNN), space="batch_size=2048|4096", trials=2, budget_bytes=64 << 20,
                     db=url, study="big")
    result = Sweep(plan).run()
    assert [t["state"] for t in result["trials"]] == ["pruned", "pruned"]
    for t in result["trials"]:
        assert t["run_id"] is None
        assert "exceeds the budget of 64.0 MiB; no worker was started" in t["reason"]
        assert f"at batch {t['params']['batch_size']}" in t["reason"]
    assert result["best"] is None and RunStore(url).runs() == []


def test_the_pruners_by_name():
    assert isinstance(make_pruner("median", 5), optuna.pruners.MedianPruner)
    assert isinstance(make_pruner("halving", 5), optuna.pruners.SuccessiveHalvingPruner)
    assert isinstance(make_pruner("hyperband", 5), optuna.pruners.HyperbandPruner)
    assert isinstance(make_pruner("none", 5), optuna.pruners.NopPruner)
    with pytest.raises(ValueError, match="unknown pruner 'asha'"):
        make_pruner("asha", 5)


@pytest.mark.parametrize("name", ["median", "halving", "hyperband"])
def test_each_pruner_as_a_sweep_makes_it_prunes_a_trial_far_below_the_others_and_keeps_a_good_one(name):
    """The pruners as make_pruner sets them up for a 4-epoch sweep, fed epoch by epoch as the runner feeds
    them (trial.report, then should_prune): a trial far below the finished ones is pruned at some epoch."""
    study = load_study(optuna.storages.InMemoryStorage(), name, metric="val_accuracy", pruner=make_pruner(name, 4),
                       seed=0)

    def stopped_at(values: list[float]) -> int | None:
        trial = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
        for epoch, value in enumerate(values, 1):
            trial.report(value, epoch)
            if trial.should_prune():
                study.tell(trial, state=TrialState.PRUNED)
                return epoch
        study.tell(trial, max(values))
        return None

    finished = [stopped_at([0.8, 0.85, 0.9, 0.95]) for _ in range(8)]
    assert finished[:2] == [None, None]        # nothing to compare the first ones with
    assert stopped_at([0.1, 0.12, 0.13, 0.14]) is not None
    assert stopped_at([0.97, 0.98, 0.99, 0.995]) is None


def test_the_cli_refuses_a_bad_space_naming_the_token_and_making_no_study(tmp_path, capsys):
    from studio.cli import main

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    code = main(["sweep", str(DIGITS_CNN), "--trials", "2", "--space", "lr=1e-4..1e-2:log,batch_size=32|big",
                 "--db", url])
    assert code == 2
    assert "error: space token 2 'batch_size=32|big': 'big' is not a number" in capsys.readouterr().err
    assert not (tmp_path / "runs.sqlite").exists()


@pytest.mark.process
def test_reading_studies_loads_no_runner():
    """The Experiments workspace reads studies through trainer.sweep.report; the package once imported its
    runner and the memory prediction with it, 0.3 s of CPU (1 s at a load of 19) while the window froze."""
    import subprocess
    import sys

    code = ("import sys, trainer.sweep.report, trainer.sweep; assert 'trainer.sweep.runner' not in sys.modules; "
            "from trainer.sweep import Sweep; assert Sweep.__module__ == 'trainer.sweep.runner'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_study_name_its_runs_cannot_be_tagged_with_is_refused_before_anything_is_made(tmp_path):
    """Trials' runs are tagged study:NAME, and a tag holds no comma (Runs edits tags as one line)."""
    with pytest.raises(ValueError, match="--study: 'a,b' must be at most 190 characters without a comma"):
        Sweep(SweepPlan(graph=str(DIGITS_CNN), space="lr=1e-3..1e-2:log", trials=1, study="a,b",
                        db=f"sqlite:///{tmp_path / 'runs.sqlite'}"))
    assert not (tmp_path / "runs.sqlite").exists()
