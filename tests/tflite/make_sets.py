"""Small seeded data sets of the shapes of the models in models/ that do
not take MNIST, as .npy directories (docs/data-format.md): accuracy is not
what they are for, the integers are.

    make_sets.py DIR

DIR/ic:  32x32 RGB images (uint8, [N, 3, 32, 32]), 10 classes
DIR/kws: 49x10 features (float32, [N, 1, 49, 10]), 12 classes
DIR/ad:  640 features (float32, [N, 640]), no labels (an autoencoder)
DIR/vww: 96x96 RGB images (uint8, [N, 3, 96, 96]), 2 classes
"""
import os
import sys

import numpy as np


def save(d, split, x, y=None):
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, f"{split}_x.npy"), x)
    if y is not None:
        np.save(os.path.join(d, f"{split}_y.npy"), y)


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(2026)
    for split, n in (("train", 512), ("test", 256)):
        # a class is a brighter quadrant pattern: something to learn, with noise
        y = rng.integers(0, 10, n).astype(np.int64)
        x = rng.integers(0, 160, (n, 3, 32, 32)).astype(np.int32)
        for i in range(n):
            x[i, y[i] % 3, (y[i] // 3) * 8:(y[i] // 3) * 8 + 8, :] += 90
        save(f"{root}/ic", split, np.clip(x, 0, 255).astype(np.uint8), y)
        y = rng.integers(0, 12, n).astype(np.int64)
        x = rng.normal(0, 1, (n, 1, 49, 10)).astype(np.float32)
        x[np.arange(n), 0, y * 4, :] += 3.0
        save(f"{root}/kws", split, x, y)
        x = rng.normal(0, 1, (n, 640)).astype(np.float32)
        save(f"{root}/ad", split, x)
        y = rng.integers(0, 2, n).astype(np.int64)
        x = rng.integers(0, 200, (n, 3, 96, 96)).astype(np.int32)
        x[y == 1, :, 24:72, 32:64] += 55  # a bright block: the "person"
        save(f"{root}/vww", split, np.clip(x, 0, 255).astype(np.uint8), y)


if __name__ == "__main__":
    main()
