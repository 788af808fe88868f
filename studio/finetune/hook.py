"""The Graph menu's fine-tuning commands: Freeze / Unfreeze, Learning-Rate Multiplier, Replace Head."""

from __future__ import annotations

from graph_editor.model.finetune import head_node, plan_of

from ..actions import ActionSpec
from ..port import StudioPort

MENU = "&Graph"


class FinetuneHook:
    """The Graph menu's fine-tuning commands of one window."""

    def __init__(self, port: StudioPort) -> None:
        self.port = port
        port.add_action(ActionSpec("freeze", "&Freeze / Unfreeze Selection", MENU, "Ctrl+Shift+F", "", False,
                                   "Stop the selected layers or blocks training (their BatchNorm kept in eval mode), "
                                   "or let them train again", separator=True), self.toggle_frozen)
        port.add_action(ActionSpec("lr_scale", "Learning-Rate &Multiplier…", MENU, None, "", False,
                                   "Let the selected layers or blocks learn at a multiple of the schedule's rate "
                                   "(e.g. x0.1 for a pretrained backbone)"), self.ask_lr_scale)
        port.add_action(ActionSpec("replace_head", "Replace &Head…", MENU, "Ctrl+Shift+H", "", False,
                                   "Set the classifier to another number of classes; it starts from a fresh "
                                   "initialisation"), self.ask_head)

    def _said(self, reason: str | None) -> None:
        if reason:
            self.port.status(reason)

    def toggle_frozen(self) -> None:
        edits, sel = self.port.training_edits, self.port.selection()
        self._said(edits.freeze(sel, not edits.is_frozen(sel)))

    def ask_lr_scale(self) -> None:
        edits, sel = self.port.training_edits, self.port.selection()
        blocks = edits.blocks_of(sel)
        if not blocks:
            self._said("select a layer or a block to scale its learning rate")
            return
        graph = self.port.graph
        current = plan_of(graph).lr_scale.get(blocks[0], 1.0)
        names = ", ".join(graph.groups[b].name if b in graph.groups else graph.nodes[b].title for b in blocks)
        factor = self.port.prompts.number(self.port.owner, "Learning-rate multiplier",
                                          f"Multiple of the learning rate for {names} (1: the rate itself):",
                                          current, 0.0, 100.0, 4)
        if factor is not None:
            self._said(edits.set_lr_scale(blocks, factor))

    def ask_head(self) -> None:
        graph = self.port.graph
        head = head_node(graph)
        if head is None:
            self._said("no classifier head found: a Linear layer that feeds the Output")
            return
        classes = self.port.prompts.number(self.port.owner, "Replace head",
                                           f"Classes of the new head ({head}, re-initialised):",
                                           graph.num_classes, 2, 1_000_000, 0)
        if classes is not None:
            self._said(self.port.training_edits.replace_head(int(classes)))
            self.port.select([head])

