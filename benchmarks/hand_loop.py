"""A user's own training script, run as its own process by ``train_throughput.py``: plain PyTorch with
PyTorch's defaults (threads, OpenMP waiting), nothing of the trainer imported.

    python benchmarks/hand_loop.py GRAPH DATA WEIGHTS --epochs N --batch-size B --lr LR --weight-decay WD

A careful engineer's loop: the data held as tensors (``DATA``: the worker's own train and val splits,
normalised, saved by the benchmark), batches by index gather, channels_last for a convnet, AdamW with
no decay on biases and norm scales (fused, as the worker's), ``OneCycleLR``, the loss summed on the
device and read once per epoch, and a val pass per epoch (loss and accuracy, one sync). The model is
the graph built by ``graph_editor`` (the same modules the worker trains) from ``WEIGHTS``, the worker's
initial weights. Prints one JSON line: the seconds of the epochs (training and val, imports and data
loading left out), the CPU seconds they took (user + system, every thread) and the last val accuracy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from graph_editor.building import build_module
from graph_editor.model import load_graph


def train_epoch(model, opt, sched, x: torch.Tensor, y: torch.Tensor, batch: int) -> float:
    model.train()
    perm = torch.randperm(len(y))
    loss_sum = torch.zeros(())
    steps = len(y) // batch                      # the ragged last batch dropped
    for i in range(steps):
        idx = perm[i * batch:(i + 1) * batch]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        loss_sum += loss.detach()
    return float(loss_sum) / steps               # one sync per epoch


@torch.no_grad()
def validate(model, x: torch.Tensor, y: torch.Tensor, batch: int) -> float:
    model.eval()
    correct = torch.zeros((), dtype=torch.long)
    for i in range(0, len(y), batch):
        correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum()
    return int(correct) / len(y)                 # one sync per val pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("weights", type=Path)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--weight-decay", type=float, required=True)
    args = parser.parse_args()
    data = torch.load(args.data, weights_only=True)
    model = build_module(load_graph(args.graph), device="cpu")
    model.load_state_dict(torch.load(args.weights, weights_only=True))
    xt, xv = data["train_x"], data["val_x"]
    if xt.dim() == 4:                            # a convnet on images: channels_last, as the worker
        model = model.to(memory_format=torch.channels_last)
        xt, xv = (t.contiguous(memory_format=torch.channels_last) for t in (xt, xv))
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=args.lr, fused=True)
    steps = len(data["train_y"]) // args.batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps * args.epochs)
    t0, cpu0 = time.perf_counter(), time.process_time()
    accuracy = 0.0
    for _ in range(args.epochs):
        train_epoch(model, opt, sched, xt, data["train_y"], args.batch_size)
        accuracy = validate(model, xv, data["val_y"], args.batch_size)
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - cpu0,
                      "val_accuracy": accuracy,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
