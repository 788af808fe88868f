"""PyTorch modules for the catalog layers that ``torch.nn`` does not have as such.

These are plain ``nn.Module`` classes so that a built network, its ``state_dict`` and its
exported ``model.py`` all read like hand-written PyTorch.
"""

from __future__ import annotations

import torch
from torch import nn


class Add(nn.Module):
    """Element-wise sum of all inputs (residual connections)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class Multiply(nn.Module):
    """Element-wise product of all inputs (gating)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out


class Concat(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Reshape(nn.Module):
    """Reshape each sample; the batch dimension is kept."""

    def __init__(self, shape: list[int]) -> None:
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class Permute(nn.Module):
    """Reorder the per-sample dimensions (0 is the first after the batch)."""

    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, *(d + 1 for d in self.dims))

    def extra_repr(self) -> str:
        return f"dims={self.dims}"


class SelectToken(nn.Module):
    def __init__(self, index: int = 0) -> None:
        super().__init__()
        self.index = index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, self.index]

    def extra_repr(self) -> str:
        return f"index={self.index}"


class TabularEmbedding(nn.Module):
    """Embeds integer category codes; with ``columns``, embeds those columns of a tabular
    row and concatenates the vectors."""

    def __init__(self, num_embeddings: int, embedding_dim: int, columns: list[int] | None = None) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.columns = list(columns) if columns else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.columns is None:
            return self.embedding(x.long())
        codes = x[:, self.columns].long()
        return self.embedding(codes).flatten(1)


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` used as self-attention on a batch-first sequence."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=bias, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


class PatchEmbed(nn.Module):
    """Cuts an image into ``patch_size`` squares and projects each to an ``embed_dim`` token."""

    def __init__(self, in_channels: int, embed_dim: int, patch_size: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class ClassTokenPosEmbed(nn.Module):
    """Prepends a learned class token and adds learned position embeddings (ViT)."""

    def __init__(self, num_tokens: int, embed_dim: int, class_token: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        extra = 1 if class_token else 0
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        self.pos_embed = nn.Parameter(torch.empty(1, num_tokens + extra, embed_dim))
        self.dropout = nn.Dropout(dropout)
        if not self.pos_embed.is_meta:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.dropout(x + self.pos_embed)
