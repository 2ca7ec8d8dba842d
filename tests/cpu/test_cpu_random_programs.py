"""Random programs: hypothesis builds small kernels as Python source (expressions with
NumPy 2 typing, if/elif/else, conditional expressions, short-circuit and chained
conditions, serial for and while loops with break and continue, @kd.func helpers with
several returns, loop-carried state, reductions, parallel and serial element loops, one
after the other and inside a serial time loop, loads and stores at indices that may be
negative, histogram updates and atomics at such indices), kdsl compiles them, and each
compiled kernel must agree with its own function run as plain Python on random inputs.

The generator tracks NumPy 2 types (Python int/float literals are weak) so that every
program has one meaning: branches of a conditional are given the same type (Python would
otherwise let a variable's type depend on the branch taken), loop-carried variables keep
their type, and values are kept bounded (no inf/NaN, no Python-int growth beyond int64).
A parallel loop reduces into some of the state (integer sums, min and max: results that
do not depend on the order of the threads) and reads the rest; its iterations write
apart.

Integer programs and float programs compiled with ``fastmath=False`` must agree bit for
bit (every operation used is exactly rounded); float programs with the default fast-math
flags and transcendental functions agree to a tolerance.

Constructs that once hit bugs (now regression tests elsewhere in tests/cpu) are avoided here
(they would mask new failures): casts of Python scalars such as ``kd.f64(0.5)``, math
functions of Python scalars, and arithmetic on bools.

In CI each test runs a few dozen programs. To hunt for bugs:

- ``KDSL_FUZZ_EXAMPLES=500 pytest tests/cpu/test_cpu_random_programs.py`` runs that many
  fresh programs per test (hypothesis stops at the first failure and shrinks it);
- ``python tests/cpu/kdsl_random_programs.py 3000 --seed 1`` runs 3000 programs of
  every kind, reports every failure with its program and inputs, and a summary;
  ``--start N`` with a count of N + 1 reruns program N alone; ``--cuda`` also runs each
  program on the CUDA device (``KDSL_TEST_CUDA`` chooses a GPU or the emulator).

The typing rules are in kdsl_random_types.py, the expressions in
kdsl_random_expressions.py, the statements and kernels in kdsl_random_generator.py, the
runner and the hunt in kdsl_random_programs.py; random vector expressions are tested in
test_cpu_random_vector_expressions.py.
"""

from hypothesis import Phase, given, settings
from kdsl_cpu_util import fuzz_settings
from kdsl_random_generator import program_inputs, programs
from kdsl_random_programs import random_program, run_generated

PROGRAMS = fuzz_settings(40)
MIXED = fuzz_settings(12)


@PROGRAMS
@given(programs("int", serial=False), program_inputs())
def test_random_integer_programs_parallel(source, inputs):
    run_generated(source, inputs)


@PROGRAMS
@given(programs("int", serial=True), program_inputs())
def test_random_integer_programs_serial(source, inputs):
    run_generated(source, inputs)


@PROGRAMS
@given(programs("exact", serial=False), program_inputs())
def test_random_float_programs_exact_parallel(source, inputs):
    run_generated(source, inputs)


@PROGRAMS
@given(programs("exact", serial=True), program_inputs())
def test_random_float_programs_exact_serial(source, inputs):
    run_generated(source, inputs)


@MIXED
@given(programs("int", serial=None), program_inputs())
def test_random_integer_programs_mixing_serial_and_parallel_loops(source, inputs):
    run_generated(source, inputs)


@MIXED
@given(programs("exact", serial=None), program_inputs())
def test_random_float_programs_mixing_serial_and_parallel_loops(source, inputs):
    run_generated(source, inputs)


@fuzz_settings(25)
@given(programs("fast", serial=True, fastmath=True), program_inputs())
def test_random_float_programs_fastmath(source, inputs):
    run_generated(source, inputs, rtol=1e-4, atol=1e-4)


def test_generator_produces_varied_programs():
    """A smoke test of the generator itself: its programs use the constructs it claims."""
    seen = []

    @settings(max_examples=150, database=None, deadline=None, phases=[Phase.generate])
    @given(programs("exact", serial=True))
    def collect(source):
        seen.append(source)

    collect()
    text = "\n".join(seen)
    for needle in ("break", "continue", "elif", "kd.where", " if ", "for j", "//", "kd.f32(",
                   "kd.min(", "kd.sqrt(", "% 0.5", "int(", "float(", "<", "and", "not",
                   "@kd.func", "return", "while", ", zi64, zf64)"):
        assert needle in text, needle
    mixed = "\n".join(random_program(0, k)[0] for k in range(150))
    for needle in ("kd.prange(", "range(size - 1, -1, -1)", "kd.prange(-size, 0)",
                   "for t in range(", "- size]", "[-1 - i, ", "hist[", "kd.atomic_max(hist",
                   " = min(s", " = max(s", "+= kd.i", "] += v", "iout[-", "out[-"):
        assert needle in mixed, needle
