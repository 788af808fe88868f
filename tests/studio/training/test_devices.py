"""Device list parsing (nvidia-smi's CSV), and the CPU always offered."""

from __future__ import annotations

from studio.training.devices import available_devices, parse_nvidia_smi


def test_parse_nvidia_smi_skips_noise():
    text = "0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA A10, 23028\nNVIDIA-SMI has failed\n"
    devs = parse_nvidia_smi(text)
    assert [d.spec for d in devs] == ["cuda:0", "cuda:1"]
    assert devs[0].label == "NVIDIA H100 80GB HBM3 (cuda:0, 80 GiB)"


def test_cpu_is_always_last_choice():
    devs = available_devices()
    assert devs[-1].spec == "cpu"
