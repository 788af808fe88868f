"""The graph language of Torch Studio.

``graph_editor.model`` is the pure-Python model (no torch, no Qt). The torch side:
``graph_editor.building`` turns a graph into a ``torch.fx.GraphModule`` (each layer family's
PyTorch side in ``building.ops``), ``graph_editor.analysis`` measures it on the ``meta`` device,
``graph_editor.autograd`` captures one training step's backward graph and ``graph_editor.importer``
turns an existing ``nn.Module`` into a graph. ``graph_editor.ui`` holds the Qt canvas.
"""
