"""An existing ``nn.Module`` as a graph: fx tracing with the catalog's leaves (:mod:`.trace`), one catalog
node per traced call by the layer families' rules (:mod:`.rules`, :mod:`.convert`), ``torch.export``
capture of what the catalog cannot express (:mod:`.capture`, :mod:`.opaque`), grouped errors
(:mod:`.errors`), the loop (:mod:`.module_import`), ``MODULE:FACTORY`` specs (:mod:`.factory`) and
pretrained weights (:mod:`.pretrained`)."""

from .. import building  # noqa: F401  (the layer families register their import rules first)
from .module_import import ImportResult, ModuleImportError, Unsupported, guess_input_shape, import_module

__all__ = ["ImportResult", "ModuleImportError", "Unsupported", "guess_input_shape", "import_module"]
