"""Runs under torchrun: the launcher, one rank, each rank's data, sharded checkpoints and the
launch scripts."""
