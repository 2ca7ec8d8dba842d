"""The expressions of random programs: leaves (arrays, parameters, literals, state),
arithmetic with NumPy 2 typing, conditions, casts, math, calls of generated funcs, and
indexed loads at indices that may be negative."""

from kdsl_random_types import WEAK_FLOAT, WEAK_INT, coerce, is_float, is_weak, promote


class ExpressionGenerator:
    """The expression half of ``ProgramGenerator``, which draws one kernel's source. ``kind`` is "int" (integers only), "exact" (floats and
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

