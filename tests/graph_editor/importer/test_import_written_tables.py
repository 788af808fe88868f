"""A table written in place before it is read, and two values of one learned tensor (issue 23, ConViT).

timm's GPSA builds its relative indices in forward (``torch.zeros`` then ``rel[:, :, :, 2] = indd``, three
``copy_`` writes, under an ``if`` on a size, so the import goes through torch.export), and gates its two
attention maps by ``sigmoid(g)`` and ``1 - sigmoid(g)`` of one ``g = gating_param.view(1, -1, 1, 1)``. The table
folds with its writes into a Constant node (the module's own buffer left as it was), the gate into one Computed
node holding ``gating_param``; the graph is the module. A write after a read is never folded."""

from __future__ import annotations

import pytest
import torch
from timm.models.convit import GPSA
from torch import nn

from graph_editor.building import build_module
from graph_editor.importer import ModuleImportError, import_module


class Gated(nn.Module):
    """timm's own GPSA over 4x4 tokens, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = GPSA(16, num_heads=4)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 16 tokens, 16]
        return self.head(self.attn(x).mean(1))


@pytest.mark.slow  # ~0.8 s of CPU (torch.export's capture)
def test_a_table_written_in_place_folds_and_a_shared_gate_is_one_computed_node():
    torch.manual_seed(0)
    module = Gated().eval()
    with torch.no_grad():
        module.attn.gating_param.uniform_(-2, 2)  # heads gated apart: the gate's two uses differ
    before = module.attn.rel_indices.clone()
    result = import_module(module, (16, 16), strict=True)
    types = [n.type for n in result.graph]
    assert "Program" not in types
    assert torch.equal(module.attn.rel_indices, before)  # the import wrote nothing into the module
    computed = [n for n in result.graph if n.type == "Computed"]
    assert len(computed) == 1
    assert [k for k in result.state_dict if k.startswith(f"{computed[0].id}.")] == [f"{computed[0].id}.gating_param"]
    constants = [n for n in result.graph if n.type == "Constant"]
    assert [n.params.get("shape") for n in constants] == [[16, 16, 3]]
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, 16, 16)
    with torch.no_grad():
        want = module(x)
        torch.testing.assert_close(built(x), want, rtol=1e-5, atol=1e-6)


class WriteAfterRead(nn.Module):
    """A fixed table read, then written, then read again: folding it whole would give both reads the last value."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != 4:  # on a size, as GPSA's: fx cannot follow it, torch.export captures the writes
            raise ValueError("4 features")
        t = self.table.clone()
        y = x + t
        t[0] = 1.0
        return y * t


@pytest.mark.slow  # ~0.6 s of CPU
def test_a_write_after_a_read_is_not_folded():
    with pytest.raises(ModuleImportError, match="no Torch Studio layer"):
        import_module(WriteAfterRead(), (4,), strict=True)
