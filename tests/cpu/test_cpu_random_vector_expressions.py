"""Random vector expressions: hypothesis builds kernels over vec3 (f32) values and f32
scalars (arithmetic with scalars and weak literals, cross, dot, length, normalize,
components, component assignment, where, min, max, abs), and each compiled kernel must
agree with its own function run as plain Python."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from kdsl_cpu_util import assert_same, clone, fuzz_settings, kernel_from_source


class VectorExpressionGenerator:
    """Expressions over vec3 (f32) values and f32 scalars: arithmetic with scalars and weak
    literals, cross, dot, length, normalize, components, where, min, max, abs."""

    def __init__(self, draw):
        self.draw = draw
        self.vectors = ["u", "v"]
        self.scalars = ["t"]

    def pick(self, options):
        return options[self.draw(st.integers(0, len(options) - 1))]

    def literal(self):
        return self.pick(["0.5", "1.5", "-2.0", "0.1", "3"])

    def vector(self, depth):
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            return self.pick(self.vectors)
        form = self.draw(st.integers(0, 13))
        a = self.vector(depth - 1)
        if form == 0:
            return f"({a} + {self.vector(depth - 1)})"
        if form == 1:
            return f"({a} - {self.vector(depth - 1)})"
        if form == 2:
            return f"({a} * {self.scalar(depth - 1)})"
        if form == 3:
            return f"({self.literal()} * {a})"
        if form == 4:
            return f"({a} * {self.vector(depth - 1)})"
        if form == 5:
            return f"kd.cross({a}, {self.vector(depth - 1)})"
        if form == 6:
            return f"kd.normalize(kd.vec3(1.0) + abs({a}))"
        if form == 7:
            return f"kd.where({self.scalar(0)} > {self.scalar(0)}, {a}, {self.vector(depth - 1)})"
        if form == 8:
            return f"kd.{self.pick(['min', 'max'])}({a}, {self.vector(depth - 1)})"
        if form == 9:
            return f"(-{a})"
        if form == 10:
            return f"kd.vec3({self.scalar(depth - 1)}, {a}.z, {self.literal()})"
        if form == 11:
            return f"kd.vec3({self.scalar(depth - 1)})"
        if form == 12:
            return f"({a} / (abs({self.scalar(depth - 1)}) + 1.0))"
        return f"kd.vec3({a}.y, {a}[2], {a}.x)"

    def scalar(self, depth):
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            return self.pick(self.scalars + [self.literal()])
        form = self.draw(st.integers(0, 7))
        if form == 0:
            return f"kd.dot({self.vector(depth - 1)}, {self.vector(depth - 1)})"
        if form == 1:
            return f"kd.length({self.vector(depth - 1)})"
        if form == 2:
            return f"{self.vector(depth - 1)}.{self.pick(['x', 'y', 'z'])}"
        if form == 3:
            return f"{self.vector(depth - 1)}[{self.draw(st.integers(0, 2))}]"
        if form == 4:
            return f"({self.scalar(depth - 1)} * {self.scalar(depth - 1)})"
        if form == 5:
            return f"kd.sqrt(abs({self.scalar(depth - 1)}))"
        if form == 6:
            return f"({self.scalar(depth - 1)} - {self.scalar(depth - 1)})"
        return f"kd.max({self.scalar(depth - 1)}, {self.scalar(depth - 1)})"

    def program(self):
        lines = [
            "@kd.kernel(fastmath=False)",
            "def k(a: kd.Array[kd.vec3], b: kd.Array[kd.vec3], x: kd.Array[kd.f32],",
            "      out: kd.Array[kd.vec3], s: kd.Array[kd.f32]):",
            "    for i in kd.prange(a.shape[0]):",
            "        u = a[i]",
            "        v = b[i]",
            "        t = x[i]",
        ]
        for k in range(self.draw(st.integers(1, 3))):
            if self.draw(st.booleans()):
                lines.append(f"        w{k} = kd.clamp({self.vector(2)}, -100.0, 100.0)")
                self.vectors.append(f"w{k}")
            else:
                lines.append(f"        r{k} = kd.clamp({self.scalar(2)}, -100.0, 100.0)")
                self.scalars.append(f"r{k}")
            if self.draw(st.integers(0, 3)) == 0:
                target = self.pick(self.vectors[2:] or ["u"])
                lines.append(f"        {target}.{self.pick(['x', 'y', 'z'])} = {self.scalar(1)}")
        lines.append(f"        out[i] = kd.clamp({self.vector(2)}, -100.0, 100.0)")
        lines.append(f"        s[i] = kd.clamp({self.scalar(2)}, -100.0, 100.0)")
        return "\n".join(lines) + "\n"


@st.composite
def vector_programs(draw):
    return VectorExpressionGenerator(draw).program()


@st.composite
def vector_inputs(draw):
    n = draw(st.integers(1, 30))
    values = st.floats(-4, 4, width=32, allow_nan=False, allow_infinity=False)
    flat = draw(st.lists(values, min_size=7 * n, max_size=7 * n))
    data = np.array(flat, np.float32)
    return data[:3 * n].reshape(n, 3), data[3 * n:6 * n].reshape(n, 3), data[6 * n:]


@fuzz_settings(25)
@given(vector_programs(), vector_inputs())
def test_random_vector_expressions(source, inputs):
    kernel = kernel_from_source(source, prefix="vecprog")
    a, b, x = inputs
    args = (a, b, x, np.zeros_like(a), np.zeros_like(x))
    python_args = clone(args)
    with np.errstate(all="ignore"):
        kernel.python(*python_args)
    kernel(*args)
    try:
        for k in (3, 4):
            assert_same(args[k], python_args[k], rtol=1e-4, atol=1e-4, what=("out", "s")[k - 3])
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- program ---\n{source}") from None
