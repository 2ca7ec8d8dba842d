"""Renderers as Taichi and Warp users write them (API.md sections 1-3): SDF ray marching
(Taichi's sdf_renderer: a func called in a `while` condition, a numerical normal from
`kd.static` offsets) and a small path tracer (Taichi's cornell_box: funcs returning
tuples with early returns, a global tuple of spheres, rejection sampling in `while True`,
random numbers). Each is compared with its own plain-Python run, the path tracer bit for
bit and on any number of threads."""

from __future__ import annotations

import math

import numpy as np
from kdsl_cpu_util import check, with_threads

import kdsl as kd

MAX_STEPS = 64
EPS = 1e-4
INF = 1e10
FOV = 0.8
SPHERES = ((kd.vec3(0.0, 0.5, 0.0), 0.5), (kd.vec3(-1.0, 0.3, 0.5), 0.3))


@kd.func
def sdf(o: kd.vec3) -> kd.f32:
    wall = min(o[1] + 0.1, o[2] + 0.4)
    sphere = kd.length(o - kd.vec3(0.0, 0.35, 0.0)) - 0.36
    q = abs(o - kd.vec3(0.8, 0.3, 0.0)) - kd.vec3(0.3, 0.3, 0.3)
    box = kd.length(kd.max(q, kd.vec3(0.0))) + min(max(max(q[0], q[1]), q[2]), 0.0)
    return min(wall, min(sphere, box))


@kd.func
def sdf_normal(p: kd.vec3) -> kd.vec3:
    d = 1e-3
    n = kd.vec3(0.0)
    center = sdf(p)
    for i in kd.static(range(3)):
        inc = p
        inc[i] += d
        n[i] = (1.0 / d) * (sdf(inc) - center)
    return kd.normalize(n)


@kd.func
def ray_march(p: kd.vec3, d: kd.vec3) -> kd.f32:
    j = 0
    dist = 0.0
    while j < MAX_STEPS and sdf(p + dist * d) > EPS and dist < INF:
        dist += sdf(p + dist * d)
        j += 1
    return min(INF, dist)


@kd.kernel
def march(img: kd.Array[kd.f32, 2], depth: kd.Array[kd.f32, 2]):
    h = img.shape[0]
    w = img.shape[1]
    aspect = w / h
    for v, u in kd.ndrange(h, w):
        pos = kd.vec3(0.0, 0.32, 3.7)
        d = kd.normalize(kd.vec3(2 * FOV * (u + 0.5) / h - FOV * aspect - 1e-5,
                                 2 * FOV * (v + 0.5) / h - FOV - 1e-5, -1.0))
        t = ray_march(pos, d)
        depth[v, u] = t
        if t >= INF:
            img[v, u] = 0.0
            continue
        light = kd.normalize(kd.vec3(1.0, 2.0, 1.5))
        img[v, u] = max(kd.dot(sdf_normal(pos + t * d), light), 0.0)


@kd.func
def hit_sphere(o: kd.vec3, d: kd.vec3, c: kd.vec3, r: kd.f32):
    oc = o - c
    b = kd.dot(oc, d)
    disc = b * b - (kd.dot(oc, oc) - r * r)
    if disc < 0.0:
        return INF, kd.vec3(0.0)
    t = -b - kd.sqrt(disc)
    if t < EPS:
        t = -b + kd.sqrt(disc)
        if t < EPS:
            return INF, kd.vec3(0.0)
    return t, kd.normalize(o + t * d - c)


@kd.func
def hit_scene(o: kd.vec3, d: kd.vec3):
    closest = INF
    normal = kd.vec3(0.0)
    material = 0
    for k in kd.static(range(len(SPHERES))):
        t, n = hit_sphere(o, d, SPHERES[k][0], SPHERES[k][1])
        if t < closest:
            closest, normal, material = t, n, k + 1
    if d.y < 0.0:
        t = -o.y / d.y
        if EPS < t < closest:
            closest, normal, material = t, kd.vec3(0.0, 1.0, 0.0), 3
    return closest, normal, material


@kd.func
def bounce_direction(n: kd.vec3) -> kd.vec3:
    while True:
        w = kd.vec3(kd.random() * 2.0 - 1.0, kd.random() * 2.0 - 1.0, kd.random() * 2.0 - 1.0)
        if 1e-6 < kd.dot(w, w) <= 1.0:
            break
    d = kd.normalize(w)
    return -d if kd.dot(d, n) < 0.0 else d


@kd.kernel
def path_trace(img: kd.Array[kd.vec3, 2], samples: kd.i32, bounces: kd.i32):
    h = img.shape[0]
    w = img.shape[1]
    for y, x in kd.ndrange(h, w):
        color = kd.vec3(0.0)
        for _ in range(samples):
            o = kd.vec3(0.0, 0.5, 3.0)
            d = kd.normalize(kd.vec3((x + kd.random()) / w - 0.5, (y + kd.random()) / h - 0.3,
                                     -1.0))
            throughput = kd.vec3(1.0)
            for _ in range(bounces):
                t, n, material = hit_scene(o, d)
                if material == 0:
                    color += throughput * kd.vec3(0.8, 0.9, 1.0)
                    break
                throughput *= kd.vec3(0.9, 0.2, 0.2) if material == 2 else kd.vec3(0.7)
                o = o + t * d + EPS * n
                d = bounce_direction(n)
        img[y, x] = color / samples


def test_sdf_ray_marching():
    img, depth = np.zeros((12, 16), np.float32), np.zeros((12, 16), np.float32)
    check(march, img, depth, rtol=2e-3, atol=2e-3)
    hit = depth < INF
    assert hit.all() and 0.2 < img.mean() < 1.0
    v, u = 6, 8  # the centre ray: its depth matches a march in NumPy float64
    d = np.array([2 * FOV * (u + 0.5) / 12 - FOV * 16 / 12 - 1e-5,
                  2 * FOV * (v + 0.5) / 12 - FOV - 1e-5, -1.0])
    d /= np.linalg.norm(d)
    assert math.isclose(depth[v, u], _march_in_numpy(np.array([0.0, 0.32, 3.7]), d), rel_tol=1e-3)


def _march_in_numpy(p: np.ndarray, d: np.ndarray) -> float:
    def distance(o: np.ndarray) -> float:
        q = np.abs(o - [0.8, 0.3, 0.0]) - 0.3
        box = np.linalg.norm(np.maximum(q, 0.0)) + min(q.max(), 0.0)
        return min(o[1] + 0.1, o[2] + 0.4, np.linalg.norm(o - [0.0, 0.35, 0.0]) - 0.36, box)

    dist = 0.0
    for _ in range(MAX_STEPS):
        if distance(p + dist * d) <= EPS:
            break
        dist += distance(p + dist * d)
    return dist


def test_path_tracer_is_its_plain_python_run_on_any_number_of_threads():
    images = []
    for run, threads in ((path_trace, 1), (path_trace, 2), (path_trace.python, 1)):
        img = np.zeros((6, 8, 3), np.float32)
        kd.seed(3)
        with_threads(threads, run, img, 3, 3)
        images.append(img)
    np.testing.assert_array_equal(images[0], images[1])
    np.testing.assert_allclose(images[0], images[2], rtol=1e-5, atol=1e-6)
    assert 0.1 < images[0].mean() < 1.0 and images[0].std() > 0.01
