"""JPEGs decoded in the training process on its device (nvJPEG on CUDA), from bytes the loader's workers read.

The DataLoader workers never decode and never touch CUDA: each returns its batch's files as one flat
uint8 tensor and their lengths (:func:`pack`), one shared-memory segment over the worker's pipe where a
list of 64 tensors took 64. :class:`DeviceDecode` splits it back into the files' bytes (views, no copy)
and decodes them together (:func:`~.decode.decode_jpegs`), then runs the train or eval transform on each.

On CUDA the decode runs on a stream of its own. torchvision's nvJPEG decoder writes its outputs from a
private stream that is not ordered against the caller's, into blocks PyTorch's caching allocator hands out
as soon as the caller's stream has freed them -- while kernels queued there may still read them (the
previous step's batch): pytorch/vision#9606, and nvJPEG's hardware engine (A100, H100, H200) writes
before the work queued on its own stream has run. Allocated from the side stream's pool, the outputs can
only reuse blocks that stream freed, and each output is marked used by the training stream
(``record_stream``), so a block comes back to the decoder only once the training stream has finished
with it: no host barrier, no corruption. The ``decode`` function is injectable: tests run this same path
on the CPU with a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .decode import decode_jpegs
from .transforms import Transform

Decode = Callable[[list[torch.Tensor], int, torch.device], list["torch.Tensor | str"]]
Bad = list[tuple[int, str, str]]      # (position in the batch, path, why)


def pack(files: Sequence[bytes]) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch's encoded files as one flat uint8 tensor and an int64 tensor of their lengths."""
    lengths = torch.tensor([len(f) for f in files], dtype=torch.int64)
    joined = b"".join(files)
    flat = torch.frombuffer(bytearray(joined), dtype=torch.uint8) if joined else torch.empty(0, dtype=torch.uint8)
    return flat, lengths


def unpack(flat: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
    """The files' bytes again: contiguous 1-D views of ``flat`` (empty for an unreadable file)."""
    return list(torch.split(flat, lengths.tolist()))


class DeviceDecode:
    """Decodes a packed batch on ``device`` and transforms each image there (uint8 in, uint8 out)."""

    def __init__(self, transform: Transform, channels: int, size: tuple[int, int], device: torch.device,
                 decode: Decode = decode_jpegs) -> None:
        self.transform, self.channels, self.size, self.device, self.decode = transform, channels, size, device, decode
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def __call__(self, packed: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor, bad: Bad,
                 path: Callable[[int], str]) -> tuple[torch.Tensor, torch.Tensor, Bad]:
        """The batch's good images stacked, their labels, and ``bad`` with the files that did not decode
        (``path`` names the file at a position)."""
        failed = {pos for pos, _, _ in bad}         # unreadable: their bytes are empty
        decoded = self._decode(unpack(*packed))
        images, keep = [], []
        for pos, image in enumerate(decoded):
            if pos in failed:
                continue
            if isinstance(image, str):
                bad.append((pos, path(pos), image))
                continue
            images.append(self.transform(image))
            keep.append(pos)
        stacked = torch.stack(images) if images else torch.zeros(0, self.channels, *self.size, dtype=torch.uint8,
                                                                 device=self.device)
        return stacked, y[keep], sorted(bad)

    def _decode(self, encoded: list[torch.Tensor]) -> list[torch.Tensor | str]:
        if self.stream is None:
            return self.decode(encoded, self.channels, self.device)
        with torch.cuda.stream(self.stream):
            out = self.decode(encoded, self.channels, self.device)
        training = torch.cuda.current_stream(self.device)
        training.wait_stream(self.stream)      # queued on the device: the host does not wait
        for image in out:
            if isinstance(image, torch.Tensor):
                image.record_stream(training)
        return out
