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
- ``python tests/cpu/test_cpu_random_programs.py 3000 --seed 1`` runs 3000 programs of
  every kind, reports every failure with its program and inputs, and a summary;
  ``--start N`` with a count of N + 1 reruns program N alone; ``--cuda`` also runs each
  program on the CUDA device (``KDSL_TEST_CUDA`` chooses a GPU or the emulator).
"""

import kdsl_cuda_testing as cuda_testing
import numpy as np
from hypothesis import Phase, given, reject, settings
from hypothesis import strategies as st
from kdsl_cpu_util import assert_same, clone, fuzz_settings, kernel_from_source

PROGRAMS = fuzz_settings(40)
MIXED = fuzz_settings(12)

# --- NumPy 2 typing of the generated values --------------------------------------------

WEAK_INT, WEAK_FLOAT = "int", "float"
_NUMPY = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}
_BY_DTYPE = {np.dtype(v): k for k, v in _NUMPY.items()}


def is_weak(t):
    return t in (WEAK_INT, WEAK_FLOAT)


def is_float(t):
    return t in (WEAK_FLOAT, "f32", "f64")


def promote(a, b):
    if is_weak(a) and is_weak(b):
        return WEAK_FLOAT if WEAK_FLOAT in (a, b) else WEAK_INT
    if is_weak(a):
        a, b = b, a
    if is_weak(b):
        return a if b == WEAK_INT or is_float(a) else "f64"
    return _BY_DTYPE[np.result_type(_NUMPY[a], _NUMPY[b])]


def coerce(src, t_from, t_to):
    """Source text converting a bounded value of type t_from to type t_to."""
    if t_from == t_to:
        return src
    if t_to == WEAK_FLOAT:
        return f"float({src})"
    if t_to == WEAK_INT:
        return f"int(kd.clamp({src}, -1e6, 1e6))" if is_float(t_from) else f"int({src})"
    if is_weak(t_from):
        # kd.f64(0.5) stays weak in kdsl (a bug, see test_cpu_arithmetic.py): a Python
        # scalar becomes strong by arithmetic with a typed zero instead
        src, t_from = (f"({src} + zf64)", "f64") if is_float(t_from) else (f"({src} + zi64)", "i64")
        if t_from == t_to:
            return src
    if is_float(t_from) and not is_float(t_to):
        src = f"kd.clamp({src}, -1e6, 1e6)"
    return f"kd.{t_to}({src})"


def bounded(src, t):
    """Keeps an assigned value bounded, in its own type."""
    if t == WEAK_INT:
        return f"({src}) % 997"
    if t == WEAK_FLOAT:
        return f"({src}) % 1000.0"
    if is_float(t):
        return f"kd.clamp({src}, -1e6, 1e6)"
    return f"({src}) % 100003"


# --- the generator ----------------------------------------------------------------------


class ProgramGenerator:
    """Draws one kernel's source. ``kind`` is "int" (integers only), "exact" (floats and
    integers, exactly rounded operations only) or "fast" (adds transcendental functions)."""

    def __init__(self, integer, kind, serial):
        self.integer = integer  # integer(lo, hi): a drawn integer in [lo, hi]
        self.kind = kind
        self.serial = serial
        self.lines = []
        self.scope = {}  # variable name -> type
        self.counter = 0
        self.loop_depth = 0  # serial loops inside the element loop
        self.func_params = None  # inside a generated @kd.func: its (name, type) parameters
        self.funcs = []  # generated funcs: (name, parameter types, result type)
        self.read_only = set()  # state a parallel loop reads but does not reduce into

    # helpers
    def pick(self, options):
        return options[self.integer(0, len(options) - 1)]

    def chance(self, p_percent):
        return self.integer(0, 99) < p_percent

    def assignable(self, scope):
        """The names in ``scope`` a statement may assign (not the state a parallel loop
        reads)."""
        return [name for name in scope if name not in self.read_only]

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    # leaves
    def leaf(self):
        literal = (str(self.integer(-9, 9)), WEAK_INT)
        float_literal = (self.pick(["0.5", "0.1", "1.5", "2.25", "-0.75", "3.7", "1e-3"]),
                         WEAK_FLOAT)
        if self.func_params is not None:
            options = list(self.func_params) + [literal]
            if self.kind != "int":
                options.append(float_literal)
        else:
            if self.chance(12):
                return self.indexed_load()
            options = [("n[i]", "i64"), ("m[i]", "i32"), ("kk", WEAK_INT), ("i", WEAK_INT),
                       literal]
            if self.kind != "int":
                options += [("x[i]", self.x_type), ("y[i]", "f64"), ("a", WEAK_FLOAT),
                            float_literal, ("float(n[i])", WEAK_FLOAT), ("int(x[i])", WEAK_INT),
                            ("kd.f32(y[i])", "f32"), ("kd.i64(x[i])", "i64")]
        names = list(self.scope)
        if names and self.chance(45):
            name = self.pick(names)
            return name, self.scope[name]
        return self.pick(options)

    def index(self):
        """An index in [-size, size) for any i in [-size, size): negative ones count from
        the end of the array."""
        ints = [name for name, t in self.scope.items() if not is_float(t)]
        forms = ["-1 - i", "i % size - size", "(kk * 3 - i) % (2 * size) - size",
                 "n[i] % (2 * size) - size", "m[i] % size - size", "-size", "size - 1 + zi64"]
        if ints:
            forms.append(f"{self.pick(ints)} % (2 * size) - size")
        return self.pick(forms)

    def indexed_load(self):
        arrays = [("n", "i64"), ("m", "i32")]
        if self.kind != "int":
            arrays += [("x", self.x_type), ("y", "f64")]
        if self.serial:  # what earlier iterations and loops wrote (a race in parallel)
            column = self.integer(-4, 3)
            arrays += [(f"iout[{self.index()}, {column}]", "i64")]
            if self.kind != "int":
                arrays += [(f"out[{self.index()}, {column}]", "f64")]
        name, t = self.pick(arrays)
        return (name if "[" in name else f"{name}[{self.index()}]"), t

    def int_source(self):
        ints = [(name, t) for name, t in self.scope.items() if not is_float(t)]
        return self.pick(ints) if ints and self.chance(60) else self.leaf_int()

    def histogram_update(self, indent):
        """An update of hist (7 int64 bins) at an index in [-7, 7): atomic in a parallel
        loop."""
        src, _ = self.int_source()
        at = f"({src}) % 14 - 7"
        value, _ = self.int_source()
        form = self.integer(0, 5)
        if form < 3:
            self.emit(indent, f"hist[{at}] {'+-'[form % 2]}= ({value}) % 100")
        else:
            kind = ["add", "max", "min"][form - 3]
            self.emit(indent, f"kd.atomic_{kind}(hist, {at}, ({value}) % 100)")

    # expressions
    def expr(self, depth):
        if depth <= 0 or self.chance(25):
            return self.leaf()
        forms = ["add", "sub", "mul", "div", "neg", "abs", "minmax", "cond", "where", "intdiv",
                 "mod", "bits", "cast"]
        if self.kind != "int":
            forms += ["sqrt", "floor", "fmod", "mul", "add"]
        if self.kind == "fast":
            forms += ["sin", "tanh", "exp", "cos"]
        if self.funcs and self.func_params is None:
            forms += ["call", "call"]
        form = self.pick(forms)
        if form == "call":
            name, param_types, result_type = self.pick(self.funcs)
            args = []
            for t in param_types:
                src, ts = self.expr(depth - 1)
                args.append(coerce(src, ts, t))
            return f"{name}({', '.join(args)}, zi64, zf64)", result_type
        a, ta = self.expr(depth - 1)
        if form in ("add", "sub", "mul"):
            b, tb = self.expr(depth - 1)
            return f"({a} {dict(add='+', sub='-', mul='*')[form]} {b})", promote(ta, tb)
        if form == "div":
            b, tb = self.expr(depth - 1)
            divisor_type = promote(tb, WEAK_INT)
            t = promote(ta, divisor_type)
            return f"({a} / (abs({b}) + 1))", (t if is_float(t) else
                                                WEAK_FLOAT if is_weak(t) else "f64")
        if form == "neg":
            return f"(-{a})", ta
        if form == "abs":
            return f"abs({a})", ta
        if form == "minmax":
            b, tb = self.expr(depth - 1)
            if is_weak(ta) and is_weak(tb):  # NumPy makes min of two Python scalars strong
                return f"({a} + {b})", promote(ta, tb)
            return f"kd.{self.pick(['min', 'max'])}({a}, {b})", promote(ta, tb)
        if form in ("cond", "where"):
            b, tb = self.expr(depth - 1)
            c = self.condition(depth - 1)
            t = promote(ta, tb)
            a, b = coerce(a, ta, t), coerce(b, tb, t)
            if form == "cond":
                return f"({a} if {c} else {b})", t
            return f"kd.where({c}, {a}, {b})", t
        if form == "intdiv":
            op = self.pick(["//", "%"])
            if is_float(ta):
                divisors = [("0.1", WEAK_FLOAT), ("0.5", WEAK_FLOAT), ("-0.75", WEAK_FLOAT),
                            ("3.0", WEAK_FLOAT)]
                if self.func_params is None:
                    divisors.append(("(abs(y[i]) + 0.25)", "f64"))
                divisor, td = self.pick(divisors)
                return f"({a} {op} {divisor})", promote(ta, td)
            if self.chance(50):
                return f"({a} {op} {self.pick(['2', '3', '7', '-2', '-3', '-4', '9'])})", ta
            b, tb = self.expr(depth - 1)
            if is_float(tb):
                b, tb = self.leaf_int()
            divisor = f"(abs({b}) % 9 + 1)"
            return f"({a} {op} {divisor})", promote(ta, tb)
        if form == "mod":
            if is_float(ta):
                return f"({a} % {self.pick(['0.5', '1.5', '2.25', '-0.75', '3.0'])})", ta
            return f"({a} % {self.pick(['5', '-3', '11'])})", ta
        if form == "bits":
            if is_float(ta):
                return f"({a} - 1)", ta
            b, tb = self.expr(depth - 1)
            if is_float(tb):
                return f"({a} >> 1)", ta
            return f"({a} {self.pick(['&', '|', '^'])} {b})", promote(ta, tb)
        if form == "cast":
            targets = ["i32", "i64"] + (["f32", "f64", WEAK_FLOAT] if self.kind != "int" else [])
            t = self.pick(targets)
            return coerce(f"({a})" if not a.startswith("(") else a, ta, t), t
        if form in ("sqrt", "floor", "sin", "tanh", "exp", "cos"):
            if is_weak(ta):  # kd.* of a Python scalar is weak in kdsl, strong in NumPy
                return f"({a} * 0.5)", promote(ta, WEAK_FLOAT)
            t = ta if is_float(ta) else "f64"
            if form == "sqrt":
                return f"kd.sqrt(abs({a}))", t
            if form == "floor":
                return f"kd.{self.pick(['floor', 'ceil'])}({a})", t
            if form == "exp":
                return f"kd.exp(kd.clamp({a}, -20.0, 20.0))", t
            if form in ("sin", "cos"):
                # bounded: an argument one ulp apart (NumPy's float32 exp is not always
                # correctly rounded) would change sin/cos of a large one by far more than
                # the tolerance, with neither side wrong
                return f"kd.{form}(kd.clamp({a}, -100.0, 100.0))", t
            return f"kd.{form}({a})", t
        if form == "fmod":
            return f"({a} % {self.pick(['0.5', '2.25', '-1.5'])})", promote(ta, WEAK_FLOAT)
        raise AssertionError(form)

    def leaf_int(self):
        if self.func_params is not None:
            ints = [(n, t) for n, t in self.func_params if not is_float(t)]
            return self.pick(ints or [("3", WEAK_INT)])
        return self.pick([("n[i]", "i64"), ("m[i]", "i32"), ("kk", WEAK_INT)])

    def condition(self, depth):
        form = self.pick(["cmp", "cmp", "chain", "and", "or", "not"] if depth > 0 else
                         ["cmp", "chain"])
        if form in ("cmp", "chain"):
            a, _ = self.expr(min(depth, 1))
            b, _ = self.expr(min(depth, 1))
            op = self.pick(["<", "<=", ">", ">=", "!=", "=="])
            if form == "chain":
                c, _ = self.expr(0)
                return f"({a} {op} {b} {self.pick(['<', '>', '!='])} {c})"
            return f"({a} {op} {b})"
        if form == "not":
            return f"(not {self.condition(depth - 1)})"
        return f"({self.condition(depth - 1)} {form} {self.condition(depth - 1)})"

    # statements
    def assign(self, indent, depth):
        src, t = self.expr(depth)
        name = self.fresh()
        self.emit(indent, f"{name} = {bounded(src, t)}")
        self.scope[name] = t

    def update(self, indent, depth):
        """Reassigns an existing variable, keeping its type."""
        if not self.assignable(self.scope):
            return self.assign(indent, depth)
        name = self.pick(self.assignable(self.scope))
        t = self.scope[name]
        src, ts = self.expr(depth)
        self.emit(indent, f"{name} = {bounded(coerce(src, ts, t), t)}")

    def if_statement(self, indent, depth):
        cond = self.condition(2)
        name = self.fresh()
        branches = [self.expr(depth) for _ in range(self.integer(2, 3))]
        t = branches[0][1]
        for _, tb in branches[1:]:
            t = promote(t, tb)
        conds = [cond] + [self.condition(1) for _ in branches[2:]]
        keywords = ["if"] + ["elif"] * (len(branches) - 2) + ["else"]
        for k, (keyword, (src, tb)) in enumerate(zip(keywords, branches)):
            self.emit(indent, f"{keyword} {conds[k]}:" if keyword != "else" else "else:")
            self.emit(indent + 1, f"{name} = {bounded(coerce(src, tb, t), t)}")
            if self.assignable(self.scope) and self.chance(30):
                self.update(indent + 1, 1)
        self.scope[name] = t

    def inner_loop(self, indent, depth):
        if self.loop_depth >= 1:
            return self.assign(indent, depth)
        count = self.pick(["3", "(abs(n[i]) % 4)", "(kk % 5)", "0", "1"])
        if not self.serial and self.chance(30):  # also a loop nested below an if
            self.emit(indent, "if kk > -1000000000:")
            indent += 1
        j = self.fresh("j")
        self.emit(indent, f"for {j} in range({count}):")
        self.loop_depth += 1
        outer_scope = dict(self.scope)
        self.scope[j] = WEAK_INT
        for _ in range(self.integer(1, 3)):
            choice = self.integer(0, 9)
            if choice < 3 and self.assignable(outer_scope):
                name = self.pick(self.assignable(outer_scope))
                t = outer_scope[name]
                src, ts = self.expr(depth)
                self.emit(indent + 1, f"{name} = {bounded(coerce(src, ts, t), t)}")
            elif choice < 5:
                self.emit(indent + 1, f"if {self.condition(1)}:")
                self.emit(indent + 2, self.pick(["break", "continue"]))
            else:
                self.assign(indent + 1, depth)
        if self.assignable(outer_scope):  # one carried update, so the loop does something visible
            name = self.pick(self.assignable(outer_scope))
            t = outer_scope[name]
            src, ts = self.expr(1)
            self.emit(indent + 1, f"{name} = {bounded(coerce(src, ts, t), t)}")
        self.loop_depth -= 1
        self.scope = outer_scope  # names defined inside are not used after the loop

    def while_loop(self, indent, depth):
        """A bounded while loop whose counter is used after it."""
        if self.loop_depth >= 1:
            return self.assign(indent, depth)
        w = self.fresh("w")
        self.emit(indent, f"{w} = 0")
        self.emit(indent, f"while {w} < {self.integer(0, 4)} and {self.condition(1)}:")
        self.emit(indent + 1, f"{w} += 1")
        self.loop_depth += 1
        outer_scope = dict(self.scope)
        for _ in range(self.integer(1, 3)):
            choice = self.integer(0, 9)
            if choice < 4 and self.assignable(outer_scope):
                name = self.pick(self.assignable(outer_scope))
                t = outer_scope[name]
                src, ts = self.expr(depth)
                self.emit(indent + 1, f"{name} = {bounded(coerce(src, ts, t), t)}")
            elif choice < 6:
                self.emit(indent + 1, f"if {self.condition(1)}:")
                self.emit(indent + 2, self.pick(["break", "continue"]))
            else:
                self.assign(indent + 1, depth)
        self.loop_depth -= 1
        self.scope = outer_scope
        self.scope[w] = WEAK_INT

    def func(self):
        """A @kd.func of two parameters with several returns, one from inside a loop."""
        name = self.fresh("f")
        types = ["i32", "i64", WEAK_INT] + (["f32", "f64", WEAK_FLOAT] if self.kind != "int" else [])
        params = [("p", self.pick(types)), ("q", self.pick(types))]
        saved = self.lines, self.scope
        self.lines, self.scope, self.func_params = [], {}, params
        self.emit(0, "@kd.func")
        self.emit(0, f"def {name}(p, q, zi64, zf64):")
        returns = []  # (line index, indent, source, type), written once the type is known

        def add_return(indent):
            src, t = self.expr(2)
            returns.append((len(self.lines), indent, src, t))
            self.emit(indent, "")

        for _ in range(self.integer(0, 2)):
            self.assign(1, 2)
        self.emit(1, f"if {self.condition(1)}:")
        add_return(2)
        if self.chance(50):
            self.assign(1, 1)
        if self.chance(60):
            j = self.fresh("j")
            self.emit(1, f"for {j} in range({self.integer(0, 3)}):")
            self.scope[j] = WEAK_INT
            self.emit(2, f"if {self.condition(1)}:")
            add_return(3)
            del self.scope[j]
        add_return(1)
        result = returns[0][3]
        for r in returns[1:]:
            result = promote(result, r[3])
        for line, indent, src, t in returns:
            self.lines[line] = "    " * indent + f"return {bounded(coerce(src, t, result), result)}"
        text = self.lines
        self.lines, self.scope = saved
        self.func_params = None
        self.funcs.append((name, [t for _, t in params], result))
        return "\n".join(text) + "\n\n\n"

    def body(self, indent, statements):
        for _ in range(statements):
            form = self.integer(0, 10)
            if form < 4:
                self.assign(indent, 2)
            elif form < 6:
                self.if_statement(indent, 2)
            elif form < 7:
                self.update(indent, 2)
            elif form < 8:
                self.inner_loop(indent, 1)
            elif form < 9:
                self.while_loop(indent, 1)
            else:
                self.emit(indent, f"if {self.condition(1)}:")
                if self.serial and self.chance(50):
                    self.emit(indent + 1, "break")
                else:
                    self.emit(indent + 1, "continue")

    def program(self, fastmath):
        """``serial``: True (serial loops), False (parallel loops) or None (a mix, in a
        time loop at times)."""
        mode = self.serial
        self.x_type = self.pick(["f32", "f64"])
        funcs = "".join(self.func() for _ in range(self.integer(0, 2)))
        decorator = "@kd.kernel" if fastmath else "@kd.kernel(fastmath=False)"
        self.emit(0, funcs + f"# x: {self.x_type}")
        self.emit(0, decorator)
        self.emit(0, "def k(x, y, n, m, a, kk, out, iout, hist):")
        self.emit(1, "count = 0")
        self.emit(1, "zi64 = n[0] * 0")
        self.emit(1, "zf64 = y[0] * 0.0")
        self.emit(1, "total = zi64")
        self.emit(1, "size = x.shape[0]")
        state = {}
        for _ in range(self.integer(0, 3)):
            name = self.fresh("s")
            t = self.pick(["f32", "f64", "i32", "i64", WEAK_INT] if self.kind != "int" else
                          ["i32", "i64", WEAK_INT])
            self.emit(1, f"{name} = {coerce(str(self.integer(-3, 3)), WEAK_INT, t)}")
            state[name] = t
        indent = 1
        phases = 1 if mode is not None else self.integer(1, 3)
        if mode is None and self.chance(40):
            self.emit(1, f"for t in range({self.integer(1, 2)}):")
            indent = 2
        for _ in range(phases):
            self.phase(indent, mode if mode is not None else self.chance(50), state)
        self.emit(1, f"return ({', '.join(['count', 'total'] + list(state))},)")
        return "\n".join(self.lines) + "\n"

    def phase(self, indent, serial, state):
        """One loop over i in [-size, size): a serial one reads and updates the state, a
        parallel one reduces into it."""
        self.serial = serial
        ranges = ["size", "size", "-size, 0", "0, size, 2"] + (["size - 1, -1, -1"] if serial else [])
        self.emit(indent, f"for i in {'range' if serial else 'kd.prange'}({self.pick(ranges)}):")
        # a parallel loop reduces into some of the state and may read the rest
        reduced = state if serial else {n: t for n, t in state.items() if self.chance(60)}
        self.read_only = set() if serial else set(state) - set(reduced)
        self.scope = {n: t for n, t in state.items() if serial or n not in reduced}
        self.body(indent + 1, self.integer(1, 6))
        body = indent + 1
        floats = [v for v, t in self.scope.items() if is_float(t) and v not in state]
        ints = [v for v, t in self.scope.items() if not is_float(t) and v not in state]
        for array, names in (("out", floats), ("iout", ints)):
            for k, v in enumerate(names[-4:]):
                at = f"{self.store_index()}, {self.pick([str(k), str(k - 4)])}"
                self.emit(body, f"{array}[{at}] {self.pick(['=', '=', '+='])} {v}")
        if self.chance(40):
            self.histogram_update(body)
        self.emit(body, "count += 1")
        if ints:
            self.emit(body, f"total += kd.i64({ints[-1]}) % 1000")
        for name, t in reduced.items():
            src, ts = self.expr(1)
            if serial:
                self.emit(body, f"{name} = {bounded(coerce(src, ts, t), t)}")
            elif not is_float(t) and self.chance(50):
                self.emit(body, f"{name} += {coerce(f'({src}) % 1000', ts, t)}")
            else:  # float sums would depend on the order of the threads
                self.emit(body, f"{name} = {self.pick(['min', 'max'])}({name}, "
                                f"{bounded(coerce(src, ts, t), t)})")
        self.scope = dict(state)
        self.read_only = set()

    def store_index(self):
        """An index of i's own row: the iterations of a parallel loop write apart."""
        return self.pick(["i", "i", "-1 - i", "i % size - size"])


