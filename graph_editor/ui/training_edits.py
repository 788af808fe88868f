"""The editor controller's intents for training on the design: freeze or unfreeze blocks, scale a block's
learning rate, replace the classifier head, mark a parameter as a sweep variable, repeat a block.

Mixed into :class:`~graph_editor.ui.controller.EditorController` as :class:`~.block_edits.BlockEdits`
is; each intent is one undo step, or returns the reason it was refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..model.commands import Command
from ..model.finetune import members, plan_of, replace_head, set_frozen, set_lr_scale
from ..model.repeat import SetRepeat
from ..model.sweep_vars import SetSweepVariable

if TYPE_CHECKING:
    from ..model import Graph


class TrainingEdits:
    """Fine-tuning and sweep intents; each returns None when applied, else the reason it was refused."""

    _graph: Graph
    _push: Callable[[Callable[[], Command]], str | None]

    def blocks_of(self, ids: Iterable[str]) -> list[str]:
        """The selection as block entries: group ids and node ids of layers (Input/Output left out)."""
        return [i for i in ids if i in self._graph.groups or (
            i in self._graph.nodes and self._graph.nodes[i].type not in ("Input", "Output"))]

    def is_frozen(self, ids: Iterable[str]) -> bool:
        """Whether every node of ``ids`` is frozen (by its own entry or its block's)."""
        marks = plan_of(self._graph).node_marks(self._graph)
        nodes = [n for b in self.blocks_of(ids) for n in members(self._graph, b)]
        return bool(nodes) and all(marks.get(n, {}).get("frozen") for n in nodes)

    def freeze(self, ids: Iterable[str], frozen: bool = True) -> str | None:
        blocks = self.blocks_of(ids)
        if not blocks:
            return "select a layer or a block to freeze"
        return self._push(lambda: set_frozen(self._graph, blocks, frozen))

    def set_lr_scale(self, ids: Iterable[str], factor: float) -> str | None:
        blocks = self.blocks_of(ids)
        if not blocks:
            return "select a layer or a block to scale its learning rate"
        return self._push(lambda: set_lr_scale(self._graph, blocks, factor))

    def replace_head(self, classes: int) -> str | None:
        return self._push(lambda: replace_head(self._graph, classes))

    def set_sweep(self, node_id: str, param: str, rng: str | None) -> str | None:
        """Mark ``node_id.param`` (or a block's ``repeat``: ``node_id`` a group id) as swept over ``rng``."""
        return self._push(lambda: SetSweepVariable(self._graph, node_id, param, rng))

    def set_repeat(self, group_id: str, count: int) -> str | None:
        """Repeat block ``group_id`` ``count`` times (built as that many copies in a chain)."""
        return self._push(lambda: SetRepeat(self._graph, group_id, count))
