"""What an export of a run knows of its data: the training split's standardisation, the class names,
and raw validation samples with their labels, read again as the run read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from graph_editor.model import Graph

from .errors import ExportError
from .preprocessing import Preprocessing


@dataclass
class RunData:
    """What an export of a run knows of its data: the preprocessing (training's standardisation and
    the class names), and raw validation samples with their labels for the proof."""

    preprocessing: Preprocessing
    samples: torch.Tensor
    labels: torch.Tensor
    note: str


def run_data(spec: dict[str, Any], graph: Graph, count: int) -> RunData:
    """The run's data read again as the run read it (same reader, fractions and seed): the training
    split's mean and std, the class names, and ``count`` raw samples of the validation split (test split
    if it has none). A dataset that cannot be read any more is an ExportError: without it the model's
    input standardisation is unknown, and an export without it scores like chance on real data."""
    from trainer.data import DataError, fit_to_input, load_raw, prepare
    from trainer.data.splits import Split
    from trainer.spec import SpecError, spec_from_dict

    try:
        rs = spec_from_dict(spec)
        d = rs.data
        disk = _disk_run_data(spec, graph, count)   # images the run read from disk: as its eval loader did
        if disk is not None:
            return disk
        raw = load_raw(d.dataset, d.format, Path(rs.base_dir) if rs.base_dir else None, target=d.target,
                       image_size=d.image_size or None)
        raw = fit_to_input(raw, tuple(graph.input_spec.shape))
        splits = prepare(raw, val_fraction=d.val_fraction, test_fraction=d.test_fraction, seed=rs.train.seed,
                         normalize=d.augment.normalize, keep_raw=True)
    except (SpecError, DataError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[-1].strip()
        raise ExportError(f"the run's dataset cannot be read ({first}): its input standardisation (the "
                          "training split's mean and std) is unknown without it") from None
    standardised = d.augment.normalize and graph.input_spec.dtype != "int64"
    prep = Preprocessing(list(splits.classes), list(graph.input_spec.shape),
                         [float(v) for v in splits.mean] if standardised else [],
                         [float(v) for v in splits.std] if standardised else [])
    split, which = (splits.val, "validation") if len(splits.val) else (splits.test, "test")
    assert isinstance(split, Split)     # prepare() of data in memory
    x = split.x[:count]
    x = x.long() if graph.input_spec.dtype == "int64" else x.float()
    note = f"verified on {len(x)} raw {which} samples of the run's dataset (as the file holds them)"
    return RunData(prep, x.contiguous(), split.y[:count].clone(), note)


def _disk_run_data(spec: dict[str, Any], graph: Graph, count: int) -> RunData | None:
    """For a run that read its images from disk (trainer.data.images): the statistics it standardised
    with (``data.images.mean``/``std`` on the 0..255 scale) and ``count`` validation images decoded,
    resized and centre-cropped as its evaluation saw them, uint8 pixels as float; None for other runs."""
    from trainer.checks import dataset_path, setup
    from trainer.data.images.decode import decode
    from trainer.data.images.files import FileSplit
    from trainer.data.images.prepare import disk_path
    from trainer.spec import spec_from_dict

    # only the data is needed: read it on the CPU whatever device, precision and strategy the run used
    rs = spec_from_dict({**spec, "device": "cpu", "distributed": {},
                         "precision": {**spec.get("precision", {}), "dtype": "fp32", "compile": "off"}})
    path = dataset_path(rs)     # asked first: setup() of data in memory would read it all, then run_data again
    if path is None or not disk_path(rs.data, path, tuple(graph.input_spec.shape), []):
        return None
    st = setup(rs)
    split, which = (st.splits.val, "validation") if len(st.splits.val) else (st.splits.test, "test")
    if not isinstance(split, FileSplit):
        return None
    xs, ys = [], []
    for i in range(len(split)):
        image = decode(split.path(i), split.channels)
        if not isinstance(image, str):
            xs.append(split.eval_transform(image))
            ys.append(int(split.y[i]))
        if len(xs) == count:
            break
    if not xs:
        raise ValueError(f"none of the {which} images decodes")
    standardised = rs.data.augment.normalize
    prep = Preprocessing(list(st.splits.classes), list(graph.input_spec.shape),
                         [float(v) for v in st.splits.mean] if standardised else [],
                         [float(v) for v in st.splits.std] if standardised else [])
    note = (f"verified on {len(xs)} {which} images of the run's folder, decoded, resized and centre-cropped "
            "as its evaluation read them")
    return RunData(prep, torch.stack(xs).float().contiguous(), torch.tensor(ys, dtype=torch.int64), note)
