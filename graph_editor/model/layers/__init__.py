"""The built-in layer types; importing this package registers them all in the catalog."""

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
