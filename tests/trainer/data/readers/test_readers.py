"""Every dataset format's reader (``trainer/data/readers/``) on tiny fixture files: what it reads, and
what it refuses."""

from __future__ import annotations

import gzip
import importlib.util
import pickle

import numpy as np
import pytest
from PIL import Image

from trainer.data import DataError, load_raw, prepare
from trainer.data.formats import detect_format


def test_embedded_digits():
    raw = load_raw("digits", "auto")
    assert raw.x.shape == (1797, 1, 8, 8) and raw.x.dtype == np.uint8 and raw.x.max() == 16
    assert raw.y.shape == (1797,) and sorted(set(raw.y.tolist())) == list(range(10))
    assert raw.classes == [str(i) for i in range(10)]


def test_npz_with_hwc_images_and_class_names(tmp_path):
    x = np.random.default_rng(0).integers(0, 255, (12, 5, 6, 3), dtype=np.uint8)
    np.savez(tmp_path / "d.npz", images=x, labels=np.arange(12) % 3, classes=np.array(["a", "b", "c"]))
    raw = load_raw(str(tmp_path / "d.npz"), "auto")
    assert raw.x.shape == (12, 3, 5, 6) and np.array_equal(raw.x[1], x[1].transpose(2, 0, 1))
    assert raw.classes == ["a", "b", "c"]


def test_npz_missing_arrays_and_bad_labels(tmp_path):
    np.savez(tmp_path / "a.npz", foo=np.zeros(3))
    with pytest.raises(DataError, match="needs an array of samples"):
        load_raw(str(tmp_path / "a.npz"), "npz")
    np.savez(tmp_path / "b.npz", x=np.zeros((3, 2)), y=np.array([0.5, 1, 2]))
    with pytest.raises(DataError, match="integer class indices"):
        load_raw(str(tmp_path / "b.npz"), "npz")


def test_csv_numeric_and_categorical_columns(tmp_path):
    (tmp_path / "t.csv").write_text("age,colour,height,kind\n30,red,1.8,cat\n40,blue,1.6,dog\n"
                                    "50,red,1.7,cat\n60,green,1.5,bird\n")
    raw = load_raw(str(tmp_path / "t.csv"), "auto")
    assert raw.classes == ["bird", "cat", "dog"]
    assert raw.y.tolist() == [1, 2, 1, 0]
    # age, colour one-hot (blue, green, red), height
    assert raw.x.shape == (4, 5)
    assert raw.x[0].tolist() == pytest.approx([30, 0, 0, 1, 1.8])


def test_csv_target_column_and_errors(tmp_path):
    (tmp_path / "t.csv").write_text("label,a,b\n1,0.5,2\n0,1.5,\n")
    with pytest.raises(DataError, match="column 'b' is numeric but line 3 is empty"):
        load_raw(str(tmp_path / "t.csv"), "csv", target="label")
    with pytest.raises(DataError, match="no target column 'nope'"):
        load_raw(str(tmp_path / "t.csv"), "csv", target="nope")


def test_image_folder(tmp_path):
    for ci, name in enumerate(["cats", "dogs"]):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.new("RGB", (10 + i, 8), (ci * 100, i * 50, 0)).save(tmp_path / name / f"{i}.png")
    (tmp_path / "dogs" / "notes.txt").write_text("not an image")
    assert detect_format(tmp_path) == "image_folder"
    raw = load_raw(str(tmp_path), "auto", image_size=[8, 8])
    assert raw.x.shape == (6, 3, 8, 8) and raw.classes == ["cats", "dogs"] and raw.y.tolist() == [0, 0, 0, 1, 1, 1]
    assert raw.x[3, 0, 0, 0] == 100


def _image_split(folder, counts: dict[str, int], size=(8, 8)) -> None:
    for name, n in counts.items():
        (folder / name).mkdir(parents=True)
        for i in range(n):
            Image.new("L", size, 40 * i).save(folder / name / f"{i}.png")


def test_image_folder_split_ahead_of_time_keeps_its_splits(tmp_path):
    _image_split(tmp_path / "train", {"cat": 6, "dog": 5})
    _image_split(tmp_path / "valid", {"cat": 2, "dog": 2}, size=(12, 12))      # resized to the train size
    _image_split(tmp_path / "test", {"cat": 3, "dog": 1, "emu": 2})            # a class only the test has
    raw = load_raw(str(tmp_path), "auto")
    assert raw.classes == ["cat", "dog", "emu"] and raw.x.shape == (11, 1, 8, 8)
    assert raw.y.tolist() == [0] * 6 + [1] * 5
    assert raw.x_val.shape == (4, 1, 8, 8) and raw.y_val.tolist() == [0, 0, 1, 1]
    assert raw.y_test.tolist() == [0, 0, 0, 1, 2, 2]
    splits = prepare(raw, val_fraction=0.3, test_fraction=0.3, seed=0)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (11, 4, 6)   # no fraction taken from train

    only_test = tmp_path / "no_val"
    _image_split(only_test / "Train", {"a": 10, "b": 10})
    _image_split(only_test / "test", {"a": 2, "b": 2})
    splits = prepare(load_raw(str(only_test), "auto"), val_fraction=0.2, test_fraction=0.3, seed=0)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (16, 4, 4)   # val out of train


