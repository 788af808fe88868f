"""Exporters: ONNX, torch.export, ExecuTorch, safetensors, PyTorch source, TensorBoard."""
