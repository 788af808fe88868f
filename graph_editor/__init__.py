"""The graph language of Torch Studio.

``graph_editor.model`` is the pure-Python model (no torch, no Qt); ``graph_editor.build``
turns a graph into a ``torch.fx.GraphModule`` and analyses it; ``graph_editor.ui`` holds
the Qt canvas.
"""
