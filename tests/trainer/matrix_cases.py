"""The cases of the training matrix (tests/trainer/test_training_matrix*.py): every template family
x {one process, DDP, FSDP2} x {fp32, bf16} x {channels_last on, off} x {compile off, default}, and a
pairwise-covering subset of them for ``make test`` (every pair but three: :data:`THOROUGH_ONLY`).

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

    def cost(self) -> float:
        """A rough guess at a case's seconds on 2 quiet cores: starting the processes, compiling (most, and
        growing with the graph), bf16 convolutions (slow on CPUs without bf16 instructions)."""
        conv = self.template not in ("mlp", "vit_tiny")
        seconds = 10.0 if self.strategy == "none" else 25.0
        if self.compile != "off":
            seconds += COMPILE_SECONDS[self.template] * (1.5 if self.strategy != "none" else 1.0)
            seconds += 60.0 if conv and self.precision == "bf16" else 0.0
        return seconds + (10.0 if conv and self.precision == "bf16" else 0.0)


COMPILE_SECONDS = {"mlp": 15.0, "digits_cnn": 30.0, "resnet18_cifar": 90.0, "mobilenet_v2": 150.0, "vit_tiny": 90.0}
# Compiling the three large graphs cold takes minutes each on 2 CPU cores (mobilenet_v2 in bf16 did
# not finish in 15 minutes on the shared machine): `make test` compiles the MLP and the plain convnet
# under every strategy, precision and layout, and leaves these three pairs to `make test-thorough`.
THOROUGH_ONLY = frozenset(((0, t), (4, "default")) for t in ("resnet18_cifar", "mobilenet_v2", "vit_tiny"))


def every_case() -> list[Case]:
    return [Case(*c) for c in itertools.product(FAMILIES, STRATEGIES, PRECISIONS, CHANNELS_LAST, COMPILE)]


def pairs(case: Case) -> set[tuple[tuple[int, object], tuple[int, object]]]:
    """The (factor, level) pairs a case covers."""
    return set(itertools.combinations(enumerate(case), 2))


def pairwise_cases() -> list[Case]:
    """A cheap set of cases in which every level of every factor meets every level of every other
    factor at least once (all pairs), chosen greedily: each step the case with the most pairs not yet
    covered per second it costs (:meth:`Case.cost`). Deterministic."""
    every = [c for c in every_case() if not pairs(c) & THOROUGH_ONLY]
    wanted = set().union(*(pairs(c) for c in every))
    chosen: list[Case] = []
    while wanted:
        best = max(every, key=lambda c: (len(pairs(c) & wanted) / c.cost(), -every.index(c)))
        chosen.append(best)
        wanted -= pairs(best)
    return chosen
