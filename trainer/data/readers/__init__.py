"""The built-in dataset formats, one module each; importing this package registers them.

The import order is the order the Train dialog lists them and ``auto`` asks them (the image folder,
which takes any folder of folders, is asked last).
"""

from . import npz, image_csv, table, image_folder, idx, cifar, hf  # noqa: F401, I001  (order matters: see above)
