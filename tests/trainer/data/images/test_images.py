"""Images that stay on disk: decoding every mode a real folder holds, indexing folders and CSVs, the
problems reported before a run, the transforms, and the loader that skips and counts bad files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trainer.checks import setup
from trainer.data.images.decode import decode, decode_bytes, decode_jpegs, read_bytes
from trainer.data.images.index import index_csv, index_folder
from trainer.data.images.prepare import file_loaders
from trainer.data.images.transforms import batch_mix, eval_transform, train_transform
from trainer.spec import ImageSpec, SpecError, load_spec, spec_from_dict

from ...helpers import tiny_cnn, write_spec
from ...image_files import corrupt, write_folder

RGB = np.random.default_rng(1).integers(0, 256, (10, 12, 3), dtype=np.uint8)


@pytest.mark.parametrize("mode", ["RGB", "CMYK", "RGBA", "L", "P"])
@pytest.mark.parametrize("ext", [".jpg", ".png", ".bmp", ".tif"])
def test_every_mode_becomes_rgb_and_grey(tmp_path, mode, ext):
    if ext == ".jpg" and mode in ("RGBA", "P") or mode == "CMYK" and ext in (".png", ".bmp"):
        pytest.skip(f"Pillow does not write {mode} as {ext}")
    f = tmp_path / f"x{ext}"
    Image.fromarray(RGB).convert(mode).save(f)
    want = np.asarray(Image.open(f).convert("RGB"), dtype=np.int16)
    rgb, grey = decode(f, 3), decode(f, 1)
    assert not isinstance(rgb, str) and not isinstance(grey, str)
    assert rgb.dtype == grey.dtype == torch.uint8 and rgb.shape == (3, 10, 12) and grey.shape == (1, 10, 12)
    # libjpeg-turbo and Pillow convert CMYK and round YCbCr alike to within a few levels
    assert np.abs(rgb.permute(1, 2, 0).numpy().astype(np.int16) - want).max() <= 3


def test_sixteen_bit_png_keeps_its_high_byte(tmp_path):
    f = tmp_path / "deep.png"
    Image.fromarray(RGB[..., 0].astype(np.uint16) * 257).save(f)   # 0..255 spread over 0..65535
    for channels in (1, 3):
        image = decode(f, channels)
        assert not isinstance(image, str) and image.dtype == torch.uint8
        assert (image[0].numpy() == RGB[..., 0]).all()


def test_corrupt_truncated_and_empty_files_give_a_reason(tmp_path):
    Image.fromarray(RGB).save(tmp_path / "whole.jpg")
    data = (tmp_path / "whole.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.png").write_bytes(b"")
    corrupt(tmp_path / "junk.jpg")
    for name in ("cut.jpg", "empty.png", "junk.jpg"):
        why = decode(tmp_path / name, 3)
        assert isinstance(why, str) and why, name
    assert isinstance(decode(tmp_path / "missing.jpg", 3), str)


def test_batched_jpeg_decode_matches_one_by_one_and_keeps_the_bad_ones_apart(tmp_path):
    """decode_jpegs is what the GPU path runs (device="cuda"); on the CPU device it must agree."""
    files = write_folder(tmp_path, classes=1, per_class=3) + [corrupt(tmp_path / "bad.jpg")]
    Image.fromarray(RGB).save(tmp_path / "p.png")
    files.append(tmp_path / "p.png")
    out = decode_jpegs([read_bytes(f) for f in files], 3, "cpu")
    for f, image in zip(files, out, strict=True):
        alone = decode_bytes(read_bytes(f), 3)
        assert isinstance(image, str) == isinstance(alone, str), f
        if not isinstance(image, str):
            assert torch.equal(image, alone)
    assert isinstance(out[3], str)


def test_a_folder_is_indexed_not_read(tmp_path):
    write_folder(tmp_path / "d" / "train", per_class=4)
    write_folder(tmp_path / "d" / "test", per_class=2, seed=1)
    (tmp_path / "d" / "train" / "notes.txt").write_text("not a class")
    index = index_folder(tmp_path / "d")
    assert index.classes == ["c0", "c1", "c2"] and len(index) == 18
    assert index.files.dtype.kind == "S"      # one bytes array, not 18 Python strings
    assert index.own_splits() == {"test"} and index.path(0).endswith("c0/00000.jpg")


def test_a_csv_of_paths_and_labels(tmp_path):
    files = write_folder(tmp_path / "img", classes=2, per_class=3)
    rows = "\n".join(f"{f.relative_to(tmp_path)},{'cat' if 'c0' in str(f) else 'dog'}" for f in files)
    (tmp_path / "labels.csv").write_text("path,label\n" + rows + "\n")
    index = index_csv(tmp_path / "labels.csv")
    assert index.classes == ["cat", "dog"] and index.labels.tolist() == [0, 0, 0, 1, 1, 1]
    (tmp_path / "bad.csv").write_text("path,label\nimg/c0/00000.jpg,cat\nimg/nope.jpg,dog\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 3: no such image file 'img/nope.jpg'"):
        index_csv(tmp_path / "bad.csv")


def _setup(tmp_path, folder: str, **images):
    spec = write_spec(tmp_path, tiny_cnn(channels=3, size=8, classes=3),
                      data={"dataset": folder, "workers": 0, "images": images}, train={"batch_size": 4})
    return setup(load_spec(spec))


def test_empty_class_folder_single_class_and_shared_files_are_refused_before_the_run(tmp_path):
    write_folder(tmp_path / "d", per_class=6)
    (tmp_path / "d" / "c3").mkdir()
    with pytest.raises(SpecError, match=r"class folder 'c3' holds no image"):
        _setup(tmp_path, "d")
    write_folder(tmp_path / "one", classes=1, per_class=6)
    with pytest.raises(SpecError, match=r"a single class \('c0'\)"):
        _setup(tmp_path, "one")
    write_folder(tmp_path / "s" / "train", per_class=6)
    write_folder(tmp_path / "s" / "test", per_class=2, seed=7)
    copy = tmp_path / "s" / "test" / "c1" / "copy.jpg"
    copy.write_bytes((tmp_path / "s" / "train" / "c1" / "00004.jpg").read_bytes())
    with pytest.raises(SpecError, match=r"1 file\(s\) in more than one split: .*00004.jpg \((train|val)\) = .*copy.jpg \(test\)"):
        _setup(tmp_path, "s")
    assert len(_setup(tmp_path, "s", duplicates="ignore").splits.test) == 7


def test_setup_splits_files_at_the_graphs_size_and_channels(tmp_path):
    write_folder(tmp_path / "d", per_class=10)
    st = _setup(tmp_path, "d")
    s = st.splits
    assert st.streamed and s.on_disk and s.sample_shape == (3, 8, 8)
    assert (len(s.train), len(s.val), len(s.test)) == (21, 3, 6)
    assert torch.allclose(s.mean, torch.tensor([0.485, 0.456, 0.406]) * 255)
    assert s.test.samples(4).shape == (4, 3, 8, 8)
    memory = _setup(tmp_path, "d", source="memory")
    assert not memory.splits.on_disk and len(memory.splits.train) == 21


def test_the_loader_skips_counts_and_keeps_its_batch_shape(tmp_path):
    files = write_folder(tmp_path / "d", per_class=8)
    st = _setup(tmp_path, "d")
    bad = st.splits.val.path(1)
    corrupt(next(f for f in files if str(f) == bad))
    loaders = file_loaders(st.spec, st.splits, st.device, channels_last=False)
    heard = []
    loaders["val"].on_skip = heard.append
    val = loaders["val"]
    for _ in range(2):     # two epochs: the file is reported once
        batches = list(val.batches(val.order()))
        assert [x.shape for x, _, _ in batches] == [(4, 3, 8, 8)]
        assert [valid for _, _, valid in batches] == [len(st.splits.val) - 1]
    assert len(heard) == 1 and [path for path, _ in heard[0]] == [bad] and heard[0][0][1].startswith("not")
    train = loaders["train"]
    x, y, _ = next(train.batches(train.order()))
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and abs(float(x.mean())) < 3


def test_transforms_follow_the_spec():
    image = torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8)
    for aug in ("none", "trivialaugment", "randaugment"):
        out = train_transform(ImageSpec(auto_augment=aug), (16, 16))(image)
        assert out.shape == (3, 16, 16) and out.dtype == torch.uint8
    ev = eval_transform(ImageSpec(), (16, 16))
    assert torch.equal(ev(image), ev(image))
    assert torch.equal(train_transform(ImageSpec(crop_scale=[], hflip=0.0), (16, 16))(image), ev(image))
    assert batch_mix(ImageSpec(), 3) is None
    mix = batch_mix(ImageSpec(mixup_alpha=0.4, cutmix_alpha=1.0), 3)
    assert mix is not None
    x, y = mix(torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 0]))
    assert y.shape == (4, 3) and torch.allclose(y.sum(1), torch.ones(4))


@pytest.mark.process
def test_the_image_modules_import_torchvision_only_to_decode_or_transform():
    """A run on data held in memory never imports torchvision: the worker imports the image modules, and they
    import torchvision when they decode or transform."""
    code = ("import sys, trainer.worker, trainer.data.images.loader, trainer.data.images.preview\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchvision'))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           check=True, cwd=Path(__file__).resolve().parents[4])   # this checkout's trainer
    assert shown.stdout.strip() == "[]", shown.stdout   # test_transforms_follow_the_spec makes each pipeline


def test_spec_migrates_and_checks_the_images_section():
    old = spec_from_dict({"schema_version": 1, "data": {"dataset": "d"}})
    assert old.data.images.source == "memory"            # a version 1 run keeps reading into memory
    assert spec_from_dict({"data": {"dataset": "d"}}).data.images.source == "auto"
    with pytest.raises(SpecError) as err:
        spec_from_dict({"data": {"images": {"source": "cloud", "crop_scale": [0.9, 0.1], "hflip": 2.0,
                                            "auto_augment": "autoaugment", "mean": [0.5, 0.5], "size": [0, 8]}}})
    fields = [p.split(":")[0] for p in err.value.problems]
    assert fields == ["data.images.source", "data.images.auto_augment", "data.images.size", "data.images.crop_scale",
                      "data.images.hflip", "data.images.mean/std"]


def test_a_mixed_batch_trains_and_counts_on_its_dominant_class():
    """MixUp/CutMix labels are class probabilities: the step's loss takes them, the window counts a
    prediction right on the dominant class."""
    from trainer.loop import Window, make_train_step

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    step, _ = make_train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), device=torch.device("cpu"),
                              precision="fp32", label_smoothing=0.1)
    y = torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.2, 0.8]])
    loss, pred = step(torch.randn(2, 4), y)
    window = Window()
    window.record(loss, pred, y)
    losses, correct = window.read(0)
    assert np.isfinite(losses[0]) and correct[0] == float((pred == torch.tensor([0, 2])).sum())


def test_each_rank_reads_only_its_rows_of_the_global_batch(tmp_path):
    """Under torchrun, rank r of W takes rows r*b/W..(r+1)*b/W of each global train batch, and its share
    of each evaluation step: together the ranks see exactly one process's batches."""
    write_folder(tmp_path / "d", per_class=8)
    st = _setup(tmp_path, "d")
    one = file_loaders(st.spec, st.splits, st.device, channels_last=False)
    ranks = [file_loaders(st.spec, st.splits, st.device, channels_last=False, rank=r, world=2) for r in (0, 1)]
    for name in ("train", "test"):
        order = one[name].order()
        for i in range(one[name].steps):
            whole, valid = one[name].rows(order, i)
            parts = [loaders[name].rows(order, i) for loaders in ranks]
            assert [len(rows) for rows, _ in parts] == [2, 2]
            assert parts[0][0] + parts[1][0] == whole
            assert sum(v for _, v in parts) == valid
