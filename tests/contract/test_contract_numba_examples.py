"""Numba's and Taichi's classic examples ported as their users write them (API.md sections
1-4): Black-Scholes with ``math`` functions in funcs, the Mandelbrot set into a uint8
image, a histogram with shared counters, k-means, a marching-squares compaction through
``kd.cumsum`` and the game of life; each run compiled, as plain Python and on the emulated
CUDA device by ``check``, and checked against NumPy where NumPy has the answer."""

from __future__ import annotations

import math

import numpy as np
from kdsl_cpu_util import check

import kdsl as kd


@kd.func
def cnd(d):
    a1, a2, a3, a4, a5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    rsqrt2pi = 0.39894228040143267793994605993438
    k = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    value = rsqrt2pi * math.exp(-0.5 * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))))
    if d > 0:
        value = 1.0 - value
    return value


@kd.kernel(fastmath=False)
def black_scholes(call, put, price, strike, years, riskfree, volatility):
    for i in kd.prange(price.shape[0]):
        sqrt_t = math.sqrt(years[i])
        d1 = (math.log(price[i] / strike[i]) + (riskfree + 0.5 * volatility * volatility)
              * years[i]) / (volatility * sqrt_t)
        d2 = d1 - volatility * sqrt_t
        discount = math.exp(-riskfree * years[i])
        call[i] = price[i] * cnd(d1) - strike[i] * discount * cnd(d2)
        put[i] = strike[i] * discount * (1.0 - cnd(d2)) - price[i] * (1.0 - cnd(d1))


def test_black_scholes(rng):
    n = 300
    price, strike = rng.uniform(5, 30, n), rng.uniform(1, 100, n)
    years = rng.uniform(0.25, 10, n)
    call, put = np.zeros(n), np.zeros(n)
    check(black_scholes, call, put, price, strike, years, 0.02, 0.3)
    parity = price - strike * np.exp(-0.02 * years)  # put-call parity
    np.testing.assert_allclose(call - put, parity, atol=1e-5)


@kd.func
def escape_time(x, y, max_iterations):
    zr = 0.0
    zi = 0.0
    for i in range(max_iterations):
        zr, zi = zr * zr - zi * zi + x, 2.0 * zr * zi + y
        if zr * zr + zi * zi >= 4:
            return i
    return 255


@kd.kernel
def mandelbrot(min_x, max_x, min_y, max_y, image, iterations):
    height, width = image.shape[0], image.shape[1]
    pixel_x = (max_x - min_x) / width
    pixel_y = (max_y - min_y) / height
    for x in kd.prange(width):
        real = min_x + x * pixel_x
        for y in range(height):
            image[y, x] = escape_time(real, min_y + y * pixel_y, iterations)


def test_mandelbrot():
    image = np.zeros((40, 60), np.uint8)
    check(mandelbrot, -2.0, 1.0, -1.0, 1.0, image, 30)
    assert image[20, 40] == 255 and image[0, 0] < 3  # inside; far outside


@kd.kernel
def histogram(x, bins, counts):
    n = bins.shape[0] - 1
    low, high = bins[0], bins[n]
    for i in kd.prange(x.shape[0]):
        v = x[i]
        if v >= low and v < high:
            counts[int((v - low) / (high - low) * n)] += 1  # shared counters: atomic


def test_histogram_as_numpy(rng):
    x = rng.normal(size=5000)
    bins = np.linspace(-3, 3, 13)
    counts = np.zeros(12, np.int64)
    check(histogram, x, bins, counts)
    np.testing.assert_array_equal(counts, np.histogram(x[(x >= -3) & (x < 3)], bins)[0])


@kd.kernel
def kmeans_step(points, centroids, labels, counts):
    for i in kd.prange(points.shape[0]):
        best = 0
        best_distance = np.inf
        for c in range(centroids.shape[0]):
            distance = 0.0
            for t in range(points.shape[1]):
                diff = points[i, t] - centroids[c, t]
                distance += diff * diff
            if distance < best_distance:
                best_distance = distance
                best = c
        labels[i] = best
    centroids[:] = 0.0
    counts[:] = 0
    for i in kd.prange(points.shape[0]):
        counts[labels[i]] += 1
        for t in range(points.shape[1]):
            centroids[labels[i], t] += points[i, t]
    for c in kd.prange(centroids.shape[0]):
        if counts[c] > 0:
            for t in range(centroids.shape[1]):
                centroids[c, t] /= counts[c]


def test_kmeans_step_as_numpy(rng):
    points = np.concatenate([rng.normal(loc, 0.3, (50, 2)) for loc in (-2, 0, 2)])
    centroids = points[[0, 60, 120]].copy()
    labels = np.zeros(150, np.int64)
    counts = np.zeros(3, np.int64)
    start = centroids.copy()
    kmeans_step(points, centroids, labels, counts)
    nearest = ((points[:, None, :] - start[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(labels, nearest)
    np.testing.assert_allclose(centroids, [points[nearest == c].mean(0) for c in range(3)])
    np.testing.assert_array_equal(counts, np.bincount(nearest, minlength=3))
    check(kmeans_step, points, start.copy(), labels, counts, rtol=1e-12)  # sums reassociate


@kd.kernel
def boundary_cells(field, level):
    """Marching squares' first pass: the cells the contour crosses, compacted in order."""
    nx, ny = field.shape[0] - 1, field.shape[1] - 1
    crossed = kd.zeros(nx * ny, kd.i32)
    for i, j in kd.ndrange(nx, ny):
        code = 0
        if field[i, j] > level:
            code |= 1
        if field[i + 1, j] > level:
            code |= 2
        if field[i + 1, j + 1] > level:
            code |= 4
        if field[i, j + 1] > level:
            code |= 8
        if code != 0 and code != 15:
            crossed[i * ny + j] = 1
    offsets = kd.cumsum(crossed)
    total = offsets[nx * ny - 1]
    cells = kd.zeros(total, kd.i64)
    for c in kd.prange(nx * ny):
        if crossed[c] == 1:
            cells[offsets[c] - 1] = c
    return cells, total


def test_marching_squares_compaction(rng):
    field = rng.random((20, 25))
    cells, total = check(boundary_cells, field, 0.5)
    above = field > 0.5
    corners = above[:-1, :-1].astype(int) + above[1:, :-1] + above[1:, 1:] + above[:-1, 1:]
    expected = np.flatnonzero((corners > 0) & (corners < 4))
    assert total == len(expected)
    np.testing.assert_array_equal(cells, expected)


@kd.func
def neighbours(alive, i: kd.i32, j: kd.i32) -> kd.i32:
    return (alive[i - 1, j] + alive[i + 1, j] + alive[i, j - 1] + alive[i, j + 1]
            + alive[i - 1, j - 1] + alive[i + 1, j - 1] + alive[i - 1, j + 1]
            + alive[i + 1, j + 1])


@kd.kernel
def life(alive, count, generations):
    n = alive.shape[0]
    for _ in range(generations):
        for i, j in kd.ndrange((1, n - 1), (1, n - 1)):
            count[i, j] = neighbours(alive, i, j)
        for i, j in kd.ndrange((1, n - 1), (1, n - 1)):
            if alive[i, j] == 0:
                if count[i, j] == 3:
                    alive[i, j] = 1
            elif count[i, j] != 2 and count[i, j] != 3:
                alive[i, j] = 0


def test_game_of_life(rng):
    alive = (rng.random((24, 24)) < 0.3).astype(np.int32)
    alive[[0, -1]] = 0
    alive[:, [0, -1]] = 0
    check(life, alive, np.zeros_like(alive), 6)
    assert 0 < alive.sum() < alive.size
