"""The cases of the training matrix (tests/trainer/test_training_matrix.py): every template family
x {one process, DDP, FSDP2} x {fp32, bf16} x {channels_last on, off} x {compile off, default}, and a
pairwise-covering subset of them for ``make test``.

A family is one shipped template standing for the templates that share its layers: the MLP; the plain
convnet (digits_cnn: LeNet-5 and VGG-11 are the same convolutions, pools and linears, larger); the
residual convnet (resnet18_cifar: ResNet-18 and -50 at 224x224); the inverted residual convnet
(mobilenet_v2: depthwise convolutions, ReLU6); the transformer (vit_tiny: patches, attention, LayerNorm).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

FAMILIES = ("mlp", "digits_cnn", "resnet18_cifar", "mobilenet_v2", "vit_tiny")
STRATEGIES = ("none", "ddp", "fsdp2")
PRECISIONS = ("fp32", "bf16")
CHANNELS_LAST = (True, False)
COMPILE = ("off", "default")


class Case(NamedTuple):
    template: str
    strategy: str
    precision: str
    channels_last: bool
    compile: str

    @property
    def id(self) -> str:
        cl = "cl" if self.channels_last else "nchw"
        return f"{self.template}-{self.strategy}-{self.precision}-{cl}-compile_{self.compile}"

    def cost(self) -> int:
        """A rough order of what a case costs here: compiling most, then the ranks, then bf16 convolutions
        (slow on CPUs without bf16 instructions), then the larger templates."""
        return (8 * (self.compile != "off") + 3 * (self.strategy != "none") + (self.precision == "bf16")
                + FAMILIES.index(self.template) // 2)


def every_case() -> list[Case]:
    return [Case(*c) for c in itertools.product(FAMILIES, STRATEGIES, PRECISIONS, CHANNELS_LAST, COMPILE)]


def pairs(case: Case) -> set[tuple[tuple[int, object], tuple[int, object]]]:
    """The (factor, level) pairs a case covers."""
    return set(itertools.combinations(enumerate(case), 2))


def pairwise_cases() -> list[Case]:
    """A small set of cases in which every level of every factor meets every level of every other
    factor at least once (all pairs), chosen greedily: each step the case that covers the most pairs not
    yet covered, the cheaper one on a tie. Deterministic."""
    every = every_case()
    wanted = set().union(*(pairs(c) for c in every))
    chosen: list[Case] = []
    while wanted:
        best = max(every, key=lambda c: (len(pairs(c) & wanted), -c.cost()))
        chosen.append(best)
        wanted -= pairs(best)
    return chosen
