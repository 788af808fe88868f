"""Each layer family's PyTorch side, mirroring :mod:`graph_editor.model.layers`.

``ops/<family>.py`` registers, per layer type and next to each other: the builder (the module's
constructor call, from which the source writer follows), the FLOP rule, the ``torch.fx`` import
rules and an example input the per-type tests run it on. Adding a layer type is one entry in
``model/layers/<family>.py`` and one here; every registry refuses a second entry for a key.
Importing this package registers every family.
"""

from . import (  # noqa: F401
    activation,
    attention,
    computed,
    conv,
    core,
    matmul,
    merge,
    module_ref,
    norm,
    param,
    pooling,
    position,
    program,
    recurrent,
    reduce,
    reshape,
    resize,
    split,
)
