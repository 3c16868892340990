#!/usr/bin/env python3
"""Seeded synthetic data sets shaped like MLPerf Tiny's tasks, for training
and benchmarking qat on data other than MNIST (docs/data-format.md gives
the layouts written here).

  make-synthetic.py kws OUT [--train N] [--test N] [--seed S] [--squeeze]
  make-synthetic.py ad  OUT [--train N] [--test N] [--seed S] [--anomaly-share F]
  make-synthetic.py rgb OUT [--train N] [--test N] [--seed S] [--channels-last]

OUT ending in .h5 or .hdf5 is an HDF5 file (groups train and test, each
with x and y; the ad set's test group also has anomaly, and no y); any
other OUT is a directory of .npy files (train_x.npy, train_y.npy,
test_x.npy, test_y.npy, test_anomaly.npy). The same seed and sizes give
the same bytes; train and test come from different streams of the seed,
so --train does not change the test split.

kws: 12 classes of [1, 49, 10] float32 feature maps (49 time frames by 10
  cepstral-like coefficients; [49, 10] with --squeeze). A class is an
  arrangement of two or three "formant" tracks drawn from one shared pool
  of six track shapes (a rising, a falling, a flat, a high, a low and a
  sweeping track): several classes hold the same tracks in another order
  or timing, so what separates them is where the tracks sit relative to
  each other, not which values are present. Each sample places the word at
  a random time (anywhere in the 49 frames it fits), stretches it in time
  (x0.8 to x1.25), jitters every track in frequency (0.6 coefficient) and
  amplitude (x0.6 to x1.4), and adds class-independent distractors: one or
  two short blips and a steady hum at random coefficients, a random
  spectral tilt, noise that is smooth across time, and white noise as
  strong as a faint track (std 0.75, against track peaks of 1.0 to 3.1). A linear
  model on the raw values falls far short of a small CNN.
ad: 640 float32 features a sample (5 frames x 128 log-mel bins, frame-
  major), like MLPerf Tiny's anomaly detection input. Normal samples are a
  machine's harmonic spectrum from four latent values (fundamental, load,
  resonance, noise floor), slowly drifting over the 5 frames, in dB, plus
  measurement noise (std 1 dB): a 4-dimensional structure in 640
  dimensions. The train split is normal only and has no y (an
  autoencoder's target is its input); the test split has an anomaly array
  (0/1, --anomaly-share of it anomalous, default 0.5) and no y. Anomalies
  are of five kinds, each with a random severity, so some are plain and
  some barely off the structure: an extra tone between the harmonics, a
  fundamental outside the normal range, a changed balance of odd and even
  harmonics, broadband noise in some frames, and a fundamental that jumps
  between frames.
rgb: 10 classes of 32x32 RGB uint8 images, [N, 3, 32, 32] (channels first;
  [N, 32, 32, 3] with --channels-last, which qat reads with its own
  --channels-last): a disc, a square, a triangle, a plus, a ring, a
  diamond, a square of horizontal stripes, a square of vertical stripes, a
  checkerboard square and a square of dots, each in a random colour, at a
  random position and size (11 to 22 pixels across), over a background of
  a random colour gradient with pixel noise (std 20) and a faint blob;
  half the images also hold a small shape (5 to 9 pixels) of any class,
  which the label ignores. Every class is symmetric left to right, so
  --aug-flip keeps labels right.

Needs numpy, and h5py to write HDF5 (scripts/setup-python.sh bench has
both)."""
import argparse
import os
import sys

import numpy as np

T, F = 49, 10           # kws: frames x coefficients
AD_FRAMES, AD_BINS = 5, 128
IMG = 32


# ---- kws ------------------------------------------------------------------------------------
# The shared pool of track shapes: (frequency at the start, at the end) in
# coefficient units, duration in frames, peak amplitude (sign included:
# cepstral coefficients go both ways).
TRACKS = {
    "rise":  ((1.5, 6.5), 12, 2.0),
    "fall":  ((7.5, 2.0), 12, 2.0),
    "flat":  ((4.5, 4.5), 14, 1.6),
    "high":  ((8.0, 8.5), 8, -1.8),
    "low":   ((1.0, 0.5), 9, 2.2),
    "sweep": ((2.0, 8.0), 6, -1.6),
}
# A class: tracks and their onsets (frames after the word starts). Pairs of
# classes share tracks in another order (0/1, 2/3, 4/5, 8/9) or timing (6/7).
KWS_CLASSES = [
    [("rise", 0), ("fall", 12)],
    [("fall", 0), ("rise", 12)],
    [("flat", 0), ("high", 14)],
    [("high", 0), ("flat", 9)],
    [("low", 0), ("sweep", 10), ("high", 17)],
    [("high", 0), ("sweep", 9), ("low", 16)],
    [("rise", 0), ("low", 0)],
    [("rise", 0), ("low", 13)],
    [("sweep", 0), ("flat", 7), ("fall", 15)],
    [("fall", 0), ("flat", 6), ("sweep", 16)],
    [("flat", 0), ("low", 4), ("rise", 14)],
    [("high", 0), ("fall", 6), ("rise", 16)],
]
KWS_NOISE = 0.75


