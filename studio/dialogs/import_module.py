"""Import module: ask for ``module:factory``, the per-sample input shape and the class count."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from .. import format as fmt
from ..prompts import ImportRequest
from ..widgets import named

FROM_FILE = "from a file"
WEIGHTS = {"as the factory makes them": "", "from the local caches (torch hub, Hugging Face)": "cache",
           FROM_FILE: "file"}


class ImportModuleDialog(QDialog):
    """The three fields and Strict; OK stays refused (with the reason) until they make sense."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import nn.Module")
        self.target = QLineEdit(placeholderText="mypackage.models:make_net")
        self.target.setToolTip("A module importable from the current folder and a function in it that "
                               "returns an nn.Module (called with no arguments).")
        self.shape = QLineEdit(placeholderText="e.g. 3, 32, 32 (empty: guess from the first layer)")
        self.classes = QSpinBox()
        self.classes.setRange(0, 1_000_000)
        self.classes.setSpecialValueText("from the output")
        self.weights = named(QComboBox(), "weights")
        self.weights.addItems(list(WEIGHTS))
        self.weights.setToolTip("Pretrained weights loaded into the module before it is imported (nothing is "
                                "downloaded): the graph's runs then start from them (model.init_from)")
        self.weights_file = named(QLineEdit(placeholderText="a .safetensors, .pth or .pt weights file"), "weightsFile")
        self.weights_file.setEnabled(False)
        self.weights.currentIndexChanged.connect(
            lambda _i: self.weights_file.setEnabled(self.weights.currentText() == FROM_FILE))
        self.strict = named(QCheckBox("Strict: fail on any op without a layer"), "strict")
        self.strict.setToolTip("Off: a submodule whose ops have no Torch Studio layer is kept whole as one "
                               "Program node (its torch.export program and its weights). On: the import fails "
                               "and lists those ops.")
        self.error = named(QLabel(), "fieldError")
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        about = named(QLabel("The module is traced with torch.fx. A submodule whose ops have no Torch Studio "
                             "layer is kept whole as a Program node (captured with torch.export, drawn dashed), "
                             "unless Strict is on."), "about")
        about.setWordWrap(True)
        form.addRow(about)
        form.addRow("Module:factory", self.target)
        form.addRow("Input shape", self.shape)
        form.addRow("Classes", self.classes)
        form.addRow("Weights", self.weights)
        form.addRow("", self.weights_file)
        form.addRow("", self.strict)
        form.addRow(self.error)
        form.addRow(buttons)
        self.resize(520, self.sizeHint().height())

    def request(self) -> ImportRequest | str:
        """The request, or the reason the fields are not usable yet."""
        target = self.target.text().strip()
        module, sep, factory = target.partition(":")
        if not (module and sep and factory):
            return "enter MODULE:FACTORY, e.g. torchvision.models:resnet18"
        shape: tuple[int, ...] = ()
        if self.shape.text().strip():
            try:
                shape = fmt.parse_shape(self.shape.text())
            except ValueError as exc:
                return str(exc)
        weights = WEIGHTS[self.weights.currentText()]
        if weights == "file":
            weights = self.weights_file.text().strip()
            if not weights:
                return "give the weights file, or choose other weights"
        return ImportRequest(target, shape, self.classes.value(), self.strict.isChecked(), weights)

    def accept(self) -> None:
        result = self.request()
        if isinstance(result, str):
            self.error.setText(result)
            self.error.show()
            return
        super().accept()


def ask_import(parent: QWidget) -> ImportRequest | None:
    """Show the dialog modally; the request, or None when cancelled."""
    dialog = ImportModuleDialog(parent)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return None
    result = dialog.request()
    return result if isinstance(result, ImportRequest) else None


if __name__ == "__main__":
    from studio.preview import preview

    raise SystemExit(preview(ImportModuleDialog, "Import nn.Module", (520, 240)))
