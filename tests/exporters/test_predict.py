"""Every export format of a real run of the shipped digits_cnn template (channels_last by default), fed
the raw digits as the dataset file holds them, through ``torch-studio predict``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from exporters import ExportOptions, export, from_run
from exporters.registry import get_format
from studio.cli import main
from trainer.data import DIGITS
from trainer.protocol.client import WorkerClient
from trainer.store.runs import RunStore

pytestmark = [pytest.mark.export, pytest.mark.process]

TEMPLATE = Path(__file__).resolve().parents[2] / "assets" / "templates" / "digits_cnn.graph.json"
MODEL_FORMATS = ("onnx", "pt2", "python", "pte")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, Path]:
    """digits_cnn trained 3 epochs on the embedded digits by the real worker; (store url, run id, folder)."""
    folder = tmp_path_factory.mktemp("predict")
    spec = {"schema_version": 1, "name": "digits", "model": {"graph": str(TEMPLATE)},
            "train": {"epochs": 3, "batch_size": 64, "metrics_interval_s": 0.5}, "device": "cpu"}
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    db = f"sqlite:///{folder / 'runs.sqlite'}"
    with WorkerClient.run(folder / "spec.json", db=db) as worker:
        list(worker.events(timeout=180))
        assert worker.wait(180) == 0, worker.stderr
    store = RunStore(db)
    run_id = store.runs()[-1].id
    store.close()
    return db, run_id, folder


def predict(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict], str]:
    code = main(["predict", *args])
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()] if "--json" in args and code == 0 else []
    return code, rows, out.err


def test_every_format_predicts_raw_digits_as_the_run_scored(trained, capsys):
    """Raw pixels (0..16) go in; each format standardises inside itself: all agree with the run's own
    model, and score as trained (fed raw pixels without the preprocessing, digits_cnn scored 56.5%)."""
    db, run_id, folder = trained
    raw = np.load(DIGITS)
    labels = raw["labels"]
    code, rows, err = predict(capsys, str(run_id), str(DIGITS), "--db", db, "--json", "--top", "3")
    assert code == 0, err
    assert [r["input"] for r in rows[:2]] == [f"{DIGITS}[0]", f"{DIGITS}[1]"] and len(rows) == len(labels)
    assert [sorted(t) for t in rows[0]["top"]] == [["class", "index", "prob"]] * 3
    run_pred = np.array([r["top"][0]["index"] for r in rows])
    assert (run_pred == labels).mean() > 0.9
    for fmt in MODEL_FORMATS:
        if get_format(fmt).missing():
            continue
        report = export(from_run(run_id, store=db), fmt, folder / "out", ExportOptions(timing_runs=1))
        assert report.ok, report.to_text()
        assert report.metrics["accuracy"] == report.metrics["pytorch_accuracy"] > 0.9
        code, rows, err = predict(capsys, report.path, str(DIGITS), "--json")
        assert code == 0, f"{fmt}: {err}"
        pred = np.array([r["top"][0]["index"] for r in rows])
        assert (pred == run_pred).mean() > 0.995, fmt
        assert rows[0]["top"][0]["class"] == "0"
    weights = export(from_run(run_id, store=db), "safetensors", folder / "out", ExportOptions(timing_runs=1))
    code, rows, err = predict(capsys, str(TEMPLATE), "--checkpoint", weights.path, str(DIGITS), "--json")
    assert code == 0, err
    assert (np.array([r["top"][0]["index"] for r in rows]) == run_pred).all()


def test_image_files_and_folders_are_read_as_their_pixels(trained, capsys, tmp_path):
    from PIL import Image

    db, run_id, folder = trained
    images = np.load(DIGITS)["images"][:6]
    for i, img in enumerate(images):  # the digits hold 0..16: the same values as an 8-bit grayscale image
        (tmp_path / "imgs" / str(i % 2)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(img.astype(np.uint8), "L").save(tmp_path / "imgs" / str(i % 2) / f"d{i}.png")
    np.savez(tmp_path / "six.npz", x=images)
    code, from_npz, err = predict(capsys, str(run_id), str(tmp_path / "six.npz"), "--db", db, "--json")
    assert code == 0, err
    files = sorted((tmp_path / "imgs").rglob("*.png"))
    code, from_files, err = predict(capsys, str(run_id), str(tmp_path / "imgs"), str(files[0]), "--db", db, "--json")
    assert code == 0, err
    assert [r["input"] for r in from_files] == [*map(str, files), str(files[0])]
    by_index = {f"d{i}.png": r["top"] for i, r in enumerate(from_npz)}
    for row in from_files:
        assert row["top"][0]["index"] == by_index[Path(row["input"]).name][0]["index"]
        assert row["top"][0]["prob"] == pytest.approx(by_index[Path(row["input"]).name][0]["prob"], rel=1e-5)


def test_bad_inputs_say_which_file_and_what_is_wrong(trained, capsys, tmp_path):
    db, run_id, _ = trained
    (tmp_path / "bad.png").write_bytes(b"not an image")
    np.savez(tmp_path / "wrong.npz", x=np.zeros((3, 5, 5), np.float32))
    np.savez(tmp_path / "nox.npz", y=np.zeros(3))
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "empty").mkdir()
    cases = {str(tmp_path / "missing.npz"): "no such file or folder",
             str(tmp_path / "bad.png"): "not a readable image",
             str(tmp_path / "wrong.npz"): "its samples have shape (1, 5, 5), the model takes (1, 8, 8)",
             str(tmp_path / "nox.npz"): "holds no array of samples",
             str(tmp_path / "notes.txt"): "not an image",
             str(tmp_path / "empty"): "holds no image files"}
    for path, why in cases.items():
        code, _, err = predict(capsys, str(run_id), path, "--db", db)
        assert code == 1 and err.count("\n") == 1, err
        assert path in err and why in err, err
    code, _, err = predict(capsys, str(tmp_path / "model.bin"), str(DIGITS))
    assert code == 1 and "no such file" in err and "Traceback" not in err
    code, _, err = predict(capsys, str(TEMPLATE), str(DIGITS))
    assert code == 1 and "needs --checkpoint" in err


def test_an_export_without_the_preprocessing_fails_its_proof(trained, tmp_path):
    """The proof on raw samples catches a model that does not standardise (the 56.5% digits model)."""
    db, run_id, _ = trained
    source = from_run(run_id, store=db)
    source.model = source.module  # what every format exported before: the graph alone
    report = export(source, "onnx", tmp_path / "m.onnx", ExportOptions(timing_runs=1))
    failed = {c.name for c in report.failed_checks}
    assert "accuracy on raw samples" in failed and report.metrics["accuracy"] < 0.8 < report.metrics["pytorch_accuracy"]
    assert Path(report.path).name == "m.onnx.unverified"


def test_a_table_run_standardises_each_feature_inside_its_export(capsys, tmp_path):
    """A CSV run (features at scales 1,000 apart): the ONNX export takes the columns as the file holds
    them, with or without the target column, and predicts as the run's own model."""
    from graph_editor.model import Graph, InputSpec, save_graph
    from tests.trainer.helpers import run_worker, write_spec

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1000, 300), rng.uniform(0, 1, 300)
    label = np.where(a > 500, "big", np.where(b > 0.5, "mid", "small"))
    rows = ["a,b,kind"] + [f"{x:.3f},{y:.4f},{k}" for x, y, k in zip(a, b, label, strict=True)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "features.csv").write_text("\n".join(r.rsplit(",", 1)[0] for r in rows) + "\n")
    g = Graph(InputSpec((2,)), 3, {"name": "table"})
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 32}), ("ReLU", "relu"),
            ("Linear", "fc2", {"out_features": 3}), ("Output", "output"))
    save_graph(g, tmp_path / "t.graph.json")
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, tmp_path / "t.graph.json", data={"dataset": str(tmp_path / "t.csv")},
                      train={"epochs": 20, "batch_size": 32}, optim={"lr": 0.01})
    code, _, err = run_worker(spec, db)
    assert code == 0, err
    report = export(from_run(1, store=db), "onnx", tmp_path / "t.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert report.metrics["accuracy"] == report.metrics["pytorch_accuracy"] > 0.85
    _, by_run, err = predict(capsys, "1", str(tmp_path / "t.csv"), "--db", db, "--json")
    assert by_run, err
    for table in ("t.csv", "features.csv"):
        code, rows_out, err = predict(capsys, str(tmp_path / "t.onnx"), str(tmp_path / table), "--json")
        assert code == 0, err
        assert [r["top"][0]["index"] for r in rows_out] == [r["top"][0]["index"] for r in by_run]
        assert [r["top"][0]["prob"] for r in rows_out] == pytest.approx([r["top"][0]["prob"] for r in by_run], rel=1e-4)
    names = {r["top"][0]["class"] for r in by_run}
    assert names <= {"big", "mid", "small"} and len(names) == 3
    hits = np.mean([r["top"][0]["class"] == k for r, k in zip(by_run, label, strict=True)])
    assert hits > 0.85