@st.composite
def programs(draw, kind, serial, fastmath=False):
    return ProgramGenerator(lambda lo, hi: draw(st.integers(lo, hi)), kind, serial).program(fastmath)


@st.composite
def program_inputs(draw):
    size = draw(st.integers(1, 40))
    finite = dict(allow_nan=False, allow_infinity=False)
    xs = draw(st.lists(st.floats(-100, 100, **finite), min_size=size, max_size=size))
    ys = draw(st.lists(st.floats(-100, 100, **finite), min_size=size, max_size=size))
    ns = draw(st.lists(st.integers(-10_000, 10_000), min_size=size, max_size=size))
    ms = draw(st.lists(st.integers(-100_000, 100_000), min_size=size, max_size=size))
    a = draw(st.floats(-10, 10, **finite))
    kk = draw(st.integers(-20, 20))
    return xs, ys, ns, ms, a, kk


class InvalidProgram(Exception):
    """The program's own Python fails on these inputs."""


def run_generated(source, inputs, rtol=0.0, atol=0.0):
    """``run_program`` inside a hypothesis test: an invalid program is rejected."""
    try:
        run_program(source, inputs, rtol, atol)
    except InvalidProgram:
        reject()


def run_program(source, inputs, rtol=0.0, atol=0.0, device=False):
    """Runs the program compiled and as Python on the same inputs; ``device``: also on
    the CUDA device (emulated where there is no GPU)."""
    kernel = kernel_from_source(source, prefix="prog")
    xs, ys, ns, ms, a, kk = inputs
    x_dtype = np.float32 if "# x: f32" in source else np.float64
    args = (np.array(xs, x_dtype), np.array(ys), np.array(ns, np.int64), np.array(ms, np.int32),
            a, kk, np.full((len(xs), 4), -1.0), np.full((len(xs), 4), -1, np.int64),
            np.arange(7, dtype=np.int64) * 3 - 9)
    python_args = clone(args)
    device_args = clone(args)
    with np.errstate(all="ignore"):
        try:
            expected = kernel.python(*python_args)
        except OverflowError as exc:  # NumPy 2 refuses a Python int too large for the other
            raise InvalidProgram(exc) from None  # operand: no meaning, not a kdsl bug
    actual = kernel(*args)
    try:
        assert_same(actual, expected, rtol, atol)
        for k in (6, 7, 8):
            assert_same(args[k], python_args[k], rtol, atol, what=("out", "iout", "hist")[k - 6])
        if device:
            cuda_testing.check_on_device(kernel, device_args, expected, python_args, rtol, atol)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- program ---\n{source}") from None


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


