"""The split, normalisation and the batch loaders, and the refusals of bad data before a run (the readers' own
tests: ``tests/trainer/data/readers/``)."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from trainer.data import DataError, load_raw, prepare, split_indices
from trainer.data.loaders import Augment, DeviceLoader, StreamLoader


def test_split_is_deterministic_and_disjoint():
    a = split_indices(100, 0.1, 0.2, seed=3)
    b = split_indices(100, 0.1, 0.2, seed=3)
    c = split_indices(100, 0.1, 0.2, seed=4)
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert [len(p) for p in a] == [70, 10, 20]
    assert sorted(np.concatenate(a).tolist()) == list(range(100))


def test_normalisation_uses_train_statistics_only():
    raw = load_raw("digits", "auto")
    s = prepare(raw, val_fraction=0.1, test_fraction=0.2, seed=0)
    tr, _, _ = split_indices(len(raw.y), 0.1, 0.2, 0)
    assert s.mean.item() == pytest.approx(raw.x[tr].mean(), rel=1e-5)
    assert s.train.x.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert s.train.x.std().item() == pytest.approx(1.0, abs=1e-3)
    assert s.test.x.mean().item() != pytest.approx(0.0, abs=1e-5)


def test_device_loader_drops_ragged_training_batch_and_pads_evaluation():
    s = prepare(load_raw("digits", "auto"), val_fraction=0.1, test_fraction=0.2, seed=0)
    train = DeviceLoader(s.train, 100, torch.device("cpu"), train=True)
    batches = list(train.batches(train.order()))
    assert len(batches) == 12 and {b[0].shape for b in batches} == {(100, 1, 8, 8)}
    seen = torch.cat([b[1] for b in batches])
    assert len(seen) == 1200
    test = DeviceLoader(s.test, 100, torch.device("cpu"), train=False)
    out = list(test.batches(test.order()))
    assert [v for _, _, v in out] == [100, 100, 100, 59] and out[-1][0].shape == (100, 1, 8, 8)
    assert torch.equal(torch.cat([y[:v] for _, y, v in out]), s.test.y)


def test_evaluation_batches_in_the_splits_own_order_are_views_and_another_order_is_gathered():
    s = prepare(load_raw("digits", "auto"), val_fraction=0.1, test_fraction=0.2, seed=0)
    test = DeviceLoader(s.test, 100, torch.device("cpu"), train=False, channels_last=True)
    out = list(test.batches(test.order()))
    base = test.x.untyped_storage().data_ptr()
    assert [x.untyped_storage().data_ptr() == base for x, _, _ in out] == [True, True, True, False]   # the tail: padded
    assert torch.equal(out[1][0], test.x[100:200]) and out[1][0].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out[-1][0][59:], test.x[-1:].expand(41, -1, -1, -1))   # padded with the last row
    backwards = torch.arange(test.n - 1, -1, -1)                               # equal to the order, not it
    first = next(test.batches(backwards))
    assert torch.equal(first[1], s.test.y.flip(0)[:100]) and first[0].untyped_storage().data_ptr() != base


def test_every_batch_reaches_the_model_in_one_layout_whatever_its_source():
    """Compiled graphs are cached by their input's strides: 1-channel images gathered from a contiguous
    array (the warm-up's npz) or from channels_last ones (the digits), augmented or not, in training or
    evaluation, reach the model with the same strides, so a warmed cache answers the run."""
    s = prepare(load_raw("digits", "auto"), val_fraction=0.1, test_fraction=0.2, seed=0)
    x = s.train.x
    gathered = type(s.train)(torch.empty(x.shape).copy_(x), s.train.y)     # strides (64, 64, 8, 1)
    other = type(s.train)(torch.empty(x.shape).as_strided(x.shape, (64, 1, 8, 1)).copy_(x), s.train.y)
    strides = set()
    for split, augment in ((gathered, None), (other, None), (gathered, Augment(True, 1)), (s.val, None)):
        for train in (True, False):
            loader = DeviceLoader(split, 32, torch.device("cpu"), train=train, augment=augment, channels_last=True)
            x = next(loader.batches(loader.order()))[0]
            strides.add(x.stride())
            assert x.is_contiguous(memory_format=torch.channels_last)
    assert strides == {(64, 1, 8, 1)}
    for split in (gathered, other):
        flat = DeviceLoader(split, 32, torch.device("cpu"), train=True)
        assert next(flat.batches(flat.order()))[0].stride() == (64, 64, 8, 1)


def test_translate_moves_each_image_by_its_own_offset():
    x = torch.zeros(64, 1, 5, 5)
    x[:, 0, 2, 2] = 1.0
    gen = torch.Generator().manual_seed(0)
    out = Augment(False, 2)(x, gen)
    assert out.shape == x.shape and torch.all(out.sum((1, 2, 3)) == 1)
    positions = {tuple(torch.nonzero(img[0])[0].tolist()) for img in out}
    assert len(positions) > 10 and all(0 <= r <= 4 and 0 <= c <= 4 for r, c in positions)


def test_flip_mirrors_about_half_the_batch():
    x = torch.arange(4.0).view(1, 1, 1, 4).repeat(200, 1, 1, 1)
    out = Augment(True, 0)(x, torch.Generator().manual_seed(0))
    flipped = (out[:, 0, 0, 0] == 3).sum().item()
    assert 60 < flipped < 140 and torch.all((out[:, 0, 0, 0] == 0) | (out[:, 0, 0, 0] == 3))


@pytest.mark.slow
def test_stream_loader_matches_device_loader():
    raw = load_raw("digits", "auto")
    dev = prepare(raw, val_fraction=0.1, test_fraction=0.2, seed=0)
    host = prepare(raw, val_fraction=0.1, test_fraction=0.2, seed=0, keep_raw=True)
    assert host.train.x.dtype == torch.uint8
    a = DeviceLoader(dev.train, 64, torch.device("cpu"), train=True, seed=5)
    b = StreamLoader(host.train, 64, torch.device("cpu"), train=True, seed=5, mean=host.mean, std=host.std,
                     workers=1)
    for (xa, ya, _), (xb, yb, _) in zip(a.batches(a.order()), b.batches(b.order()), strict=True):
        assert torch.equal(ya, yb) and torch.allclose(xa, xb, atol=1e-6)


# ------------------------------------------------------------------ the format registry
def test_formats_are_a_registry_the_spec_derives_from():
    from trainer import spec as ts
    from trainer.data import dataset_format, format_names
    from trainer.data.formats import formats

    assert ts.FORMATS == format_names() == ("auto", "digits", "npz", "image_csv", "csv", "image_folder", "idx", "cifar",
                                                    "hf")
    assert all(f.doc for f in formats().values())
    with pytest.raises(ValueError, match="'csv' is already registered"):
        dataset_format("csv")(lambda path, options: None)
    assert ts.spec_from_dict({"data": {"format": "npz"}}).data.format == "npz"
    with pytest.raises(ts.SpecError, match="unknown dataset format 'parquet'"):
        ts.spec_from_dict({"data": {"format": "parquet"}})


# ------------------------------------------------------------------ unreadable files (D4)
def test_a_latin1_csv_is_refused_naming_the_line(tmp_path):
    (tmp_path / "t.csv").write_bytes("a,b,kind\n1,2,cat\n3,4,caf\u00e9\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"is not UTF-8 text \(byte 0xe9 on line 3\); save it as UTF-8"):
        load_raw(str(tmp_path / "t.csv"), "auto")


def test_a_utf8_csv_with_a_byte_order_mark_reads(tmp_path):
    (tmp_path / "t.csv").write_bytes("\ufeffa,kind\n1,caf\u00e9\n2,tea\n".encode())
    raw = load_raw(str(tmp_path / "t.csv"), "auto")
    assert raw.classes == ["caf\u00e9", "tea"] and raw.features == ["a"]


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_corrupt_csv_gz_is_refused(tmp_path, damage):
    data = gzip.compress(b"a,b,kind\n" + b"1,2,x\n3,4,y\n" * 200)
    (tmp_path / "t.csv.gz").write_bytes(data[:len(data) // 2] if damage == "truncated" else b"\x1f\x8bnot gzip")
    with pytest.raises(DataError, match="damaged or truncated gzip file"):
        load_raw(str(tmp_path / "t.csv.gz"), "auto")


def test_an_npz_that_is_not_an_archive_is_refused(tmp_path):
    (tmp_path / "a.npz").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "empty.npz").write_bytes(b"")
    np.save(tmp_path / "single.npy", np.zeros(3))
    (tmp_path / "single.npy").rename(tmp_path / "single.npz")
    for name in "a.npz", "empty.npz", "single.npz":
        with pytest.raises(DataError, match="not a readable .npz file|holds a single array|it is empty"):
            load_raw(str(tmp_path / name), "npz")
    with pytest.raises(DataError, match="not an .npz file .*: it is empty"):
        load_raw("/dev/null", "npz")


def test_a_text_file_named_npz_is_not_called_a_pickle(tmp_path):
    """NumPy reads what is neither a zip nor a .npy array as a pickle: a text file was refused for
    "pickled (object) data". Its first bytes say what it is not."""
    (tmp_path / "notes.npz").write_text("x,y\n1,2\n")
    with pytest.raises(DataError, match="notes.npz: not an .npz file .*neither a zip archive nor a NumPy array") as err:
        load_raw(str(tmp_path / "notes.npz"), "npz")
    assert "pickle" not in str(err.value)


@pytest.mark.slow
def test_a_decompression_bomb_png_is_refused(tmp_path):
    for name in "a", "b":
        (tmp_path / name).mkdir()
        Image.new("L", (8, 8)).save(tmp_path / name / "0.png")
    # 20000 x 20000 grey pixels compress to a few hundred KB: over Pillow's limit, refused unread.
    Image.new("1", (20000, 20000)).save(tmp_path / "b" / "bomb.png")
    with pytest.raises(DataError, match="bomb.png: refused, an image this large is likely a decompression bomb"):
        load_raw(str(tmp_path), "auto")


# ------------------------------------------------------------------ labels against classes (D5)
def _npz(tmp_path, **arrays) -> str:
    np.savez(tmp_path / "d.npz", **arrays)
    return str(tmp_path / "d.npz")


X10 = np.zeros((10, 3), dtype=np.float32)
Y10 = np.arange(10) % 2


@pytest.mark.parametrize("arrays,words", [
    ({"x": X10, "y": np.arange(11) % 2}, "10 samples but 11 labels"),
    ({"x": np.zeros((12, 3)), "y": Y10}, "12 samples but 10 labels"),
    ({"x": X10, "y": Y10 * 6, "classes": np.array(["a", "b", "c", "d", "e"])},
     "label 6 at row 1 is not a class: there are 5 class names (a, b, c, d, e), so labels run 0 to 4"),
    ({"x": X10, "y": Y10, "x_test": np.zeros((2, 3)), "y_test": np.array([0, 7])},
     "test label 7 at row 1 is not a class: there are 2 class names"),
    ({"x": X10, "y": Y10, "x_test": np.zeros((3, 3)), "y_test": np.array([0, 1])}, "3 test samples but 2 test labels"),
    ({"x": X10, "y": Y10, "x_test": np.zeros((2, 4)), "y_test": np.array([0, 1])},
     "test samples are 4, training samples 3"),
    ({"x": X10, "y": Y10, "x_test": np.zeros((2, 3))}, "has x_test but not y_test"),
])
def test_labels_are_checked_against_samples_and_classes_before_anything_starts(tmp_path, arrays, words):
    with pytest.raises(DataError) as info:
        load_raw(_npz(tmp_path, **arrays), "npz")
    assert words in str(info.value)


# ------------------------------------------------------------------ NaN and infinity (D9)
@pytest.mark.parametrize("value,why", [("nan", "is not a number"), ("inf", "is not a number"),
                                       ("-Infinity", "is not a number"), ("1e300", "is beyond float32's range")])
def test_non_finite_csv_values_are_refused_naming_column_and_line(tmp_path, value, why):
    (tmp_path / "t.csv").write_text(f"a,b,kind\n1,2,x\n3,4,y\n5,{value},x\n")
    with pytest.raises(DataError) as info:
        load_raw(str(tmp_path / "t.csv"), "auto")
    assert f"column 'b', line 4: '{value}' {why}" in str(info.value)


def test_non_finite_npz_samples_are_refused_naming_row_and_position(tmp_path):
    x = np.zeros((10, 1, 4, 4))
    x[7, 0, 2, 3] = 1e300                       # float64 that float32 cannot hold: becomes inf
    with pytest.raises(DataError, match=r"inf in sample 7 at 0x2x3 \(channel x row x column\)"):
        load_raw(_npz(tmp_path, x=x, y=Y10), "npz")
    table = np.zeros((10, 3))
    table[4, 2] = np.nan
    with pytest.raises(DataError, match="nan in feature 2 of row 4"):
        load_raw(_npz(tmp_path, x=table, y=Y10), "npz")


# ------------------------------------------------------------------ degenerate data (D11)
def test_a_single_class_is_refused(tmp_path):
    with pytest.raises(DataError, match="only one class"):
        load_raw(_npz(tmp_path, x=X10, y=np.zeros(10, dtype=np.int64)), "npz")
    with pytest.raises(DataError, match="every training sample is of the class 'b'"):
        load_raw(_npz(tmp_path, x=X10, y=np.ones(10, dtype=np.int64), classes=np.array(["a", "b"])), "npz")
    (tmp_path / "t.csv").write_text("a,kind\n1,x\n2,x\n")
    with pytest.raises(DataError, match="only one class \\('x'\\)"):
        load_raw(str(tmp_path / "t.csv"), "auto")


def test_empty_target_cells_are_refused_not_a_class_named_empty(tmp_path):
    (tmp_path / "t.csv").write_text("a,kind\n1,x\n2,\n3,y\n4,\n")
    with pytest.raises(DataError, match="line 3 has no value in the target column 'kind' \\(2 row"):
        load_raw(str(tmp_path / "t.csv"), "auto")


def test_duplicate_column_names_are_refused(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,a,kind\n1,2,3,x\n4,5,6,y\n")
    with pytest.raises(DataError, match="columns 1 and 3 are both named 'a'"):
        load_raw(str(tmp_path / "t.csv"), "auto")


def test_a_malformed_file_a_reader_did_not_foresee_is_still_a_refusal_naming_file_and_format(tmp_path):
    for name in ("data_batch_1", "test_batch"):     # rows of 100 bytes: not 3x32x32 images
        with open(tmp_path / name, "wb") as f:
            pickle.dump({b"labels": [0, 1], b"data": np.zeros((2, 100), dtype=np.uint8)}, f, protocol=2)
    with pytest.raises(DataError) as info:
        load_raw(str(tmp_path), "auto")
    assert str(info.value).startswith(f"{tmp_path}: cannot be read as cifar (ValueError: cannot reshape")
