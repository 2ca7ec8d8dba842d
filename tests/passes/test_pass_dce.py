"""dce: ops whose results are unused and that have no effects disappear, loops included,
and so do reductions whose result no one reads; stores, prints and while
loops stay. Golden IR after the pass, results unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import kdsl as kd


def golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@kd.kernel
def unused_work(x: kd.Array[kd.f32], a: kd.f32):
    for i in kd.prange(x.shape[0]):
        waste = kd.sqrt(a) * 2.0  # noqa: F841
        t = x[i] + a
        s = 0.0
        for _ in range(3):
            s += t
        x[i] = a


def test_unused_values_and_loops_disappear():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    before = unused_work.ir(x, 4.0, stage="cse")
    assert "sqrt %a" in before and "%s = for" in before
    assert unused_work.ir(x, 4.0, stage="dce") == golden("""
        kernel @unused_work(%x: array<f32, 1, C>, %a: f32) {
          %0 = array_dim %x {axis = 0} : i64
          %1 = constant 0 : i64
          %2 = max %0, %1 : i64
          parallel_for %2 {ndim = 1, reductions = []} (%i: i64) {
            array_store %x, %i, %a
            yield
          }
          return
        }
    """)
    unused_work(x, 4.0)
    np.testing.assert_array_equal(x, [4.0, 4.0, 4.0])


@kd.kernel
def effects_stay(x: kd.Array[kd.i64]):
    k = 0
    while k < 3:
        k += 1
    kd.atomic_add(x, 0, 5)
    print("done")


def test_effects_and_while_loops_stay(capfd):
    x = np.array([1, 2], np.int64)
    assert effects_stay.ir(x, stage="dce") == golden("""
        kernel @effects_stay(%x: array<i64, 1, C>) {
          %0 = constant 0 : i64
          %k = while %0 : i64 (%1: i64) {
            %2 = constant 3 : i64
            %3 = lt %1, %2 : bool
            condition %3
          } do (%4: i64) {
            %5 = constant 1 : i64
            %6 = add %4, %5 : i64
            yield %6
          }
          %7 = constant 5 : i64
          %8 = atomic_rmw %x, %0, %7 {kind = 'add', implicit = False} : i64
          print {parts = ['done']}
          return
        }
    """)
    effects_stay(x)
    np.testing.assert_array_equal(x, [6, 2])
    assert capfd.readouterr().out == "done\n"


@kd.kernel
def unread_reductions(x: kd.Array[kd.f64], y: kd.Array[kd.f64]) -> kd.f64:
    wasted = 0.0
    kept = 0.0
    peak = -1.0
    for i in kd.prange(x.shape[0]):
        wasted += kd.sin(x[i])  # never read after the loop
        kept += x[i] * x[i]
        peak = max(peak, x[i])
        y[i] = kd.cos(x[i])
    return kept + peak


def test_reductions_no_one_reads_disappear():
    rng = np.random.default_rng(3)
    x = rng.random(7)
    before = unread_reductions.ir(x, np.zeros(7), stage="cse")
    assert "reductions = ['add', 'add', 'max']" in before and "sin" in before
    after = unread_reductions.ir(x, np.zeros(7), stage="dce")
    assert "reductions = ['add', 'max']" in after and "sin" not in after
    y, expected_y = np.zeros(7), np.zeros(7)
    assert np.isclose(unread_reductions(x, y), unread_reductions.python(x, expected_y),
                      rtol=1e-12)
    np.testing.assert_array_equal(y, expected_y)


@kd.kernel
def squared_distance(x: kd.Array[kd.f64], t: kd.Array[kd.f64]) -> kd.f64:
    e = 0.0
    for i in kd.prange(x.shape[0]):
        e += (x[i] - t[i]) ** 2
    return e


def test_a_vector_jacobian_product_skips_the_value_it_does_not_return():
    rng = np.random.default_rng(4)
    from kdsl.runtime.vjp_kernel import vjp_kernel

    x, t = rng.random(6), rng.random(6)
    product = vjp_kernel(squared_distance, (0,))
    assert "reductions = []" in product.ir(x, t, np.zeros(6), 1.0)
    d_x = np.zeros(6)
    product(x, t, d_x, 0.5)
    np.testing.assert_allclose(d_x, x - t, rtol=1e-12)