# --- random vector expressions ------------------------------------------------------------


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


# --- the long mode, by hand -----------------------------------------------------------------


def random_inputs(rng):
    """Inputs drawn as ``program_inputs`` draws them, from a ``random.Random``."""
    size = rng.randint(1, 40)
    xs = [rng.uniform(-100, 100) for _ in range(size)]
    ys = [rng.uniform(-100, 100) for _ in range(size)]
    ns = [rng.randint(-10_000, 10_000) for _ in range(size)]
    ms = [rng.randint(-100_000, 100_000) for _ in range(size)]
    return xs, ys, ns, ms, rng.uniform(-10, 10), rng.randint(-20, 20)


def random_program(seed, number):
    """Program ``number`` of a hunt from ``seed``: (source, inputs, tolerance)."""
    import random

    rng = random.Random(f"{seed}-{number}")
    # exactly rounded programs only: with fast-math, an int() of a float may differ by one
    kind = rng.choice(["int", "exact", "exact"])
    mode = rng.choice([True, False, None, None])
    return ProgramGenerator(rng.randint, kind, mode).program(False), random_inputs(rng), 0.0


def hunt(count, seed=0, start=0, device=False):
    """Runs programs ``start`` to ``count - 1`` of ``seed``; prints each failure (a
    mismatch, or an error of the compiled kernel on a program Python runs) and a summary.
    Returns the number of failures."""
    import collections
    import sys
    import time

    failures = collections.Counter()
    began = time.time()
    for number in range(start, count):
        source, inputs, tolerance = random_program(seed, number)
        try:
            run_program(source, inputs, rtol=tolerance, atol=tolerance, device=device)
        except InvalidProgram:
            failures["(not counted) the program's Python raised OverflowError"] += 0
        except Exception as exc:  # every failure is reported, the hunt goes on
            message = f"{type(exc).__name__}: {exc}"
            headline = message.splitlines()[0][:100]
            failures[headline] += 1
            print(f"=== program {number} (seed {seed}) fails: {headline}\n{message}\n"
                  f"--- inputs ---\n{inputs!r}\n", flush=True)
        if (number + 1) % 100 == 0:
            print(f"... {number + 1 - start} programs, {sum(failures.values())} failures, "
                  f"{time.time() - began:.0f} s", file=sys.stderr, flush=True)
    print(f"{count - start} programs, {sum(failures.values())} failures")
    for headline, times in failures.most_common():
        print(f"{times:6d}  {headline}")
    return sum(failures.values())


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Hunt for kdsl bugs with random kernels "
                                                 "compared against their own Python.")
    parser.add_argument("count", type=int, nargs="?", default=1000, help="programs to run")
    parser.add_argument("--seed", type=int, default=0, help="a different seed, other programs")
    parser.add_argument("--start", type=int, default=0,
                        help="the first program (to reproduce one: --start N with count N + 1)")
    parser.add_argument("--cuda", action="store_true",
                        help="also run each program on the CUDA device (emulated without a GPU)")
    arguments = parser.parse_args()
    raise SystemExit(1 if hunt(arguments.count, arguments.seed, arguments.start, arguments.cuda)
                     else 0)
