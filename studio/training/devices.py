"""The devices a run can use, found without initialising CUDA in the GUI process.

The studio process must never touch CUDA (a CUDA context costs hundreds of MB and seconds, and
a fork after it is unsafe), so GPUs are listed by asking ``nvidia-smi`` in a short child process.
The CPU is always there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One choice for the run spec's ``device`` field, with a label for the device list."""

    spec: str        # "cpu" or "cuda:N"
    name: str
    memory_mib: int | None = None

    @property
    def label(self) -> str:
        if self.memory_mib is None:
            return f"{self.name} ({self.spec})"
        return f"{self.name} ({self.spec}, {self.memory_mib / 1024:.0f} GiB)"


def cpu_device() -> Device:
    return Device("cpu", f"CPU, {os.cpu_count() or 1} cores")


def parse_nvidia_smi(text: str) -> list[Device]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits``.

    Lines that do not parse are skipped: a driver message must not hide the CPU choice.
    """
    devices = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        try:
            mem = int(float(parts[2]))
        except ValueError:
            mem = None
        devices.append(Device(f"cuda:{parts[0]}", parts[1], mem))
    return devices


def find_gpus(timeout: float = 5.0) -> list[Device]:
    """The NVIDIA GPUs ``nvidia-smi`` reports; empty when it is absent, fails or hangs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(out.stdout) if out.returncode == 0 else []


def available_devices() -> list[Device]:
    """GPUs first (training prefers them), then the CPU."""
    return [*find_gpus(), cpu_device()]
