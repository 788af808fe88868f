"""``torch-studio memory``: the prediction on the command line, as text and as one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph_editor.model import load_graph
from studio.cli import main
from studio.cli_memory import parse_bytes

DIGITS = str(Path(__file__).resolve().parents[3] / "assets" / "templates" / "digits_cnn.graph.json")


@pytest.mark.slow
def test_json_has_peak_parts_and_largest_batch(capsys):
    assert main(["memory", DIGITS, "--batch", "32", "--optimizer", "sgd", "--budget", "8MiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["peak_bytes"] == sum(out["parts"].values()) > 0
    assert set(out["parts"]) >= {"weights", "gradients", "optimizer", "activations", "transient"}
    assert out["optimizer"] == "sgd" and out["batch"] == 32
    n = out["largest_batch"]
    assert n > 32 and out["fits"] is True
    assert out["largest_batch_peak_bytes"] <= out["usable_bytes"] == 8 * 2 ** 20


@pytest.mark.slow
def test_text_names_the_peak_and_a_batch_that_does_not_fit(capsys):
    assert main(["memory", DIGITS, "--batch", "512", "--budget", "4MiB"]) == 0
    text = capsys.readouterr().out
    assert "peak " in text and "activations" in text and "held at the peak by: " in text
    assert "batch 512 does NOT fit" in text and "largest batch that fits: " in text


def test_bad_arguments_are_refused_with_their_name(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["memory", DIGITS, "--budget", "lots"])
    assert exc.value.code == 2 and "'lots' is not a size" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["memory", DIGITS, "--optimizer", "lamb"])
    assert exc.value.code == 1 and "optimizer: unknown optimizer 'lamb'" in capsys.readouterr().err


def test_parse_bytes():
    assert parse_bytes("8GiB") == 8 * 2 ** 30
    assert parse_bytes("1.5 GB") == 1_500_000_000
    assert parse_bytes("512mib") == 512 * 2 ** 20
    assert parse_bytes("2000") == 2000


@pytest.mark.slow
def test_checkpointing_segments_lower_the_saved_activations(capsys):
    assert main(["memory", DIGITS, "--batch", "64", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["memory", DIGITS, "--batch", "64", "--checkpoint", "conv1..relu2", "--json"]) == 0
    ck = json.loads(capsys.readouterr().out)
    assert ck["checkpoint"] == ["conv1..relu2"] and ck["parts"]["activations"] < plain["parts"]["activations"]
    with pytest.raises(SystemExit) as exc:
        main(["memory", DIGITS, "--checkpoint", "relu2..conv1"])
    assert exc.value.code == 1 and "checkpoint[0]: 'relu2' comes after 'conv1'" in capsys.readouterr().err


MLP = str(Path(DIGITS).with_name("mlp.graph.json"))


@pytest.mark.slow
def test_a_batch_norm_graph_searches_from_batch_2(capsys):
    """The mlp template's BatchNorm1d refuses a training batch of 1: the search starts at 2, and a
    prediction at batch 1 says why instead of a traceback."""
    assert main(["memory", MLP, "--optimizer", "adamw", "--budget", "64MiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["largest_batch"] >= 2 and out["largest_batch_peak_bytes"] <= 64 * 2 ** 20
    with pytest.raises(SystemExit) as exc:
        main(["memory", MLP, "--batch", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and "bn1 (BatchNorm1d)" in err and "a batch of 2 or more" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("args", "code", "why"), [
    (["--budget", "1e400"], 2, "'1e400' is larger than any device"),
    (["--batch", str(10 ** 18)], 1, "batch: 1,000,000,000,000,000,000 samples is more than"),
    (["--device", "cuda:abc"], 1, "device: choose cpu, cuda or cuda:N"),
])
def test_impossible_numbers_and_devices_are_refused(capsys, args, code, why):
    with pytest.raises(SystemExit) as exc:
        main(["memory", DIGITS, *args])
    err = capsys.readouterr().err
    assert exc.value.code == code and why in err and "Traceback" not in err


@pytest.mark.slow
def test_the_search_cap_is_not_called_the_largest_batch_that_fits(capsys):
    assert main(["memory", DIGITS, "--budget", "1TiB"]) == 0
    text = capsys.readouterr().out
    assert "largest batch that fits: 65,536 or more (the search stops at 65,536" in text
    assert main(["memory", DIGITS, "--budget", "1TiB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["largest_batch_is_search_cap"] is True


@pytest.mark.slow
def test_the_bf16_kernels_bytes_are_said_and_a_budget_counts_them(capsys):
    """On a CPU with native bf16 kernels (AVX512-BF16, AMX: this machine) oneDNN's packed weights come on
    top of the predicted peak: the prediction says how much at most, and a batch that fits only without
    them does not fit. Elsewhere nothing is added and nothing said."""
    from trainer.memory.prediction import largest_batch as search
    from trainer.memory.prediction import native_bf16_cpu, predict_memory

    assert main(["memory", DIGITS, "--batch", "64", "--precision", "bf16"]) == 0
    text = capsys.readouterr().out
    native = native_bf16_cpu("cpu", "bf16")
    assert ("more on this CPU's bf16 kernels (not modelled)" in text) is native
    if not native:
        return
    graph = load_graph(DIGITS)
    pred = predict_memory(graph, 64, precision="bf16")
    assert f"up to {pred.unmodelled_bytes / 2 ** 20:,.1f} MiB more" in text
    budget = pred.peak_bytes + pred.unmodelled_bytes // 2      # the peak fits, the peak and the kernels' not
    n, best = search(graph, budget, precision="bf16")
    assert 0 < n < 64 and best is not None and best.peak_bytes + best.unmodelled_bytes <= budget
    assert main(["memory", DIGITS, "--batch", "64", "--precision", "bf16", "--budget", str(budget), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["fits"] is False and fit["largest_batch"] == n and fit["unmodelled_bytes"] == pred.unmodelled_bytes
