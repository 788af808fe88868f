"""Run specs: defaults, every bad-spec case of the issue named by field, migration, the worker refusing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graph_editor.model import Graph, InputSpec
from trainer.checks import setup
from trainer.spec import SCHEMA_VERSION, RunSpec, SpecError, load_spec, spec_from_dict

from .helpers import DIGITS_CNN, run_worker, tiny_cnn, tiny_mlp, write_spec


def problems_of(data: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    return info.value.problems


def setup_problems(folder, graph=None, **sections) -> list[str]:
    with pytest.raises(SpecError) as info:
        setup(load_spec(write_spec(folder, graph, **sections)))
    return info.value.problems


def test_defaults_round_trip():
    spec = spec_from_dict({})
    assert spec.optim.name == "adamw" and spec.train.epochs > 0
    again = spec_from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again.to_dict() == spec.to_dict()
    assert spec.to_dict()["schema_version"] == SCHEMA_VERSION


def test_unknown_optimizer_names_the_field_and_the_choices():
    assert problems_of({"optim": {"name": "adamx"}}) == [
        "optim.name: unknown optimizer 'adamx' (choose sgd, adamw, adam, rmsprop)"]


def test_negative_learning_rate():
    assert problems_of({"optim": {"lr": -0.1}}) == ["optim.lr: must be positive, got -0.1"]


def test_every_problem_is_reported_at_once():
    found = problems_of({"optim": {"name": "x", "lr": 0}, "schedule": {"name": "cyclic"},
                         "precision": {"compile": "fast"}, "train": {"batch_size": 0}})
    assert [p.split(":")[0] for p in found] == ["optim.name", "schedule.name", "precision.compile",
                                                "optim.lr", "train.batch_size"]


def test_unknown_fields_and_wrong_types():
    found = problems_of({"optim": {"learning_rate": 1}, "train": {"epochs": "ten"}, "bogus": 1})
    assert any(p.startswith("optim.learning_rate: unknown field") for p in found)
    assert 'train.epochs: expected an integer, got "ten"' in found
    assert any(p.startswith("bogus: unknown field") for p in found)


def test_future_schema_version_is_refused():
    assert problems_of({"schema_version": 99})[0].startswith("schema_version: 99 is not a version")


def test_ranges_and_devices():
    found = problems_of({"optim": {"label_smoothing": 1.5, "betas": [0.9]}, "device": "tpu",
                         "data": {"val_fraction": 0.5, "test_fraction": 0.5}})
    assert {p.split(":")[0] for p in found} == {"optim.label_smoothing", "optim.betas", "device",
                                                "data.val_fraction"}


def test_missing_dataset_path(tmp_path):
    found = setup_problems(tmp_path, data={"dataset": "nowhere.npz"})
    assert len(found) == 1 and found[0].startswith("data.dataset:") and "no such file" in found[0]


def test_missing_graph_file(tmp_path):
    found = setup_problems(tmp_path, DIGITS_CNN.parent / "missing.graph.json")
    assert found == [f"model.graph: file not found: {DIGITS_CNN.parent / 'missing.graph.json'}"]


def test_class_count_disagrees_with_the_data(tmp_path):
    found = setup_problems(tmp_path, tiny_cnn(classes=7))
    assert found == ["model.graph: the graph has 7 classes (num_classes) but data.dataset 'digits' has 10"]


def test_input_shape_the_graph_does_not_accept(tmp_path):
    mlp = tiny_mlp(features=20, classes=10)
    mlp.set_param("fc1", "in_features", 20)     # fixed: the 64 flattened pixels cannot go in
    found = setup_problems(tmp_path, mlp)
    assert len(found) == 1 and found[0].startswith("data.dataset: samples of shape 64 do not fit")


def test_graph_takes_the_data_shape_when_it_fits(tmp_path):
    g = tiny_cnn(size=28)   # adaptive pooling: any image size works
    st = setup(load_spec(write_spec(tmp_path, g)))
    assert st.graph.input_spec.shape == (1, 8, 8)


def test_data_and_device_checks(tmp_path):
    np.savez(tmp_path / "tab.npz", x=np.random.rand(50, 4).astype(np.float32), y=np.arange(50) % 10)
    found = setup_problems(tmp_path, Graph(InputSpec((4,)), 10), data={"dataset": "tab.npz",
                           "augment": {"flip": True}}, precision={"dtype": "fp16"}, train={"batch_size": 500})
    fields = {p.split(":")[0] for p in found}
    assert {"precision.dtype", "data.augment"} <= fields


def test_cuda_device_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    found = setup_problems(tmp_path, device="cuda:0")
    assert found == ["device: 'cuda:0' asked for, but CUDA is not available on this machine"]


def test_fp8_needs_torchao_and_a_new_gpu(tmp_path):
    found = setup_problems(tmp_path, precision={"dtype": "fp8"})
    assert len(found) == 1 and found[0].startswith("precision.dtype: fp8 needs")


def test_fp8_converts_only_linear_layers_of_multiples_of_16():
    from torch import nn

    from trainer.job import fp8_eligible

    assert fp8_eligible(nn.Linear(256, 128), "fc")
    assert not fp8_eligible(nn.Linear(256, 10), "head")      # the fp8 matrix product refuses 10 columns
    assert not fp8_eligible(nn.Linear(64, 72), "odd")
    assert not fp8_eligible(nn.Conv2d(16, 16, 3), "conv")


def test_channels_last_for_convnets_on_images_only(tmp_path):
    import torch

    from trainer.job import build_model, make_loaders

    np.savez(tmp_path / "rgb.npz", x=np.random.randint(0, 255, (200, 3, 8, 8), dtype=np.uint8), y=np.arange(200) % 10)
    st = setup(load_spec(write_spec(tmp_path, tiny_cnn(channels=3), data={"dataset": "rgb.npz"})))  # default spec
    assert st.channels_last
    conv = build_model(st).get_submodule("conv").weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    x, _, _ = next(make_loaders(st)["train"].batches(torch.arange(200)))
    assert x.shape == (64, 3, 8, 8) and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()

    image_mlp = Graph(InputSpec((1, 8, 8)), 10)
    image_mlp.chain(("Input", "input"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}),
                    ("Output", "output"))
    assert not setup(load_spec(write_spec(tmp_path, image_mlp))).channels_last    # nothing to gain
    assert not setup(load_spec(write_spec(tmp_path, precision={"channels_last": False}))).channels_last
    np.savez(tmp_path / "tab.npz", x=np.random.rand(200, 4).astype(np.float32), y=np.arange(200) % 10)
    assert not setup(load_spec(write_spec(tmp_path, tiny_mlp(4, 10), data={"dataset": "tab.npz"}))).channels_last


def test_batch_larger_than_train_split(tmp_path):
    found = setup_problems(tmp_path, train={"batch_size": 5000})
    assert found == ["train.batch_size: 5000 is larger than the train split (1258 samples)"]


@pytest.mark.process
def test_worker_refuses_a_bad_spec_with_exit_2_and_a_failed_event(tmp_path, db):
    spec = write_spec(tmp_path, optim={"name": "adamx"})
    code, events, stderr = run_worker(spec, db)
    assert code == 2
    assert [e.event for e in events] == ["failed"]
    assert events[0].kind == "spec" and events[0].run_id is None
    assert events[0].problems == ["optim.name: unknown optimizer 'adamx' (choose sgd, adamw, adam, rmsprop)"]
    assert "optim.name" in stderr and "Traceback" not in stderr


def test_spec_dataclass_is_typed():
    assert RunSpec().data.augment.normalize is True


@pytest.mark.parametrize("section,values", [
    ("optim", {"lr": float("inf")}), ("optim", {"weight_decay": float("nan")}), ("optim", {"momentum": float("nan")}),
    ("train", {"metrics_interval_s": float("nan")}), ("early_stopping", {"min_delta": float("nan")}),
    ("optim", {"lr": 10**400}), ("optim", {"betas": [0.9, float("-inf")]}),
])
def test_nan_and_infinity_are_refused_by_field(section, values):
    [field] = values
    [problem] = problems_of({section: values})
    assert problem.startswith(f"{section}.{field}: must be a finite number, got ") and len(problem) < 120


def test_nan_written_in_a_spec_file_is_refused(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"optim": {"lr": Infinity, "weight_decay": NaN}}')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert [p.split(":")[0] for p in info.value.problems] == ["optim.lr", "optim.weight_decay"]


def test_absurd_integers_are_refused_by_field():
    found = problems_of({"train": {"epochs": 10**50, "seed": 2**64}, "data": {"workers": 2**40}})
    assert [p.split(":")[0] for p in found] == ["data.workers", "train.epochs", "train.seed"]
    assert all("must be at most" in p for p in found) and all(len(p) < 120 for p in found)
    assert spec_from_dict({"train": {"seed": 2**63 - 1}}).train.seed == 2**63 - 1


@pytest.mark.parametrize("text,words", [
    ('{"train": {"seed": ' + "1" * 5000 + "}}", "a number of 5000 digits at line 1"),
    ('{"name": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
    ('{"optim": {"lr": 0.1,}}', "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
])
def test_hostile_spec_files_give_one_spec_error(tmp_path, text, words):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    [problem] = info.value.problems
    assert problem.startswith("spec: ") and words in problem and len(problem) < 300


def test_a_huge_or_deep_wrong_value_is_shown_short():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    found = problems_of({"device": deep, "name": ["x" * 10000]})
    assert all(len(p) < 120 for p in found) and [p.split(":")[0] for p in found] == ["name", "device"]


MLP = DIGITS_CNN.parent / "mlp.graph.json"


def test_the_mlp_template_takes_the_digits_flattened(tmp_path):
    """The mlp template says "64 features, the 8x8 digits flattened": images meet a flat input as rows."""
    st = setup(load_spec(write_spec(tmp_path, MLP)))
    assert st.splits.sample_shape == (64,) and st.graph.input_spec.shape == (64,)
    assert not st.splits.is_image and not st.channels_last
    assert st.splits.mean.shape == (64,)          # normalised per pixel, as features are
    assert setup_problems(tmp_path, MLP, data={"augment": {"flip": True}}) == [
        "data.augment: flip and translate need images (C x H x W); samples here are 64"]


@pytest.mark.process
def test_the_mlp_template_trains_on_the_digits_in_the_real_worker(tmp_path, db):
    from trainer.metrics.confusion_cells import predict_validation

    spec = write_spec(tmp_path, MLP, train={"epochs": 2, "batch_size": 64})
    code, events, err = run_worker(spec, db)
    assert code == 0, err
    started = next(e for e in events if e.event == "run_started")
    finished = events[-1]
    assert started.train_size + started.val_size + started.test_size == 1797
    assert finished.event == "finished" and finished.test_accuracy > 0.8
    # The studio's re-evaluation of a confusion cell feeds the samples as the worker did.
    last_epoch = [e for e in events if e.event == "epoch_end"][-1]
    last = [e for e in events if e.event == "checkpoint" and e.kind == "last"][-1]
    found = predict_validation(json.loads(spec.read_text()), last.path, base_dir=tmp_path)
    assert found.images.shape[1:] == (1, 8, 8) and found.matrix().tolist() == last_epoch.confusion


@pytest.mark.parametrize("device", ["cuda:abc", "cuda:-1", "cuda: 1", "cuda:99999999999999999999", "gpu"])
def test_a_malformed_device_is_a_spec_problem_not_a_torch_error(device):
    [problem] = problems_of({"device": device})
    assert problem.startswith(f'device: unknown device "{device}"')


def _hostile_datasets(folder) -> dict[str, tuple[dict, str]]:
    """Each dataset of issue 18 that used to end in a traceback or a failure after training started."""
    (folder / "latin1.csv").write_bytes("a,b,kind\n1,2,x\n3,4,caf\u00e9\n".encode("latin-1"))
    (folder / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (folder / "notzip.npz").write_bytes(b"not a zip")
    x = np.zeros((40, 1, 8, 8), dtype=np.float32)
    np.savez(folder / "long_y.npz", x=x, y=np.arange(41) % 10)
    np.savez(folder / "beyond.npz", x=x, y=np.arange(40) % 10, classes=np.array(list("abcdef")))
    np.savez(folder / "test_shape.npz", x=x, y=np.arange(40) % 10, x_test=np.zeros((4, 1, 8, 9)),
             y_test=np.arange(4))
    big = x.astype(np.float64)
    big[3, 0, 1, 1] = 1e300
    np.savez(folder / "overflow.npz", x=big, y=np.arange(40) % 10)
    np.savez(folder / "one_class.npz", x=x, y=np.zeros(40, dtype=np.int64))
    return {"latin-1 CSV": ({"dataset": "latin1.csv"}, "is not UTF-8 text"),
            "corrupt csv.gz": ({"dataset": "bad.csv.gz"}, "damaged or truncated gzip"),
            "npz not a zip": ({"dataset": "notzip.npz"}, "not an .npz file"),
            "/dev/null as npz": ({"dataset": "/dev/null", "format": "npz"}, "not an .npz file"),
            "y longer than x": ({"dataset": "long_y.npz"}, "40 samples but 41 labels"),
            "labels beyond the classes": ({"dataset": "beyond.npz"}, "label 6 at row 6 is not a class"),
            "x_test of another shape": ({"dataset": "test_shape.npz"}, "test samples are 1x8x9"),
            "float64 beyond float32": ({"dataset": "overflow.npz"}, "inf in sample 3 at 0x1x1"),
            "one class": ({"dataset": "one_class.npz"}, "only one class")}


def test_hostile_datasets_are_refused_by_setup_naming_the_dataset(tmp_path):
    for case, (data, words) in _hostile_datasets(tmp_path).items():
        found = setup_problems(tmp_path, data=data)
        assert len(found) == 1 and found[0].startswith("data.dataset: ") and words in found[0], (case, found)


@pytest.mark.process
def test_the_worker_refuses_a_latin1_csv_before_the_run_starts(tmp_path, db):
    _hostile_datasets(tmp_path)
    code, events, err = run_worker(write_spec(tmp_path, tiny_mlp(2, 2), data={"dataset": "latin1.csv"}), db)
    assert code == 2 and [e.event for e in events] == ["failed"]
    assert events[0].problems[0].startswith("data.dataset: ") and "is not UTF-8 text" in events[0].problems[0]
    assert "Traceback" not in err


def test_image_size_and_loader_workers_have_sane_limits():
    found = problems_of({"data": {"image_size": [10**6, 10**6], "workers": 10**6}})
    assert found == ["data.image_size: must be [height, width] in pixels, each 1 to 16384, got [1000000, 1000000]",
                     "data.workers: at most 64 DataLoader processes, got 1000000"]


def test_a_run_s_tags_are_names_runs_can_edit_and_filter_by():
    """A spec's tags become the run's (a sweep's trials, a retrained trial); the Runs workspace edits them
    as one comma-separated line, so a tag with a comma, an empty one or a non-list is refused by name."""
    assert spec_from_dict({"tags": ["study:s", "trial:3"]}).tags == ["study:s", "trial:3"]
    assert spec_from_dict({}).to_dict()["tags"] == []
    assert problems_of({"tags": ["ok", "a,b", " "]}) == [
        f"tags[{k}]: must be 1 to 200 characters without a comma (Runs edits tags as one comma-separated line), "
        f"got {shown}" for k, shown in ((1, '"a,b"'), (2, '" "'))]
    assert problems_of({"tags": "study:s"}) == ['tags: expected a list of tags (strings), got "study:s"']
