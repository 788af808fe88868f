"""What a run measures and reports: the recorder, per-class figures, the confusion matrix's
samples, utilisation and skipped files."""
