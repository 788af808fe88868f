"""Image datasets that stay on disk: indexed (:mod:`.index`), decoded per batch in DataLoader workers
(:mod:`.decode`, :mod:`.loader`), augmented with ``torchvision.transforms.v2`` (:mod:`.transforms`),
checked before a run (:mod:`.report`) and split for a run (:mod:`.prepare`).

Nothing is imported here: the format registry reads image CSVs through :mod:`.index` (NumPy only),
and must not pull torch in with it.
"""