def kws_word_length(cls):
    return max(on + TRACKS[name][1] for name, on in cls)


def add_track(x, t_start, dur, f0, f1, amp, width):
    """Adds a Gaussian ridge along f(t) = f0 -> f1 over [t_start, t_start +
    dur) (frames; vectors over the samples) to x [n, T, F], with a smooth
    raised-cosine envelope in time."""
    t = np.arange(T, dtype=np.float64)[None, :]                      # [1, T]
    u = (t - t_start[:, None]) / dur[:, None]                        # [n, T], 0..1 inside
    inside = (u >= 0) & (u < 1)
    env = np.where(inside, np.sin(np.pi * np.clip(u, 0, 1)) ** 0.7, 0.0)
    fc = f0[:, None] + (f1 - f0)[:, None] * np.clip(u, 0, 1)          # [n, T]
    f = np.arange(F, dtype=np.float64)[None, None, :]                # [1, 1, F]
    ridge = np.exp(-0.5 * ((f - fc[:, :, None]) / width[:, None, None]) ** 2)
    x += amp[:, None, None] * env[:, :, None] * ridge


def make_kws(n, rng):
    y = rng.integers(0, len(KWS_CLASSES), size=n)
    x = np.zeros((n, T, F))
    for c, cls in enumerate(KWS_CLASSES):
        idx = np.flatnonzero(y == c)
        m = idx.size
        if m == 0:
            continue
        stretch = rng.uniform(0.8, 1.25, size=m)
        length = kws_word_length(cls) * stretch
        start = rng.uniform(0, 1, size=m) * np.maximum(T - length, 0)  # anywhere it fits
        xc = np.zeros((m, T, F))
        for name, onset in cls:
            (f0, f1), dur, amp = TRACKS[name]
            jf = rng.normal(0, 0.6, size=m)
            add_track(xc, start + onset * stretch, dur * stretch, f0 + jf, f1 + jf + rng.normal(0, 0.3, size=m),
                      amp * rng.uniform(0.6, 1.4, size=m), rng.uniform(0.6, 1.1, size=m))
        x[idx] = xc
    # class-independent distractors: short blips, a steady hum
    for _ in range(2):
        on = rng.random(n) < 0.75
        f = rng.uniform(0, F - 1, size=n)
        add_track(x, rng.uniform(-3, T, size=n), rng.uniform(2, 5, size=n), f, f,
                  on * rng.choice([-1.0, 1.0], size=n) * rng.uniform(1.0, 2.2, size=n), rng.uniform(0.5, 1.0, size=n))
    f = rng.uniform(0, F - 1, size=n)
    add_track(x, np.full(n, -1.0), np.full(n, T + 2.0), f, f, rng.uniform(-1.2, 1.2, size=n), rng.uniform(0.4, 0.8, size=n))
    # spectral tilt, noise smooth across time, white noise
    tilt = rng.normal(0, 0.4, size=(n, 1, 1)) * (np.arange(F) / (F - 1) - 0.5)[None, None, :]
    smooth = rng.normal(0, 1, size=(n, T + 4, F))
    smooth = (smooth[:, :-4] + smooth[:, 1:-3] + smooth[:, 2:-2] + smooth[:, 3:-1] + smooth[:, 4:]) / np.sqrt(5) * 0.5
    x += tilt + smooth + rng.normal(0, KWS_NOISE, size=(n, T, F))
    # cepstral-like offsets per coefficient: larger low coefficients
    x += (np.array([3.0, -1.5, 1.0, -0.5, 0.4, -0.3, 0.2, -0.1, 0.1, 0.0]))[None, None, :]
    return x.astype(np.float32)[:, None], y.astype(np.uint8)


# ---- ad -------------------------------------------------------------------------------------
def mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


MEL_MAX = mel(8000.0)


