"""The built-in layer types; importing this package registers them all in the catalog."""

from . import activation, attention, conv, core, merge, norm, param, pooling, reduce, reshape, split  # noqa: F401
