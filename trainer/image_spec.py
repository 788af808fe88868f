"""The ``data.images`` section of the run spec: how image folders and image CSVs are read from disk and
augmented (:mod:`trainer.data.images`), and its checks. Its own module, beside :mod:`trainer.spec`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

IMAGE_SOURCES = ("auto", "disk", "memory")
AUTO_AUGMENTS = ("none", "trivialaugment", "randaugment")
DUPLICATES = ("refuse", "ignore")

Choice = Callable[[list[str], str, str, tuple[str, ...], str], None]


@dataclass
class ImageSpec:
    """Image folders and image CSVs read from disk: decoded per batch in DataLoader workers and
    augmented there with torchvision.transforms.v2 (:mod:`trainer.data.images`)."""

    source: str = "auto"      # auto/disk: indexed, decoded per batch; memory: read whole (data.image_size)
    size: list[int] = field(default_factory=list)  # [H, W] the network sees; default: the graph's input
    resize: int = 0           # eval: shorter side to this, then a centre crop of size; 0: size / 0.875
    crop_scale: list[float] = field(default_factory=lambda: [0.25, 1.0])  # train RandomResizedCrop area; []: eval's
    crop_ratio: list[float] = field(default_factory=lambda: [0.75, 1.3333])   # its aspect ratios
    hflip: float = 0.5        # probability of a horizontal flip
    vflip: float = 0.0        # probability of a vertical flip
    auto_augment: str = "none"    # none, trivialaugment (TrivialAugmentWide), randaugment
    randaugment_ops: int = 2
    randaugment_magnitude: int = 9
    mixup_alpha: float = 0.0  # MixUp on each train batch (0: off)
    cutmix_alpha: float = 0.0  # CutMix on each train batch (0: off); with MixUp, one of the two per batch
    mean: list[float] = field(default_factory=lambda: [0.485, 0.456, 0.406])  # in [0, 1]; ImageNet's (pretrained nets)
    std: list[float] = field(default_factory=lambda: [0.229, 0.224, 0.225])
    gpu_decode: bool = True   # on CUDA, JPEGs decoded on the GPU (nvJPEG)
    duplicates: str = "refuse"    # the same file in two splits: refuse the run, or ignore



def check_images(im: ImageSpec, problems: list[str], choice: Choice, show: Callable[[Any], str],
                 max_side: int) -> None:
    """The ``data.images`` section's own checks (``choice`` and ``show`` are the spec's own helpers)."""
    w = "data.images"
    choice(problems, f"{w}.source", im.source, IMAGE_SOURCES, "image source")
    choice(problems, f"{w}.auto_augment", im.auto_augment, AUTO_AUGMENTS, "augmentation")
    choice(problems, f"{w}.duplicates", im.duplicates, DUPLICATES, "choice")
    if im.size and (len(im.size) != 2 or any(int(v) != v or not 1 <= v <= max_side for v in im.size)):
        problems.append(f"{w}.size: must be [height, width] in pixels, each 1 to {max_side}, got {show(im.size)}")
    if not 0 <= im.resize <= max_side:
        problems.append(f"{w}.resize: must be 0 (size / 0.875) or 1 to {max_side} pixels, got {im.resize}")
    for name, pair, lo, hi in (("crop_scale", im.crop_scale, 1e-3, 1.0), ("crop_ratio", im.crop_ratio, 0.05, 20.0)):
        if (pair or name == "crop_ratio") and (len(pair) != 2 or not lo <= pair[0] <= pair[1] <= hi):
            problems.append(f"{w}.{name}: must be [low, high] with {lo} <= low <= high <= {hi}"
                            f"{', or [] for no random crop' if name == 'crop_scale' else ''}, got {show(pair)}")
    for name, p in (("hflip", im.hflip), ("vflip", im.vflip)):
        if not 0.0 <= p <= 1.0:
            problems.append(f"{w}.{name}: a probability, between 0 and 1, got {p}")
    if not 1 <= im.randaugment_ops <= 16 or not 0 <= im.randaugment_magnitude <= 30:
        problems.append(f"{w}.randaugment_ops/randaugment_magnitude: 1 to 16 operations of magnitude 0 to 30, got "
                        f"{im.randaugment_ops} and {im.randaugment_magnitude}")
    for name, a in (("mixup_alpha", im.mixup_alpha), ("cutmix_alpha", im.cutmix_alpha)):
        if not 0.0 <= a <= 10.0:
            problems.append(f"{w}.{name}: must be between 0 (off) and 10, got {a}")
    if len(im.mean) not in (1, 3) or len(im.std) != len(im.mean) or any(s <= 0 for s in im.std):
        problems.append(f"{w}.mean/std: one value per channel (1 or 3), std positive, got {show(im.mean)} and "
                        f"{show(im.std)}")
