"""timm families that the catalog layers of issue 23 made import strictly (catalog layers only, no Program
node), each with the walk's checks: parameters exact, FLOPs equal to FlopCounterMode's, outputs within 1e-5
of their largest value after the round trip. ``make test`` walks one; ``make test-thorough`` all of them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.trainer.helpers import THOROUGH

pytest.importorskip("timm")

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("import_walk", ROOT / "tools" / "import_walk.py")
assert _spec and _spec.loader
walk = sys.modules.get("import_walk") or importlib.util.module_from_spec(_spec)
if "import_walk" not in sys.modules:
    sys.modules[_spec.name] = walk  # its dataclasses look their module up while being defined
    _spec.loader.exec_module(walk)

# family -> the model walked, and the layers it needed (each a Program node before them)
NEWLY_STRICT = {
    "pit_ti_224": "a slice bound read from a tensor's size",
    "shvit_s1": "MatMul",
    "poolformer_s12": "Subtract, AvgPool2d count_include_pad=False",
    "mobileone_s0": "AddConstant (sum() of branches)",
    "fastvit_t8": "AddConstant, Subtract",
    "ghostnetv2_100": "Interpolate",
    "efficientformer_l1": "RelativePositionBias, MatMul, Subtract, count_include_pad",
    "cait_xxs24_224": "MatMul, qkv[0], qkv[1], qkv[2] as an Unbind",
    "swiftformer_xs": "Normalize, MatMul by a parameter",
    # the exported program's ATen ops mapped (graph_editor.importer.aten): fx cannot trace them, or one of
    # their ops as written does not map
    "nest_tiny": "fx: int(math.sqrt(T)) on a size",
    "cpubone_nano": "fx: if pad_h or pad_w on sizes; aten.upsample_nearest2d as Interpolate",
    "vitamin_small_224": "LayerNormAct2d's F.layer_norm between permutes",
    "twins_svt_small": "the exported program's ops",
    "efficientvit_b0": "fx: v.device.type != 'meta'; autocast region inlined; Divide",
    # session 4: windows folded into the batch (Reshape fold_batch), constants (Constant), Roll, MaskedAttention,
    # norms without bias
    "davit_tiny": "Reshape fold_batch (window_partition / window_reverse)",
    "swin_tiny_patch4_window7_224": "fold_batch, Roll, Constant (the shifted windows' mask), the bias gather",
    "poolformerv2_s12": "LayerNorm / GroupNorm without bias, x ** 2 as x * x",
    "mobilevit_xxs": "Reshape fold_batch (patches folded into the batch)",
    "hiera_tiny_224": "Reshape fold_batch (Unroll: the spatial strides folded into the batch)",
    "maxvit_pico_rw_256": "MaskedAttention (SDPA with the relative-position bias as attn_mask), fold_batch",
    "tiny_vit_5m_224": "MaskedAttention with the gathered bias (the fold reads it as a mask), fold_batch",
    "sequencer2d_s": "fold_batch (rows and columns into the batch for its LSTMs): 5.8 s of CPU, was 44.8 s",
    # session 5: norms, convolutions and pools timm writes by hand (tests/graph_editor/importer/test_import_timm_layers.py)
    "convnext_zepto_rms": "RMSNorm2d (timm's SimpleNorm2d, divide_by='std')",
    "nf_regnet_b0": "StdConv2d scaled (ScaledStdConv2d: weights standardised in forward, a learned gain)",
    "vit_tiny_r_s16_p8_224": "StdConv2d (StdConv2dSame's ops in the exported program; its 'SAME' pad a Pad)",
    "tresnet_m": "BlurPool2d (a fixed binomial filter, depthwise)",
    "crossvit_tiny_240": "torch.stack(xs, 0).mean(0) folded to the sum of the parts over their number",
    "sam2_hiera_tiny": "Tile (window_embed.tile((th, tw)))",
    "naflexvit_base_patch16_siglip": "Interpolate antialias (its position embedding resized to the patch grid)",
    "nextvit_small": "AvgPool1d (its attention's token reduction)",
    "pnasnet5large": "MaxPool2d same (MaxPool2dSame's -inf padding), Pad cropping (ZeroPad2d((-1, 1, -1, 1)))",
    "nasnetalarge": "MaxPool2d same, Pad cropping",
    "qwen3_vit_88m": "LayerNorm without weights in the exported program; the rotary attention's empty q[:, :, :0] left out",
    "mobilenetv5_base": "RMSNorm2d (RmsNormAct2d's ops in the exported program), SDPA with one head of keys and values",
    "vgg11": "nothing new: strict on session 4's main already (the walk table's row was older)",
    # session 5: weights computed from parameters in forward (the Computed node), picks of one as an unbind,
    # a stack summed over its parts, a sample repeated to its windows
    "swinv2_tiny_window8_256": "Computed (logit scale, qkv bias, the position MLP's bias), linear + computed bias",
    "swinv2_cr_tiny_224": "Computed (logit_scale.reshape(...).clamp().exp(), the position MLP's bias)",
    "beitv2_base_patch16_224": "Computed (cat((q_bias, zeros, v_bias)); the bias table with its cls rows)",
    "vit_tiny_patch16_dinov3_qkvb": "Computed (the qkv bias)",
    "vit_srelpos_small_patch16_224": "Computed (a bias from an MLP over a fixed table)",
    "efficientvit_m0": "Computed (the gathered bias) read per head as an Unbind's parts",
    "levit_128s": "Computed (the downsampling attention's bias: queries a strided subset of the keys)",
    "efficientformerv2_s0": "Computed (the downsampling attention's bias)",
    "tnt_s_legacy_patch16_224": "the exported program's ops, with the Computed fold",
    "efficientvim_m1": "Computed (sigmoid(alpha).view(4, -1, 1, 1) read as alpha[i]), stack(logits).sum(0)",
    "gcvit_xxtiny": "repeat_interleave to the windows as Unsqueeze, Expand, fold_batch",
    # session 6: attention written by hand, tables written in place (test_import_attention_forms.py,
    # test_import_written_tables.py)
    "convit_tiny": "a table written in place folded with its writes; sigmoid(g) and 1 - sigmoid(g) one Computed",
    "mvitv2_tiny": "einsum as MatMul with a Computed table; the attention map written whole read as the value",
    "volo_d1_224": "Fold (F.fold), x.max(1)[0] as an Amax",
    "samvit_base_patch16_224": "reshape(3, B * heads, ...).unbind(0) as parts each reshaped; einsum as MatMul",
}
DEFAULT = "pit_ti_224"  # the cheapest: ~5 s of CPU on a quiet machine


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n == DEFAULT else [   # the default: in make test, not test-fast
        pytest.mark.slow, pytest.mark.skipif(not THOROUGH, reason="make test-thorough: 10-75 s a model")])
    for n in NEWLY_STRICT])
def test_a_timm_family_imports_strictly(name):
    outcome = walk.walk_one(walk.timm_case(name), onnx=False, strict=True)
    assert outcome.ok, outcome.cause
    assert outcome.programs == 0
