"""The editor controller's intents on blocks (groups): make, open, close, rename, ungroup.

Mixed into :class:`~graph_editor.ui.controller.EditorController`, whose plumbing (``_push``,
``_compound``, ``_refuse``) turns each into one undo step. Opening and closing in place
moves what is around the block (:func:`graph_editor.model.block_layout.make_room`), so
closing what was opened puts every node back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..model import GroupNodes, MoveNodes, RenameGroup, SetGroupCollapsed, Ungroup
from ..model.block_layout import make_room, nested_layout
from ..model.commands import Command
from ..model.hierarchy import ancestors, parents, visible

if TYPE_CHECKING:
    from ..model import Graph

Apply = Callable[[Command], Command]


class BlockEdits:
    """Block intents; each returns None when applied, else the reason it was refused."""

    _graph: Graph
    last_group: str | None
    size_hint: Callable[[], dict[str, tuple[float, float]]] | None
    _push: Callable[[Callable[[], Command]], str | None]
    _compound: Callable[..., str | None]
    _refuse: Callable[[str], str]
    expand_ids: Callable[[Iterable[str]], list[str]]

    def group(self, name: str, ids: Iterable[str]) -> str | None:
        """Collapse nodes into a named block; the new group id is in ``last_group``."""
        holder: list[GroupNodes] = []

        def make() -> Command:
            holder.append(GroupNodes(self._graph, name, self.expand_ids(ids)))
            return holder[0]

        reason = self._push(make)
        if reason is None:
            self.last_group = holder[0].group.id
        return reason

    def ungroup(self, group_id: str) -> str | None:
        return self._push(lambda: Ungroup(self._graph, group_id))

    def set_collapsed(self, group_id: str, collapsed: bool) -> str | None:
        """Open a block in place (what follows it moves aside to make room) or close it
        again (what moved aside comes back): one undo step. Opening a block inside closed
        ones opens them first, outermost first: room made for a block that is not drawn was
        made in the wrong place (MobileNetV2's blocks opened innermost first overlapped 71 pairs)."""
        group = self._graph.groups.get(group_id)
        if group is None:
            return self._refuse(f"there is no group '{group_id}'")
        if group.collapsed == collapsed or not group.nodes:
            return self._push(lambda: SetGroupCollapsed(self._graph, group_id, collapsed))
        sizes = self.size_hint() if self.size_hint is not None else None
        closed_above = [k for k in ancestors(self._graph.groups, group_id) if self._graph.groups[k].collapsed]

        def steps(apply: Apply) -> None:
            for k in ([*reversed(closed_above), group_id] if not collapsed else [group_id]):
                self._toggle_in_place(apply, k, collapsed, sizes)

        return self._compound(f"{'Close' if collapsed else 'Open'} {group.name}", steps, view_only=True)

    def _toggle_in_place(self, apply: Apply, group_id: str, collapsed: bool,
                         sizes: dict[str, tuple[float, float]] | None) -> None:
        positions = make_room(self._graph, group_id, expand=not collapsed, sizes=sizes)
        moved = {k: v for k, v in positions.items() if tuple(self._graph.nodes[k].position) != v}
        apply(SetGroupCollapsed(self._graph, group_id, collapsed))
        if moved:
            apply(MoveNodes(self._graph, moved))

    def set_all_collapsed(self, collapsed: bool) -> str | None:
        """Close every open block in place (innermost first), or open them all and lay the
        graph out block by block: one undo step."""
        graph = self._graph
        todo = [k for k, g in graph.groups.items() if g.collapsed != collapsed]
        if not todo:
            return self._refuse("every block is already " + ("closed" if collapsed else "open"))
        sizes = self.size_hint() if self.size_hint is not None else None

        def steps(apply: Apply) -> None:
            if collapsed:
                while frames := visible(graph.groups).frames:
                    up = parents(graph.groups)
                    inner = [k for k in frames if not any(up[o] == k for o in frames)]
                    self._toggle_in_place(apply, inner[0], True, sizes)
            for k in [k for k, g in graph.groups.items() if g.collapsed != collapsed]:  # hidden ones: no room
                apply(SetGroupCollapsed(graph, k, collapsed))
            if not collapsed:
                x0, y0 = (min(n.position[0] for n in graph), min(n.position[1] for n in graph))
                positions = nested_layout(graph, sizes, origin=(x0, y0))
                moved = {k: v for k, v in positions.items() if tuple(graph.nodes[k].position) != v}
                if moved:
                    apply(MoveNodes(graph, moved))

        return self._compound("Close all blocks" if collapsed else "Open all blocks", steps, view_only=True)


    def rename_group(self, group_id: str, name: str) -> str | None:
        return self._push(lambda: RenameGroup(self._graph, group_id, name))