def test_classes_named_like_splits_are_still_classes(tmp_path):
    _image_split(tmp_path, {"train": 3, "test": 2})      # images directly inside: these are classes
    raw = load_raw(str(tmp_path), "auto")
    assert raw.classes == ["test", "train"] and raw.x_test is None and raw.y.tolist() == [0, 0, 1, 1, 1]
    empty = tmp_path / "empty_split"
    (empty / "train" / "cat").mkdir(parents=True)
    (empty / "test" / "cat").mkdir(parents=True)
    Image.new("L", (8, 8)).save(empty / "test" / "cat" / "0.png")
    with pytest.raises(DataError, match="train: no images found in class subfolders"):
        load_raw(str(empty), "auto")


def _idx(path, arr: np.ndarray, gz: bool) -> None:
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(d.to_bytes(4, "big") for d in arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx(tmp_path, gz):
    sfx = ".gz" if gz else ""
    x = np.random.default_rng(1).integers(0, 255, (7, 28, 28))
    _idx(tmp_path / f"train-images-idx3-ubyte{sfx}", x, gz)
    _idx(tmp_path / f"train-labels-idx1-ubyte{sfx}", np.arange(7) % 10, gz)
    _idx(tmp_path / f"t10k-images-idx3-ubyte{sfx}", x[:3], gz)
    _idx(tmp_path / f"t10k-labels-idx1-ubyte{sfx}", np.arange(3), gz)
    raw = load_raw(str(tmp_path), "auto")
    assert raw.x.shape == (7, 1, 28, 28) and np.array_equal(raw.x[:, 0], x)
    assert raw.x_test.shape == (3, 1, 28, 28) and raw.y_test.tolist() == [0, 1, 2]


def test_idx_bad_header(tmp_path):
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (tmp_path / name).write_bytes(b"\x00\x00\x0d\x01garbage")
    with pytest.raises(DataError, match="not an unsigned-byte IDX file"):
        load_raw(str(tmp_path), "idx")


def _cifar_batch(path, n: int, key: bytes, seed: int) -> np.ndarray:
    data = np.random.default_rng(seed).integers(0, 255, (n, 3072), dtype=np.uint8)
    with open(path, "wb") as f:
        pickle.dump({b"batch_label": b"x", key: list(range(n)), b"data": data}, f, protocol=2)
    return data


def test_cifar10_python_batches(tmp_path):
    first = _cifar_batch(tmp_path / "data_batch_1", 4, b"labels", 0)
    _cifar_batch(tmp_path / "data_batch_2", 4, b"labels", 1)
    _cifar_batch(tmp_path / "test_batch", 3, b"labels", 2)
    with open(tmp_path / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [b"plane", b"car", b"bird", b"cat"]}, f, protocol=2)
    raw = load_raw(str(tmp_path), "auto")
    assert raw.x.shape == (8, 3, 32, 32) and np.array_equal(raw.x[0].reshape(-1), first[0])
    assert raw.classes == ["plane", "car", "bird", "cat"] and raw.x_test.shape == (3, 3, 32, 32)


def test_cifar100_python_batches(tmp_path):
    _cifar_batch(tmp_path / "train", 5, b"fine_labels", 0)
    _cifar_batch(tmp_path / "test", 2, b"fine_labels", 1)
    (tmp_path / "meta").write_bytes(pickle.dumps({b"fine_label_names": [b"a"]}, protocol=2))
    raw = load_raw(str(tmp_path), "cifar")
    assert raw.y.tolist() == [0, 1, 2, 3, 4] and raw.classes == ["0", "1", "2", "3", "4"]


class Boom:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_cifar_loader_refuses_pickled_code(tmp_path, capsys):
    (tmp_path / "data_batch_1").write_bytes(pickle.dumps({b"data": Boom(), b"labels": [0]}))
    (tmp_path / "test_batch").write_bytes(pickle.dumps({b"data": Boom(), b"labels": [0]}))
    with pytest.raises(DataError, match="refusing to load 'builtins.print'"):
        load_raw(str(tmp_path), "cifar")
    assert "must never run" not in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="the 'datasets' package is not installed")
def test_hugging_face_save_to_disk(tmp_path):
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    feats = datasets.Features({"a": datasets.Value("float32"), "b": datasets.Value("float32"),
                               "label": datasets.ClassLabel(names=["no", "yes"])})

    def part(a: list[float], b: list[float], label: list[int], name: str) -> datasets.Dataset:
        table = InMemoryTable(pa.table({"a": pa.array(a, pa.float32()), "b": pa.array(b, pa.float32()),
                                        "label": pa.array(label, pa.int64())}))
        # An explicit fingerprint: no hashing of the table (which some dill/pyarrow pairs cannot do).
        return datasets.Dataset(table, info=datasets.DatasetInfo(features=feats), fingerprint=name)

    datasets.DatasetDict({"train": part([0.0, 1.0, 2.0], [1.0, 1.0, 0.0], [0, 1, 1], "train"),
                          "test": part([5.0], [6.0], [0], "test")}).save_to_disk(str(tmp_path / "hf"))
    raw = load_raw(str(tmp_path / "hf"), "auto")
    assert raw.x.shape == (3, 2) and raw.classes == ["no", "yes"] and raw.y.tolist() == [0, 1, 1]
    assert raw.x[1].tolist() == [1.0, 1.0] and raw.x_test.tolist() == [[5.0, 6.0]] and raw.y_test.tolist() == [0]
