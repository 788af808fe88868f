"""The dataset view's reading of an image folder: every class counted from the index, only the shown
samples decoded, a bad shown file listed with its reason, the run's own augmentation on a real sample."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.image_files import corrupt, write_folder
from trainer.data.images.index import index_images
from trainer.data.images.preview import augmented_views, check_files, preview_images
from trainer.spec import ImageSpec


def test_counts_every_class_but_decodes_only_what_it_shows(tmp_path):
    files = write_folder(tmp_path, classes=3, per_class=30, size=(20, 24))
    view = preview_images(tmp_path, 3, (16, 16), per_class=4, max_classes=2)
    assert view.counts == {"c0": 30, "c1": 30, "c2": 30} and view.size == 90
    assert view.read == 8                       # 4 of each of the two classes shown, not 90
    assert list(view.samples) == ["c0", "c1"]
    assert all(img.shape == (3, 16, 16) and img.dtype == np.uint8 for s in view.samples.values() for _, img in s)
    assert all(name.startswith("c0/") for name, _ in view.samples["c0"])
    assert view.bad == [] and view.problems == [] and view.splits == {}
    assert len(files) == 90


def test_a_shown_file_that_does_not_decode_is_listed_with_its_reason(tmp_path):
    files = write_folder(tmp_path, classes=2, per_class=3)
    corrupt(files[0])
    (tmp_path / "empty_class").mkdir()
    view = preview_images(tmp_path, 1, (8, 8), per_class=3)
    assert [name for name, _ in view.bad] == ["c0/00000.jpg"]
    assert view.bad[0][1]                       # the decoder's reason, one line
    assert len(view.samples["c0"]) == 2 and view.samples["c0"][0][1].shape == (1, 8, 8)
    assert any("'empty_class' holds no image" in p for p in view.problems)
    assert check_files(index_images(tmp_path), 3) == view.bad
    assert check_files(index_images(tmp_path), 3, stop=lambda: True) == []


def test_split_folders_are_counted_per_split(tmp_path):
    write_folder(tmp_path / "train", classes=2, per_class=5)
    write_folder(tmp_path / "val", classes=2, per_class=2)
    view = preview_images(tmp_path, 3, (8, 8))
    assert view.splits == {"train": 10, "val": 4} and view.counts == {"c0": 5, "c1": 5}


def test_augmented_views_are_the_run_s_train_transform(tmp_path):
    files = write_folder(tmp_path, classes=2, per_class=1, size=(40, 40))
    im = ImageSpec(crop_scale=[0.2, 1.0], hflip=0.5, auto_augment="trivialaugment")
    views = augmented_views(files[0], 3, (24, 24), im, n=5, seed=1)
    assert len(views) == 5 and all(v.shape == (3, 24, 24) for v in views)
    assert len({v.tobytes() for v in views}) > 1                   # random draws differ
    again = augmented_views(files[0], 3, (24, 24), im, n=5, seed=1)
    assert all((a == b).all() for a, b in zip(views, again, strict=True))   # the seed repeats them
    with pytest.raises(ValueError, match="00000.jpg"):
        augmented_views(corrupt(files[1]), 3, (24, 24), im)
