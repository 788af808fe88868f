"""The format registry, output paths and reports: cheap, no exporting."""

from __future__ import annotations

import json

import pytest

from exporters import (
    Check,
    ExportReport,
    Format,
    FormatUnavailable,
    compare_outputs,
    export_format,
    format_names,
    from_graph,
    get_format,
    output_path,
)
from tests.exporters.export_graphs import tiny_ln_graph


def test_every_format_is_registered_once():
    assert set(format_names()) == {"onnx", "pt2", "pte", "safetensors", "python", "tensorboard"}

    class Again(Format):
        name = "onnx"

    with pytest.raises(ValueError, match="already registered"):
        export_format(Again)
    assert type(get_format("onnx")).__name__ == "OnnxFormat"


def test_a_missing_package_says_how_to_install_it():
    class NeedsNothingThere(Format):
        name, title = "nothing", "Nothing"
        requires = ("no_such_package_for_torch_studio",)
        install_hint = "Install it with: pip install no-such-package"

    form = NeedsNothingThere()
    assert "needs no_such_package_for_torch_studio" in form.missing()
    with pytest.raises(FormatUnavailable, match="pip install no-such-package"):
        form.ensure_available()


def test_output_paths(tmp_path):
    source = from_graph(tiny_ln_graph())
    onnx, tb = get_format("onnx"), get_format("tensorboard")
    assert output_path(onnx, source, tmp_path) == tmp_path / "tiny_ln.onnx"
    assert output_path(onnx, source, tmp_path / "new") == tmp_path / "new" / "tiny_ln.onnx"
    assert output_path(onnx, source, tmp_path / "m.onnx") == tmp_path / "m.onnx"
    assert output_path(tb, source, tmp_path / "logs") == tmp_path / "logs"


def test_comparison_follows_torch_testing_tolerances():
    import torch

    e = torch.tensor([[1.0, 2.0], [3.0, -4.0]])
    assert compare_outputs(e, e + 1e-6, 1e-3, 1e-5).allclose
    near = compare_outputs(e, e * (1 + 5e-4), 1e-3, 1e-5)
    assert near.allclose and near.top1_agreement == 1.0
    far = compare_outputs(e, e * (1 + 2e-3), 1e-3, 1e-5)
    assert not far.allclose and far.mismatched == 4
    swapped = compare_outputs(e, e.flip(1), 1e-3, 1e-5)
    assert swapped.top1_agreement == 0.0
    assert not compare_outputs(e, torch.full_like(e, float("nan")), 1e-3, 1e-5).check("x", 1e-3, 1e-5).passed


def test_float32_error_at_the_output_scale_passes_and_stays_strict_for_ordinary_logits():
    """A logit near 0 among logits of 1.4e8 (untrained inception_v3) may differ by tens of float32 ulps
    of 1.4e8; among logits of 5 the same rule allows 5e-5 near 0 and no more."""
    import numpy as np

    big = np.array([[1.4e8, 8797.0, -3.0e7], [2.0, 1.0, 0.5]])
    assert compare_outputs(big, big + [[0.0, 80.0, 0.0], [0.0, 0.0, 0.0]], 1e-3, 1e-5).allclose
    off = compare_outputs(big, big + [[0.0, 1e4, 0.0], [0.0, 0.0, 0.0]], 1e-3, 1e-5)  # 7e-5 of the largest
    assert not off.allclose and off.mismatched == 1
    assert not compare_outputs(big, big + [[0.0, 80.0, 0.0], [0.0, 80.0, 0.0]], 1e-3, 1e-5).allclose  # per sample
    small = np.array([[5.0, 1e-3]])
    assert compare_outputs(small, small + [[0.0, 5e-5]], 1e-3, 1e-5).allclose
    strict = compare_outputs(small, small + [[0.0, 1e-4]], 1e-3, 1e-5)
    assert not strict.allclose and "1e-05 of the sample's largest" in strict.check("x", 1e-3, 1e-5).detail
    assert not compare_outputs(small, small + [[0.0, 5e-5]], 1e-3, 1e-5, scale_rtol=0.0).allclose


def test_report_files(tmp_path):
    report = ExportReport("onnx", str(tmp_path / "m.onnx"), "graph 'g'", checks=[Check("a", True, "fine"),
                                                                                  Check("b", False, "broken")],
                          metrics={"max_abs_diff": 0.5, "file_bytes": 2048, "onnxruntime_ms": 1.25})
    json_path, text_path = report.save(tmp_path / "m.onnx")
    data = json.loads(json_path.read_text())
    assert data["ok"] is False and data["checks"][1]["detail"] == "broken"
    text = text_path.read_text()
    assert text.startswith("onnx export FAILED") and "[FAIL] b: broken" in text and "1.250 ms" in text


@pytest.mark.process
def test_formats_describe_themselves_without_importing_torch():
    """Menus, the toolbar and the CLI's help read the format files; what they read is what the classes say."""
    import subprocess
    import sys

    from exporters.registry import describe_formats

    code = ("import sys; from exporters.registry import describe_formats, format_help; "
            "print(len(describe_formats()), 'torch' in sys.modules, format_help())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == [str(len(format_names())), "False"]
    infos = describe_formats()
    assert [i.name for i in infos] == format_names()
    for info in infos:
        cls = type(get_format(info.name))
        for attr in ("title", "menu_text", "tip", "suffix", "needs_run", "shortcut", "toolbar", "order"):
            assert getattr(info, attr) == getattr(cls, attr), (info.name, attr)
    assert [i.name for i in infos if i.toolbar] == ["onnx"] and get_format("onnx").shortcut == "Ctrl+E"


def test_a_format_must_describe_itself(tmp_path, monkeypatch):
    from exporters import registry

    class Quiet(Format):
        name, title, menu_text = "quiet", "Quiet", "&Quiet"

    with pytest.raises(ValueError, match="'quiet' .*sets no tip"):
        export_format(Quiet)

    class SameKey(Format):
        name, title, menu_text, tip, shortcut = "same", "Same", "&Same", "a tip", "Ctrl+E"

    with pytest.raises(ValueError, match="shortcut Ctrl\\+E is taken by 'onnx'"):
        export_format(SameKey)
    assert "quiet" not in format_names() and "same" not in format_names()
    (tmp_path / "computed_format.py").write_text(
        "@export_format\nclass Computed(Format):\n    name = 'computed'\n    title = 'Computed'\n"
        "    menu_text = '&Computed'\n    tip = 'x'.upper()\n")
    monkeypatch.setattr(registry, "FORMATS_DIR", tmp_path)
    with pytest.raises(ValueError, match="computed_format.py: Computed.tip must be a plain literal"):
        registry.describe_formats()
