"""Kernels over arrays of short rows (``a[i, 0]``, ``a[i, 1]``, ...) shared by the tests of
the layouts a specialisation fixes (a short last axis, padded rows)."""

from __future__ import annotations

import kdsl as kd


@kd.kernel
def scale_rows(a, out):
    """Reads and writes every component of each row; the size of the last axis is read
    from the array, so a specialisation that took the wrong one would show."""
    for i in kd.prange(a.shape[0]):
        for k in range(a.shape[1]):
            out[i, k] = a[i, k] * (k + 1) + a[i, a.shape[1] - 1 - k]


@kd.kernel
def pixel_sums(image, out):
    """An (H, W, C) array: the two inner strides are constants, the outer one is not."""
    for y in kd.prange(image.shape[0]):
        for x in range(image.shape[1]):
            s = 0.0
            for c in range(image.shape[2]):
                s += image[y, x, c] * (c + 1)
            out[y, x] = s


@kd.kernel
def pair_energy(p) -> kd.f64:
    """A softened pair energy of (N, 3) points read with scalar indices."""
    total = 0.0
    for i in kd.prange(p.shape[0]):
        for j in range(p.shape[0]):
            dx = p[i, 0] - p[j, 0]
            dy = p[i, 1] - p[j, 1]
            dz = p[i, 2] - p[j, 2]
            total += 1.0 / kd.sqrt(dx * dx + dy * dy + dz * dz + 0.5)
    return total