def harmonic_spectrum(f0, load, reson, floor, odd_gain=None, extra=None):
    """Power per mel bin, [n, frames, bins]: harmonics h·f0 (Hz; f0 is
    [n, frames]) as peaks in mel bins whose amplitude falls with h and is
    shaped by a resonance (centre reson, Hz), scaled by load, over a
    noise floor. odd_gain [n] multiplies odd harmonics; extra (centres in
    bins [n], power [n]) adds one tone."""
    b = np.arange(AD_BINS, dtype=np.float64)[None, None, :]
    p = np.zeros(f0.shape + (AD_BINS,))
    for h in range(1, 25):
        fh = h * f0
        pos = mel(fh) / MEL_MAX * AD_BINS                      # [n, frames]
        amp = load[:, None] / h ** 0.8 * (1 + 4 * np.exp(-0.5 * ((fh - reson[:, None]) / 600.0) ** 2))
        if odd_gain is not None and h % 2 == 1:
            amp = amp * odd_gain[:, None]
        amp = np.where(fh < 7800, amp, 0.0)
        p += amp[:, :, None] * np.exp(-0.5 * ((b - pos[:, :, None]) / 0.9) ** 2)
    if extra is not None:
        pos, power = extra
        p += power[:, None, None] * np.exp(-0.5 * ((b - pos[:, None, None]) / 0.9) ** 2)
    return p + floor[:, None, None]


def ad_normal_latents(n, rng):
    f0 = rng.uniform(180.0, 260.0, size=n)
    load = np.exp(rng.uniform(np.log(0.6), np.log(1.6), size=n))
    reson = rng.uniform(1500.0, 2500.0, size=n)
    floor = np.exp(rng.uniform(np.log(0.004), np.log(0.012), size=n))
    return f0, load, reson, floor


def ad_frames(f0, rng, wander=0.004):
    """[n, frames] fundamentals drifting slowly around f0 [n]."""
    drift = np.cumsum(rng.normal(0, wander, size=(f0.size, AD_FRAMES)), axis=1)
    return f0[:, None] * (1 + drift)


def ad_db(p, rng):
    return 10 * np.log10(p) + rng.normal(0, 1.0, size=p.shape)


def make_ad(n, rng, anomalous=None):
    """n samples [n, 640] and their 0/1 anomaly flags; anomalous: how many
    (None: all normal)."""
    f0, load, reson, floor = ad_normal_latents(n, rng)
    k = 0 if anomalous is None else anomalous
    flags = np.zeros(n, dtype=np.uint8)
    flags[:k] = 1
    kind = rng.integers(0, 5, size=n)
    sev = rng.uniform(0.0, 1.0, size=n) ** 1.5          # many mild, some plain
    f = ad_frames(f0, rng)
    odd = np.ones(n)
    extra_pos, extra_pow = np.zeros(n), np.zeros(n)
    burst = np.zeros((n, AD_FRAMES))
    a = np.arange(n) < k
    # 0: an extra tone between the harmonics, of power up to a harmonic's
    s = a & (kind == 0)
    extra_pos[s] = rng.uniform(10, AD_BINS - 10, size=s.sum())
    extra_pow[s] = load[s] * (0.03 + 0.5 * sev[s])
    # 1: a fundamental outside the normal range (up to 30 % beyond it)
    s = a & (kind == 1)
    out = np.where(rng.random(n) < 0.5, 180.0 * (1 - 0.3 * sev - 0.02), 260.0 * (1 + 0.3 * sev + 0.02))
    f[s] = ad_frames(out[s], rng)
    # 2: the balance of odd and even harmonics
    s = a & (kind == 2)
    odd[s] = np.exp(rng.choice([-1.0, 1.0], size=s.sum()) * (0.15 + 0.9 * sev[s]))
    # 3: broadband noise in one to three frames
    s = a & (kind == 3)
    for i in np.flatnonzero(s):
        fr = rng.choice(AD_FRAMES, size=rng.integers(1, 4), replace=False)
        burst[i, fr] = floor[i] * (0.6 + 12 * sev[i])
    # 4: a fundamental that jumps between frames
    s = a & (kind == 4)
    jump = 1 + rng.choice([-1.0, 1.0], size=(n, AD_FRAMES)) * (0.01 + 0.08 * sev[:, None]) * (rng.random((n, AD_FRAMES)) < 0.6)
    f[s] = f[s] * jump[s]
    p = harmonic_spectrum(f, load, reson, floor, odd_gain=odd, extra=(extra_pos, extra_pow))
    p += burst[:, :, None] * rng.uniform(0.5, 1.5, size=(n, 1, AD_BINS))
    x = ad_db(p, rng).reshape(n, AD_FRAMES * AD_BINS)
    order = rng.permutation(n)                          # anomalies spread through the split
    return x[order].astype(np.float32), flags[order]


# ---- rgb ------------------------------------------------------------------------------------
RGB_CLASSES = ["disc", "square", "triangle", "plus", "ring", "diamond", "hstripes", "vstripes", "checker", "dots"]


