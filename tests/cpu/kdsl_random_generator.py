"""The statements and whole kernels of random programs (see test_cpu_random_programs.py):
assignments, if/elif/else, serial for and while loops with break and continue, @kd.func
helpers with several returns, and serial or parallel loops over the elements that read,
update or reduce into the state; with the hypothesis strategies that draw them."""

from hypothesis import strategies as st
from kdsl_random_expressions import ExpressionGenerator
from kdsl_random_types import WEAK_FLOAT, WEAK_INT, bounded, coerce, is_float, promote


class ProgramGenerator(ExpressionGenerator):
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
