"""An export of a run that read its images from disk carries that run's preprocessing."""

from __future__ import annotations

import torch

from exporters.run_data import run_data
from graph_editor.model import Graph, InputSpec, save_graph
from tests.trainer.image_files import write_folder
from trainer.data.images.decode import decode


def test_a_disk_runs_export_data_are_its_eval_images_and_its_loaders_statistics(tmp_path):
    write_folder(tmp_path / "imgs", classes=3, per_class=10)
    g = Graph(InputSpec((3, 16, 16)), 3, {"name": "t"})
    g.chain(("Input", "input"), ("Conv2d", "c", {"out_channels": 4, "kernel_size": 3}), ("Flatten", "f"),
            ("Linear", "head", {"out_features": 3}), ("Output", "output"))
    save_graph(g, tmp_path / "g.graph.json")
    spec = {"schema_version": 2, "model": {"graph": str(tmp_path / "g.graph.json")},
            "data": {"dataset": str(tmp_path / "imgs")}, "device": "cpu", "train": {"batch_size": 4}}
    d = run_data(spec, g, 8)
    assert "decoded, resized and centre-cropped" in d.note
    # the loader's statistics: data.images.mean/std (ImageNet's by default) on the 0..255 pixel scale
    assert [round(v, 3) for v in d.preprocessing.mean] == [123.675, 116.28, 103.53]
    assert d.samples.shape[1:] == (3, 16, 16) and d.samples.max() > 1.0      # raw pixels, not standardised
    assert d.preprocessing.classes == ["c0", "c1", "c2"] and len(d.labels) == len(d.samples)
    # each sample is a file of the folder as the eval transform gives it (the images are 12x14)
    first = decode(next((tmp_path / "imgs").rglob("*.jpg")), 3)
    assert isinstance(first, torch.Tensor) and first.shape[0] == 3
