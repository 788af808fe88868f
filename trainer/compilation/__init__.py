"""torch.compile around a run: the persistent cache, dynamo's log and the compile check."""
