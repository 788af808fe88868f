"""Memory: the live samples, the prediction before a run, the OOM doctor, the recorded timeline,
and activation recomputation (the memory a run can trade for compute)."""
