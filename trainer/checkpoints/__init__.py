"""Checkpoints of one process: one safetensors file per save, and what the sharded layout shares."""