def hsv_to_rgb(h, s, v):
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    r = np.choose(i, [v, q, p, p, t, v])
    g = np.choose(i, [t, v, v, q, p, p])
    b = np.choose(i, [p, p, t, v, v, q])
    return np.stack([r, g, b], axis=-1)


def shape_masks(cls, u, v, half):
    """Coverage in [0, 1] of class cls at pixel offsets u (right), v (down)
    from the centre, in units of the half size: [n, H, W]."""
    au, av = np.abs(u), np.abs(v)
    inside_sq = (au <= 1) & (av <= 1)
    if cls == "disc":
        return u * u + v * v <= 1
    if cls == "square":
        return inside_sq
    if cls == "triangle":                    # upright, symmetric left to right
        return (v <= 1) & (v >= -1) & (au <= (v + 1) / 2)
    if cls == "plus":
        return (au <= 1) & (av <= 1) & ((au <= 0.3) | (av <= 0.3))
    if cls == "ring":
        r2 = u * u + v * v
        return (r2 <= 1) & (r2 >= 0.45)
    if cls == "diamond":
        return au + av <= 1
    period = np.maximum(2.0, np.round(half / 2.5))[:, None, None]   # pixels per stripe pair
    pu = (u * half[:, None, None])
    pv = (v * half[:, None, None])
    if cls == "hstripes":
        return inside_sq & (np.floor(pv / period * 2) % 2 == 0)
    if cls == "vstripes":                    # symmetric about the centre column
        return inside_sq & (np.floor(np.abs(pu) / period * 2 + 0.5) % 2 == 0)
    if cls == "checker":
        return inside_sq & ((np.floor(np.abs(pu) / period * 2 + 0.5) + np.floor(pv / period * 2)) % 2 == 0)
    if cls == "dots":
        gu = np.abs(pu) / period - np.round(np.abs(pu) / period)
        gv = pv / period - np.round(pv / period)
        return inside_sq & (gu * gu + gv * gv <= 0.09)
    raise ValueError(cls)


def make_rgb(n, rng):
    y = rng.integers(0, 10, size=n)
    yy, xx = np.mgrid[0:IMG, 0:IMG].astype(np.float64)
    # background: a gradient between two random colours, at a random angle
    c0 = hsv_to_rgb(rng.random(n), rng.uniform(0.1, 0.7, n), rng.uniform(0.2, 0.9, n))
    c1 = hsv_to_rgb(rng.random(n), rng.uniform(0.1, 0.7, n), rng.uniform(0.2, 0.9, n))
    ang = rng.uniform(0, 2 * np.pi, n)
    g = (np.cos(ang)[:, None, None] * (xx - 15.5) + np.sin(ang)[:, None, None] * (yy - 15.5)) / 45 + 0.5
    img = c0[:, None, None, :] * (1 - g[..., None]) + c1[:, None, None, :] * g[..., None]
    # a faint distractor blob
    bx, by, br = rng.uniform(0, IMG, n), rng.uniform(0, IMG, n), rng.uniform(3, 8, n)
    blob = np.exp(-((xx - bx[:, None, None]) ** 2 + (yy - by[:, None, None]) ** 2) / (2 * br[:, None, None] ** 2))
    bc = hsv_to_rgb(rng.random(n), rng.uniform(0.2, 1, n), rng.uniform(0.2, 1, n))
    img = img * (1 - 0.35 * blob[..., None]) + 0.35 * blob[..., None] * bc[:, None, None, :]
    bg_v = (c0.max(axis=1) + c1.max(axis=1)) / 2

    def paint(img, cls, half):
        """One shape per image, cls [n] at half size half [n], in a colour
        brighter than a dark background or darker than a bright one."""
        cx = rng.uniform(half - 2, IMG - 1 - half + 2)
        cy = rng.uniform(half - 2, IMG - 1 - half + 2)
        v = np.where(bg_v < 0.55, rng.uniform(0.65, 1.0, n), rng.uniform(0.05, 0.45, n))
        col = hsv_to_rgb(rng.random(n), rng.uniform(0.3, 1.0, n), v)
        u = (xx[None] - cx[:, None, None]) / half[:, None, None]
        w = (yy[None] - cy[:, None, None]) / half[:, None, None]
        mask = np.zeros((n, IMG, IMG))
        for k, name in enumerate(RGB_CLASSES):
            s = cls == k
            if s.any():
                mask[s] = shape_masks(name, u[s], w[s], half[s])
        return img * (1 - mask[..., None]) + mask[..., None] * col[:, None, None, :]

    # half the images first get a small shape of any class (a distractor:
    # the label is the large one), then the object itself
    small = rng.random(n) < 0.5
    img = np.where(small[:, None, None, None], paint(img, rng.integers(0, 10, size=n), rng.uniform(2.5, 4.5, n)), img)
    img = paint(img, y, rng.uniform(5.5, 11, n))
    img = img * 255 + rng.normal(0, 20, size=img.shape)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)       # [n, H, W, C]
    return img, y.astype(np.uint8)


