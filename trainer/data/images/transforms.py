"""The per-image pipelines of :class:`~trainer.spec.ImageSpec` (``torchvision.transforms.v2``) and the
batch ones (MixUp, CutMix).

Train: RandomResizedCrop to ``size`` (or eval's resize and centre crop when ``crop_scale`` is empty),
flips, then TrivialAugmentWide or RandAugment. Eval: shorter side resized to ``resize`` (``size /
0.875``, the ImageNet convention, when 0), then a centre crop of ``size``. Both work on uint8 tensors
(C, H, W) and give uint8 (C, *size): the device turns a batch into floats and normalises it, a
quarter of the bytes over the worker's pipe and the host-to-device copy.

torchvision is imported when a pipeline is made, not with this module: a run on data held in memory never
needs it, and importing it (with the parts of ``torch._dynamo`` its models pull in) took a second of the
worker's start and 170 MiB of its memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ...spec import ImageSpec

if TYPE_CHECKING:
    from torchvision.transforms import v2

Transform = Callable[[torch.Tensor], torch.Tensor]


def eval_resize(im: ImageSpec, size: tuple[int, int]) -> int:
    return im.resize or round(min(size) / 0.875)


def eval_transform(im: ImageSpec, size: tuple[int, int]) -> Transform:
    """Resize the shorter side, then centre-crop ``size``: deterministic."""
    from torchvision.transforms import v2

    return v2.Compose([v2.Resize(eval_resize(im, size), antialias=True), v2.CenterCrop(list(size))])


def train_transform(im: ImageSpec, size: tuple[int, int]) -> Transform:
    from torchvision.transforms import v2

    steps: list[Transform] = []
    if im.crop_scale:
        steps.append(v2.RandomResizedCrop(list(size), scale=(im.crop_scale[0], im.crop_scale[1]),
                                          ratio=(im.crop_ratio[0], im.crop_ratio[1]), antialias=True))
    else:
        steps.append(eval_transform(im, size))
    if im.hflip > 0:
        steps.append(v2.RandomHorizontalFlip(im.hflip))
    if im.vflip > 0:
        steps.append(v2.RandomVerticalFlip(im.vflip))
    if im.auto_augment == "trivialaugment":
        steps.append(v2.TrivialAugmentWide())
    elif im.auto_augment == "randaugment":
        steps.append(v2.RandAugment(num_ops=im.randaugment_ops, magnitude=im.randaugment_magnitude))
    return v2.Compose(steps)


def batch_mix(im: ImageSpec, num_classes: int) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None:
    """MixUp and/or CutMix of a float batch (on the device), labels to class probabilities; None when off.

    With both on, each batch gets one of the two (``RandomChoice``), as timm and torchvision's
    reference recipes do."""
    from torchvision.transforms import v2

    mixes: list[v2.Transform] = []
    if im.mixup_alpha > 0:
        mixes.append(v2.MixUp(alpha=im.mixup_alpha, num_classes=num_classes))
    if im.cutmix_alpha > 0:
        mixes.append(v2.CutMix(alpha=im.cutmix_alpha, num_classes=num_classes))
    if not mixes:
        return None
    mix = mixes[0] if len(mixes) == 1 else v2.RandomChoice(mixes)

    def apply(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return mix(x, y)
    return apply
