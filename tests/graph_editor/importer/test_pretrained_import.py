"""An imported model's pretrained weights: from a file or from the local caches torchvision (torch hub)
and timm (Hugging Face hub) fill, never downloaded; here the caches are folders the test writes. The
import's weights, keyed by node ids, make the built graph compute what the module computes with them."""

from __future__ import annotations

import textwrap

import pytest
import torch

from graph_editor.building import build_module
from graph_editor.importer.factory import import_factory, load_factory
from graph_editor.importer.module_import import ModuleImportError
from graph_editor.importer.pretrained import cached_weights

NETS = """
import torch
from torch import nn

def tinynet():
    torch.manual_seed(1)      # the factory's own (random) weights: not the pretrained ones
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 5))
"""


@pytest.fixture
def nets(tmp_path, monkeypatch):
    (tmp_path / "pretrained_nets.py").write_text(textwrap.dedent(NETS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    torch.manual_seed(7)
    pretrained = load_factory("pretrained_nets:tinynet")
    for p in pretrained.parameters():
        p.data.normal_()
    pretrained.state_dict()["1.running_mean"].normal_()
    return tmp_path, pretrained


def _same_outputs(result, pretrained) -> None:
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    built.eval(), pretrained.eval()
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(built(x), pretrained(x))


def test_weights_in_torch_hub_s_cache_are_imported_keyed_by_node_ids(nets):
    root, pretrained = nets
    hub = root / "torch" / "hub" / "checkpoints"
    hub.mkdir(parents=True)
    torch.save(pretrained.state_dict(), hub / "tinynet-5c0ffee1.pth")      # torchvision's naming
    torch.save({}, hub / "tinynet_v2-00000000.pth")
    assert [p.name for p in cached_weights("tinynet")] == ["tinynet-5c0ffee1.pth", "tinynet_v2-00000000.pth"]
    result = import_factory("pretrained_nets:tinynet", (3, 16, 16), weights="cache")
    assert result.weights_from == str(hub / "tinynet-5c0ffee1.pth")
    _same_outputs(result, pretrained)
    plain = import_factory("pretrained_nets:tinynet", (3, 16, 16))
    assert plain.weights_from == "" and not torch.equal(plain.state_dict[next(iter(plain.state_dict))],
                                                        result.state_dict[next(iter(result.state_dict))])


def test_timm_s_hugging_face_snapshot_and_a_plain_file_are_read_without_running_anything(nets):
    from safetensors.torch import save_file

    root, pretrained = nets
    snap = root / "hf" / "models--timm--tinynet.a1_in1k" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    wrapped = {f"module.{k}": v.clone() for k, v in pretrained.state_dict().items()}   # a DataParallel save
    save_file(wrapped, str(snap / "model.safetensors"))
    (root / "hf" / "models--timm--tinynetd").mkdir()                   # another model, not this one
    assert cached_weights("tinynet") == [snap / "model.safetensors"]
    _same_outputs(import_factory("pretrained_nets:tinynet", (3, 16, 16), weights="cache"), pretrained)
    torch.save({"state_dict": pretrained.state_dict(), "epoch": 3}, root / "ckpt.pt")
    _same_outputs(import_factory("pretrained_nets:tinynet", (3, 16, 16), weights=str(root / "ckpt.pt")), pretrained)


def test_missing_or_unfitting_weights_are_named(nets):
    root, _ = nets
    with pytest.raises(ModuleImportError, match=r"no cached weights of tinynet: looked in .*checkpoints .*nothing "
                                                r"is downloaded"):
        import_factory("pretrained_nets:tinynet", (3, 16, 16), weights="cache")
    torch.save({"encoder.weight": torch.zeros(3)}, root / "other.pth")
    with pytest.raises(ModuleImportError, match="no tensor of .*other.pth fits tinynet"):
        import_factory("pretrained_nets:tinynet", (3, 16, 16), weights=str(root / "other.pth"))
    (root / "evil.pth").write_bytes(b"not a pickle of tensors")
    with pytest.raises(ModuleImportError, match="cannot read weights .*evil.pth"):
        import_factory("pretrained_nets:tinynet", (3, 16, 16), weights=str(root / "evil.pth"))