# ---- writing --------------------------------------------------------------------------------
def write(out, splits):
    """splits: {"train": {"x": ..., "y": ...}, "test": {...}}."""
    if out.endswith((".h5", ".hdf5")):
        try:
            import h5py
        except ImportError:
            sys.exit("make-synthetic: writing HDF5 needs h5py (scripts/setup-python.sh bench)")
        d = os.path.dirname(os.path.abspath(out))
        os.makedirs(d, exist_ok=True)
        tmp = out + ".tmp"
        with h5py.File(tmp, "w") as f:
            for s, parts in splits.items():
                for p, a in parts.items():
                    f[f"{s}/{p}"] = a                      # contiguous: streams by hyperslabs
        os.replace(tmp, out)
    else:
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(out):                       # a stale file would join the set
            if name.endswith(".npy"):
                os.remove(os.path.join(out, name))
        for s, parts in splits.items():
            for p, a in parts.items():
                np.save(os.path.join(out, f"{s}_{p}.npy"), np.ascontiguousarray(a))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["kws", "ad", "rgb"])
    ap.add_argument("out", help="OUT.h5 (HDF5) or a directory (.npy files)")
    ap.add_argument("--train", type=int, help="training samples (kws 12000, ad 8000, rgb 10000)")
    ap.add_argument("--test", type=int, help="test samples (kws 3000, ad 2000, rgb 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--squeeze", action="store_true", help="kws: x [N, 49, 10] instead of [N, 1, 49, 10]")
    ap.add_argument("--anomaly-share", type=float, default=0.5, help="ad: share of the test split that is anomalous")
    ap.add_argument("--channels-last", action="store_true", help="rgb: x [N, 32, 32, 3] instead of [N, 3, 32, 32]")
    a = ap.parse_args()
    defaults = {"kws": (12000, 3000), "ad": (8000, 2000), "rgb": (10000, 2000)}[a.kind]
    n_train = a.train if a.train is not None else defaults[0]
    n_test = a.test if a.test is not None else defaults[1]
    if n_train < 1 or n_test < 1:
        ap.error("--train and --test must be at least 1")
    if not 0 <= a.anomaly_share <= 1:
        ap.error("--anomaly-share is a fraction in [0, 1]")
    # independent streams: the test split does not depend on --train
    r_train, r_test = (np.random.default_rng(np.random.SeedSequence([a.seed, i])) for i in (1, 2))
    chunk = 2048  # bounds the generators' float64 temporaries

    def gen(fn, n, rng, *extra):
        parts = [fn(min(chunk, n - s), rng, *extra) for s in range(0, n, chunk)]
        return [np.concatenate(p) for p in zip(*parts)]

    if a.kind == "kws":
        (xtr, ytr), (xte, yte) = gen(make_kws, n_train, r_train), gen(make_kws, n_test, r_test)
        if a.squeeze:
            xtr, xte = xtr[:, 0], xte[:, 0]
        splits = {"train": {"x": xtr, "y": ytr}, "test": {"x": xte, "y": yte}}
    elif a.kind == "ad":
        xtr = np.concatenate([make_ad(min(chunk, n_train - s), r_train)[0] for s in range(0, n_train, chunk)])
        k = int(round(a.anomaly_share * n_test))
        xte, flags = make_ad(n_test, r_test, anomalous=k)
        splits = {"train": {"x": xtr}, "test": {"x": xte, "anomaly": flags}}
    else:
        (xtr, ytr), (xte, yte) = gen(make_rgb, n_train, r_train), gen(make_rgb, n_test, r_test)
        if not a.channels_last:
            xtr, xte = np.ascontiguousarray(xtr.transpose(0, 3, 1, 2)), np.ascontiguousarray(xte.transpose(0, 3, 1, 2))
        splits = {"train": {"x": xtr, "y": ytr}, "test": {"x": xte, "y": yte}}
    write(a.out, splits)
    shapes = ", ".join(f"{s}/{p} {list(v.shape)} {v.dtype}" for s, ps in splits.items() for p, v in ps.items())
    print(f"make-synthetic: {a.kind} -> {a.out}: {shapes}")


if __name__ == "__main__":
    main()
