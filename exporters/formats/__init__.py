"""The export formats; importing this package registers each of them."""

from . import onnx_format, pt2_format, pte_format, python_format, safetensors_format, tensorboard_format  # noqa: F401
