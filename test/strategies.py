"""Hypothesis strategies for random, well-formed, terminating Bril programs.

Programs are generated as structured code (blocks, ifs, counted loops,
two-entry loops, speculation regions, memory regions, calls, values sent
through ssa2 shadow variables with `set`/`get` and through `any` variables and
ptr<any> cells) and lowered
straight to Bril instructions, so every program terminates by construction:

* loops count a read-only counter up to a constant trip count (some also stop
  early at an input-dependent bound);
* functions only call functions generated before them, plus bounded
  self-recursion on a read-only depth argument;
* loops that divide toward zero (`w = w / k` while `w < 0`, or until
  `w == 0`) also stop after a constant number of rounds;
* a static cost estimate (dynamic instructions, trip counts multiplied in)
  keeps every run to a few thousand instructions.

Integer range facts (what an engine may infer from a branch) get programs of
their own: sign tests comparing a variable with a constant on either side
(`lt zero x`, `ge x zero`), sometimes negated (`not`) or copied (`id`),
whose two edges meet again (one side often defining variables the other does
not), followed by a `div` of the compared variable, by constants of either
sign and by variables (in a branch, by the compared variable itself where the
test proves it non-zero); loops dividing a negative value toward zero; and
@main int arguments that are often negative.

Programs are also well-formed and well-typed: every variable has one type in
its function and is only read where it is defined on every path; memory
regions are initialised before reading, only indexed in bounds (also by
callees they are lent to, through pointer arguments), and freed; speculation
regions contain no call or ret and are never left by a jump.

Run-time errors happen only where intended (a division by any variable, an
int2char of a computed code point), and rarely; the properties compare error
behaviour too.  `Limits` switches features on and off: e.g. reads of maybe
undefined variables for engines, or only what the reference interpreter
agrees on (it reads JSON integers as doubles and ends all speculation at an
inner commit).  With maybe-undefined reads on, a shadow sometimes receives
`undef`, whose later use is the interpreter's run-time error.

The JSON is in the canonical shape `bril2json` produces (no empty `args`,
no `type` on void functions), so `parse(format(p)) == p` is a fair property.
"""

from dataclasses import dataclass, field

from hypothesis import strategies as st

from bril.ir.ops import INT_MAX, INT_MIN

BASE_TYPES = ("int", "bool", "float", "char")

# 64-bit edge values: wrap-around, sign, and the 2^53 boundary where doubles
# stop holding every integer.
INT_EDGES = (0, 1, -1, 2, -2, 3, 7, -8, 10, 100, 255, -256, 1 << 31, -(1 << 31),
             (1 << 32) + 1, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1, (1 << 62) + 12345,
             INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1, 6148914691236517205)
# Floats around the printing boundaries (1e-10 and 1e10 switch to exponent
# form), a value whose 17-digit rounding is an exact tie (2^-18), extremes.
FLOAT_EDGES = (0.0, -0.0, 1.0, -1.5, 0.1, 0.2, 3.0, 1e-10, 9.99999999e-11, 9999999999.5,
               1e10, -1e10, 1e21, 2.0 ** -18, 0.5, 1.7976931348623157e308, 5e-324,
               2.2250738585072014e-308, 123456.789, -2.5e-8, 1e300, 6.02e23, 1 / 3)
# Characters that stress the text format and printing: quotes, backslash,
# comment and separator characters, control characters, non-ASCII, non-BMP.
CHAR_EDGES = ("a", "Z", "0", " ", "'", "\\", "#", ";", ".", "@", "\n", "\t", "\r", "\0",
              "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f", "é", "ß", "λ", "中", "\u2028",
              "\ufeff", "😀", "\U0010ffff", "\ue000", "\ud7ff")
CODE_POINTS = (0, 10, 32, 65, 97, 127, 128, 255, 0x3bb, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF,
               0x10000, 0x1F600, 0x10FFFF)
SAFE_DIVISORS = (1, -1, 2, -2, 3, 7, -10, 1 << 32, INT_MAX, INT_MIN)
# Constants that sign tests compare with (either side), and divisors after them.
SIGN_CONSTANTS = (0, 0, 0, 1, -1, 2, -2, 10, -10, 100, INT_MAX, INT_MIN)
SIGN_DIVISORS = (10, 10, 2, 3, 7, -2, -10, 1, -1, 100, INT_MIN)
# Negative dividends: truncating division differs from floor division on them.
NEGATIVE_INTS = (-1, -2, -3, -7, -9, -10, -11, -17, -99, -100, -101, -123456,
                 -(1 << 31), -(1 << 53) - 1, INT_MIN, INT_MIN + 1)
# Comparisons: the same test with its operands swapped, and negated.
_SWAPPED = {"eq": "eq", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
_NEGATED = {"eq": None, "lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}

VAR_PREFIXES = ("v", "x_", "_t", "%v", "a.b", "Tmp")
LABEL_PREFIXES = ("L", "l_", "bb.", "_exit", "%L")
FUNC_PREFIXES = ("f", "g_", "h.", "_fn")
# Names that are keywords or builtins of Python (engines that generate Python
# source), words of the text format, or likely names inside an engine.
HOSTILE_NAMES = ("None", "True", "if", "def", "return", "lambda", "print", "len", "int",
                 "float", "bool", "range", "self", "out", "count", "env", "heap", "args",
                 "wrap64", "idiv", "BrilError", "__name__", "_", "__", "main", "ret",
                 "const", "true", "false", "nullptr", "ptr", "jmp", "br", "i", "n")

WIDE = 1 << 53          # JSON integers beyond this are not exact as doubles


def _twin(name):
    """`name` with one kind of separator swapped for another (None if unchanged)."""
    for a, b in ((".", "_"), ("%", "_"), ("_", "."), ("_", "%")):
        if a in name:
            twin = name.replace(a, b)
            if not twin[0] == "." and not twin[0].isdigit():
                return twin
    return None


@dataclass(frozen=True)
class Limits:
    """Knobs of the generator; the defaults exercise everything."""
    max_helpers: int = 3        # functions besides @main
    max_stmts: int = 5          # statements per block
    max_nesting: int = 3        # nested ifs/loops/regions
    max_trip: int = 5           # loop trip count
    max_iterations: int = 48    # product of enclosing trip counts
    budget: int = 4000          # static estimate of dynamic instructions per function
    max_recursion: int = 4      # depth argument of recursive helpers
    speculation: bool = True
    nested_speculation: bool = True   # inner commit returns to the parent (spec, not reference)
    memory: bool = True
    floats: bool = True
    chars: bool = True
    wide_ints: bool = True      # integer constants beyond 2^53 (the reference rounds them)
    bitcast: bool = True        # float2bits / bits2float (the reference lacks them)
    errors: bool = True         # rare, intended run-time errors (div by a variable, int2char)
    cr_arguments: bool = True   # '\r' as a char argument of @main (Deno mangles it)
    # Rare reads of variables defined on some paths only (or only inside a
    # speculation that may abort).  Such programs are ill-formed when the read
    # happens, so passes may do anything with them; engines must report the
    # error like the reference does.
    maybe_undefined: bool = False
    ssa2: bool = True           # shadow variables (set/get; undef with maybe_undefined)
    dynamic: bool = True        # `any` values (the dynamic extension), ptr<any> cells


DEFAULT = Limits()
# For engines: also reads of variables that may be undefined at run time.
ENGINE_TESTING = Limits(maybe_undefined=True)
# For tracers: loops that run long enough to become hot and pay for a trace.
TRACE_TESTING = Limits(max_trip=30, max_iterations=300, budget=15000)
# What the TypeScript reference interpreter agrees on (for scratch comparisons).
REFERENCE_COMPATIBLE = Limits(nested_speculation=False, wide_ints=False, bitcast=False,
                              cr_arguments=False)


@dataclass
class Signature:
    name: str
    params: list          # [(name, type)]
    ret: str | None
    cost: int             # static estimate of dynamic instructions per call
    recursive: bool = False
    sizes: dict = field(default_factory=dict)   # pointer parameter -> cells it may use


# Strategies are built once and drawn unwrapped: a generated program takes about
# a thousand draws, and building `st.integers(a, b)` again for each (a cache
# lookup, then unwrapping the lazy strategy) cost as much as the draws themselves.
# The same kinds of choice (hypothesis labels them by strategy: the examples drawn differ).
def _unwrapped(strategy):
    return getattr(strategy, "wrapped_strategy", strategy)


_INTS = {}


def ints(lo, hi):
    """st.integers(lo, hi), built once."""
    strategy = _INTS.get((lo, hi))
    if strategy is None:
        strategy = _INTS[lo, hi] = _unwrapped(st.integers(lo, hi))
    return strategy


BOOLS = _unwrapped(st.booleans())

_ANY_FLOAT = _unwrapped(st.floats(allow_nan=False, allow_infinity=False))
_ANY_CHAR = st.characters(exclude_categories=("Cs",))


def _pick(draw, seq):
    """One element of seq (shrinks toward the first); cheaper than sampled_from,
    whose strategy object would be rebuilt on every call."""
    return seq[draw(ints(0, len(seq) - 1))]


class _FunctionGen:
    """Generates one function's instructions while tracking scope facts."""

    def __init__(self, draw, limits, sig, callees, is_main):
        self.draw = draw
        self.lim = limits
        self.sig = sig
        self.callees = callees
        self.is_main = is_main
        self.instrs = []
        self.types = {}               # variable -> its one type
        self.defined = set()          # variables defined on every path to here
        self.readonly = set()         # counters, bounds, depth argument
        self.counters = {}            # loop counter -> (lo, hi) while in its body
        self.loops = []               # (continue label, break label) of enclosing loops
        self.regions = []             # (pointer, element type, size) of memory in reach
        self.owned = 0                # how many of them this code must still free
        self.in_spec = 0              # speculation depth
        self.mult = 1                 # product of enclosing trip counts
        self.cost = 0
        self.self_calls = 0
        self.nesting = 0
        self.n_vars = 0
        self.n_labels = 0
        self.var_prefix = _pick(draw, VAR_PREFIXES)
        self.label_prefix = _pick(draw, LABEL_PREFIXES)
        self.labels_used = set()
        for name, typ in sig.params:
            self.types[name] = typ
            self.defined.add(name)
            if isinstance(typ, dict):
                # Borrowed memory: at least `size` initialised cells; never freed here.
                self.regions.append((name, typ["ptr"], sig.sizes[name]))
                self.readonly.add(name)

    def pick(self, seq):
        return _pick(self.draw, seq)

    # --- emitting ------------------------------------------------------------------

    def emit(self, instr):
        self.instrs.append(instr)
        self.cost += self.mult

    def label(self, name):
        self.instrs.append({"label": name})

    def fresh_name(self, taken, prefix, counter):
        """A new name: usually prefix+N; sometimes a hostile word, or the twin of
        a taken name that differs only in '.', '%' or '_' (a sloppy mangling of
        names into another language makes the two collide)."""
        d = self.draw
        pick = d(ints(0, 9))
        if pick == 9:
            free = [n for n in HOSTILE_NAMES if n not in taken]
            if free:
                return self.pick(free)
        elif pick == 8:
            twins = sorted({_twin(n) for n in taken} - set(taken) - {None})
            if twins:
                return self.pick(twins)
        return f"{prefix}{counter}"

    def fresh_label(self):
        self.n_labels += 1
        name = self.fresh_name(self.labels_used, self.label_prefix, self.n_labels)
        self.labels_used.add(name)
        return name

    def fresh_var(self, typ):
        self.n_vars += 1
        name = self.fresh_name(self.types, self.var_prefix, self.n_vars)
        self.types[name] = typ
        return name

    def op(self, dest, typ, op, args=(), funcs=(), labels=()):
        instr = {"op": op}
        if dest is not None:
            instr["dest"] = dest
            instr["type"] = typ
        if args:
            instr["args"] = list(args)
        if funcs:
            instr["funcs"] = list(funcs)
        if labels:
            instr["labels"] = list(labels)
        self.emit(instr)
        if dest is not None:
            self.defined.add(dest)

    def const(self, typ, value, dest=None):
        dest = dest or self.fresh_var(typ)
        self.emit({"op": "const", "dest": dest, "type": typ, "value": value})
        self.defined.add(dest)
        return dest

    # --- values --------------------------------------------------------------------

    def enabled_types(self):
        return [t for t in BASE_TYPES
                if (t != "float" or self.lim.floats) and (t != "char" or self.lim.chars)]

    def literal(self, typ):
        """A constant: mostly an edge value, sometimes any value of the type."""
        d = self.draw
        edge = d(ints(0, 2)) < 2
        if typ == "int":
            if edge:
                v = self.pick(INT_EDGES) if d(BOOLS) else d(ints(-20, 20))
            else:
                v = d(ints(INT_MIN, INT_MAX))
            if not self.lim.wide_ints and abs(v) > WIDE:
                v = v % 1000
            return v
        if typ == "bool":
            return d(BOOLS)
        if typ == "float":
            return self.pick(FLOAT_EDGES) if edge else d(_ANY_FLOAT)
        return self.pick(CHAR_EDGES) if edge else d(_ANY_CHAR)

    def vars_of(self, typ):
        return sorted(v for v in self.defined if self.types.get(v) == typ)

    def operand(self, typ):
        """A defined variable of `typ`, or a new constant."""
        if self.lim.maybe_undefined and self.draw(ints(0, 79)) == 79:
            maybe = sorted(v for v, t in self.types.items() if t == typ and v not in self.defined)
            if maybe:
                return self.pick(maybe)
        pool = self.vars_of(typ)
        if pool and self.draw(ints(0, 3)) > 0:
            return self.pick(pool)
        return self.const(typ, self.literal(typ))

    def target(self, typ):
        """Where to put a new value: a fresh variable or a writable one of `typ`."""
        pool = [v for v in self.vars_of(typ) if v not in self.readonly]
        if pool and self.draw(BOOLS):
            return self.pick(pool)
        return self.fresh_var(typ)

    def value(self, typ, dest):
        """Emit an instruction computing a value of `typ` into `dest`."""
        d = self.draw
        kinds = ["const", "id"]
        if typ == "int":
            kinds += ["arith", "arith", "div"]
            if self.lim.chars:
                kinds.append("char2int")
            if self.lim.floats and self.lim.bitcast:
                kinds.append("float2bits")
        elif typ == "bool":
            kinds += ["cmp", "cmp", "logic", "not"]
            if self.lim.floats:
                kinds.append("fcmp")
            if self.lim.chars:
                kinds.append("ccmp")
        elif typ == "float":
            kinds += ["farith", "farith"] + (["bits2float"] if self.lim.bitcast else [])
        elif typ == "char":
            kinds += ["int2char"]
        kind = self.pick(kinds)
        if kind == "const":
            self.const(typ, self.literal(typ), dest)
        elif kind == "id":
            self.op(dest, typ, "id", [self.operand(typ)])
        elif kind == "arith":
            o = self.pick(["add", "sub", "mul"])
            self.op(dest, typ, o, [self.operand("int"), self.operand("int")])
        elif kind == "div":
            a = self.operand("int")
            if self.lim.errors and d(ints(0, 11)) == 11:
                # An intended, rare error: a divisor that may be zero, often one
                # that becomes zero at some loop iteration (output before it counts).
                if self.counters and d(BOOLS):
                    i = self.pick(sorted(self.counters))
                    lo, hi = self.counters[i]
                    b = self.fresh_var("int")
                    self.op(b, "int", "sub", [i, self.const("int", d(ints(lo, hi)))])
                else:
                    b = self.operand("int")
            else:
                b = self.const("int", self.pick(SAFE_DIVISORS))
            self.op(dest, typ, "div", [a, b])
        elif kind == "char2int":
            self.op(dest, typ, "char2int", [self.operand("char")])
        elif kind == "float2bits":
            self.op(dest, typ, "float2bits", [self.operand("float")])
        elif kind == "cmp":
            o = self.pick(["eq", "lt", "gt", "le", "ge"])
            self.op(dest, typ, o, [self.operand("int"), self.operand("int")])
        elif kind == "fcmp":
            o = self.pick(["feq", "flt", "fgt", "fle", "fge"])
            self.op(dest, typ, o, [self.operand("float"), self.operand("float")])
        elif kind == "ccmp":
            o = self.pick(["ceq", "clt", "cgt", "cle", "cge"])
            self.op(dest, typ, o, [self.operand("char"), self.operand("char")])
        elif kind == "logic":
            o = self.pick(["and", "or"])
            self.op(dest, typ, o, [self.operand("bool"), self.operand("bool")])
        elif kind == "not":
            self.op(dest, typ, "not", [self.operand("bool")])
        elif kind == "farith":
            o = self.pick(["fadd", "fsub", "fmul", "fdiv"])
            self.op(dest, typ, o, [self.operand("float"), self.operand("float")])
        elif kind == "bits2float":
            self.op(dest, typ, "bits2float", [self.operand("int")])
        elif kind == "int2char":
            if self.lim.errors and d(ints(0, 15)) == 15:
                # A computed code point: may land on a surrogate or past 0x10FFFF.
                code = self.fresh_var("int")
                self.op(code, "int", "add", [self.operand("int"),
                                             self.const("int", d(ints(-3, 3)))])
            else:
                code = self.const("int", self.pick(CODE_POINTS))
            self.op(dest, typ, "int2char", [code])

    def condition(self):
        """A bool variable for a branch or guard; often one whose value changes
        as a loop counter advances (`i < k` with k inside the trip count)."""
        d = self.draw
        kinds = ["var", "cmp"]
        if self.counters:
            kinds += ["counter", "counter"]
        kind = self.pick(kinds)
        if kind == "var":
            return self.operand("bool")
        c = self.fresh_var("bool")
        if kind == "counter":
            i = self.pick(sorted(self.counters))
            lo, hi = self.counters[i]
            k = self.const("int", d(ints(lo, hi + 1)))
            o = self.pick(["lt", "le", "gt", "ge", "eq"])
            args = [i, k] if d(BOOLS) else [k, i]
            self.op(c, "bool", o, args)
        else:
            self.value("bool", c)
        return c

    # --- statements ----------------------------------------------------------------

    def block(self, max_stmts=None, min_stmts=0):
        """Generate a block; return True if control falls through its end."""
        top = max_stmts if max_stmts is not None else self.lim.max_stmts
        n = self.draw(ints(min_stmts, top))
        for _ in range(n):
            if not self.statement():
                self.maybe_dead_code()
                return False
        return True

    def maybe_dead_code(self):
        """Occasionally leave unreachable instructions after a jump (passes must cope)."""
        if self.draw(ints(0, 7)) == 7:
            self.op(None, None, "print", [self.operand("int")])

    def statement(self):
        d = self.draw
        kinds = ["assign", "assign", "assign", "print"]
        can_nest = self.nesting < self.lim.max_nesting and self.cost < self.lim.budget
        if can_nest:
            kinds += ["if", "loop", "loop", "sign_test", "sign_test"]
            if d(ints(0, 2)) == 2:
                kinds.append("divide_loop")
            if d(ints(0, 2)) == 2:
                kinds.append("two_entry_loop")
            if self.lim.speculation and (self.in_spec == 0 or self.lim.nested_speculation):
                kinds.append("spec")
            if self.lim.memory:
                kinds.append("region")
        if self.regions:
            kinds += ["load", "store"]
        if not self.in_spec and self.callable():
            kinds += ["call", "call"]
        # Rare exits, so that most code after them still runs.
        if self.loops and d(ints(0, 3)) == 3:
            kinds += ["break", "continue"]
        if self.may_return() and d(ints(0, 5)) == 5:
            kinds.append("ret")
        if d(ints(0, 20)) == 20:
            kinds += ["nop", "labels"]
        if self.lim.ssa2 and d(ints(0, 11)) == 11:     # rare: keeps runs short
            kinds.append("shadow")
        if self.lim.dynamic and d(ints(0, 7)) == 7:
            kinds.append("dynamic")
        kind = self.pick(kinds)
        return getattr(self, "stmt_" + kind)()

    def may_return(self):
        return not self.in_spec and not self.owned

    def stmt_assign(self):
        typ = self.pick(self.enabled_types())
        self.value(typ, self.target(typ))
        return True

    def stmt_shadow(self):
        """ssa2: a value sent to a variable through its shadow (`set s x` ... `s: T =
        get`), often with a second `set` on one arm of a branch (the `get` after the
        join sees either), rarely (engine testing) `undef` on that arm: its value
        may only be copied, so a later use of s is a run-time error there."""
        typ = self.pick(self.enabled_types())
        first = self.operand(typ)
        s = self.fresh_var(typ)                 # the variable and its shadow
        self.op(None, None, "set", [s, first])
        if self.draw(BOOLS):
            c = self.condition()
            then_l, end_l = self.fresh_label(), self.fresh_label()
            self.op(None, None, "br", [c], labels=[then_l, end_l])
            self.label(then_l)
            if self.lim.maybe_undefined and self.draw(ints(0, 2)) == 2:
                u = self.fresh_var(typ)
                self.op(u, typ, "undef")
                self.defined.discard(u)         # holds no value a use may take
                second = u
            else:
                second = self.operand(typ)
            self.op(None, None, "set", [s, second])
            self.label(end_l)
        self.op(s, typ, "get")
        return True

    def stmt_dynamic(self):
        """The dynamic extension: a value through an `any` variable (sometimes through a
        ptr<any> cell), printed as `any`, used by an op of its type, or given back to
        a variable of its type -- which then holds whatever the interpreter gives it,
        unchecked."""
        typ = self.pick(self.enabled_types())
        a = self.fresh_var("any")
        self.op(a, "any", "id", [self.operand(typ)])
        how = self.draw(ints(0, 3))
        if how == 0:
            self.op(None, None, "print", [a, self.operand(typ)])
        elif how == 3:
            op, result, other = {"int": ("add", "int", "int"), "bool": ("not", "bool", None),
                                 "float": ("fmul", "float", "float"),
                                 "char": ("char2int", "int", None)}[typ]
            args = [a] + ([self.operand(other)] if other else [])
            if other and self.draw(BOOLS):
                args.reverse()
            self.op(self.target(result), result, op, args)
        elif how == 1 and self.lim.memory:
            ptype = {"ptr": "any"}
            p = self.fresh_var(ptype)
            self.op(p, ptype, "alloc", [self.const("int", 1)])
            self.op(None, None, "store", [p, a])
            self.op(self.target(typ), typ, "load", [p])
            self.op(None, None, "free", [p])
        else:
            self.op(self.target(typ), typ, "id", [a])
        return True

    def stmt_nop(self):
        self.op(None, None, "nop")
        return True

    def stmt_print(self):
        n = self.draw(ints(0, 3))
        args = [self.operand(self.pick(self.enabled_types())) for _ in range(n)]
        self.op(None, None, "print", args)
        return True

    def nested(self, fn):
        self.nesting += 1
        try:
            return fn()
        finally:
            self.nesting -= 1

    def stmt_if(self):
        c = self.condition()
        then_l, else_l, end_l = self.fresh_label(), self.fresh_label(), self.fresh_label()
        has_else = self.draw(BOOLS)
        self.op(None, None, "br", [c], labels=[then_l, else_l if has_else else end_l])
        before = set(self.defined)
        self.label(then_l)
        then_falls = self.nested(self.block)
        then_defs = set(self.defined)
        if then_falls:
            self.op(None, None, "jmp", labels=[end_l])
        self.defined = set(before)
        if has_else:
            self.label(else_l)
            else_falls = self.nested(self.block)
        else:
            else_falls = True
        else_defs = set(self.defined)
        self.label(end_l)
        reaching = [s for s, falls in ((then_defs, then_falls), (else_defs, else_falls)) if falls]
        if not reaching:
            # Both arms left (break/continue/ret): the end label is unreachable.
            self.defined = before
            return False
        self.defined = set.intersection(*reaching)
        return True

    # --- range facts: sign tests and divisions of negative values ------------------

    def narrow(self, v):
        """v, or (without wide_ints) a small value of the same sign instead."""
        if not self.lim.wide_ints and abs(v) > WIDE:
            return (abs(v) % 1000 + 1) * (1 if v > 0 else -1)
        return v

    def dividend(self):
        """An int variable to test and divide, whose sign the code cannot see at a
        glance: an int parameter (@main's are often negative), or one of two
        constants (a negative one) chosen by a branch, or any int operand."""
        d = self.draw
        args = [n for n, t in self.sig.params if t == "int" and n in self.defined]
        pick = d(ints(0, 3))
        if args and pick < 2:
            return self.pick(args)
        if pick == 3:
            return self.operand("int")
        c = self.condition()
        x = self.fresh_var("int")
        left, right, join = self.fresh_label(), self.fresh_label(), self.fresh_label()
        self.op(None, None, "br", [c], labels=[left, right])
        values = [self.narrow(self.pick(NEGATIVE_INTS)), self.narrow(self.pick(SIGN_CONSTANTS))]
        if d(BOOLS):
            values.reverse()
        self.label(left)
        self.const("int", values[0], x)
        self.op(None, None, "jmp", labels=[join])
        self.label(right)
        self.const("int", values[1], x)
        self.label(join)
        return x

    def sign_test(self, x):
        """A bool comparing int variable x with a constant, on either side (`lt x
        zero`, `ge zero x`; sometimes with another variable, or with x itself),
        sometimes negated (`not`) and copied (`id`).  Returns (c, where): where(holds)
        is the interval x lies in when c is `holds`, or None if not an interval."""
        d = self.draw
        o = self.pick(["eq", "lt", "gt", "le", "ge"])
        kind = d(ints(0, 7))
        kval = None
        if kind < 5:
            kval = self.narrow(self.pick(SIGN_CONSTANTS))
            k = self.const("int", kval)
        elif kind < 7:
            k = self.operand("int")
        else:
            k = x
        left = d(BOOLS)
        c = self.fresh_var("bool")
        self.op(c, "bool", o, [x, k] if left else [k, x])
        rel = o if left else _SWAPPED[o]            # the test is `x rel k`
        negated = d(ints(0, 2)) == 2
        if negated:
            nc = self.fresh_var("bool")
            self.op(nc, "bool", "not", [c])
            c = nc
        if d(ints(0, 4)) == 4:
            cc = self.fresh_var("bool")
            self.op(cc, "bool", "id", [c])
            c = cc

        def where(holds):
            r = rel if holds != negated else _NEGATED[rel]
            if kval is None or r is None:
                return None
            return {"lt": (INT_MIN, kval - 1), "le": (INT_MIN, kval), "gt": (kval + 1, INT_MAX),
                    "ge": (kval, INT_MAX), "eq": (kval, kval)}[r]
        return c, where

    def divide(self, x):
        """A `div` of x: by a constant of either sign, rarely by any int variable
        (an intended, rare division by zero); the quotient sometimes printed."""
        d = self.draw
        if self.lim.errors and d(ints(0, 19)) == 19:
            k = self.operand("int")
        else:
            k = self.const("int", self.narrow(self.pick(SIGN_DIVISORS)))
        q = self.target("int")
        self.op(q, "int", "div", [x, k])
        if d(ints(0, 3)) > 0:
            self.op(None, None, "print", [q])

    def sign_arm(self, x, interval):
        """One side of a sign test: often empty; or a variable only this side
        defines, a division of x, a division by x (where the test proves x
        non-zero and x is not reassigned since), other statements.  Returns True
        if control falls through its end."""
        d = self.draw
        start = len(self.instrs)
        if d(BOOLS):
            self.const("int", self.literal("int"))      # a variable of this side only
        for _ in range(d(ints(0, 2))):
            kind = self.pick(["define", "divide", "by_x", "block"])
            if kind == "define":
                self.const("int", self.literal("int"))
            elif kind == "divide":
                self.divide(x)
            elif kind == "by_x":
                if interval is None or interval[0] <= 0 <= interval[1] or any(
                        i.get("dest") == x for i in self.instrs[start:]):
                    continue
                q = self.target("int")
                self.op(q, "int", "div", [self.operand("int"), x])
                if d(BOOLS):
                    self.op(None, None, "print", [q])
            elif not self.block(2):
                return False
        return True

    def stmt_sign_test(self):
        """`c = <x compared with a constant>; br c .a .b`, both sides meeting
        again, then a division of x (see `sign_test`, `sign_arm`)."""
        x = self.dividend()
        c, where = self.sign_test(x)
        then_l, else_l, end_l = self.fresh_label(), self.fresh_label(), self.fresh_label()
        self.op(None, None, "br", [c], labels=[then_l, else_l])
        before = set(self.defined)
        reaching = []
        for label, holds in ((then_l, True), (else_l, False)):
            self.defined = set(before)
            self.label(label)
            if self.nested(lambda: self.sign_arm(x, where(holds))):
                reaching.append(set(self.defined))
                if holds:
                    self.op(None, None, "jmp", labels=[end_l])
        self.label(end_l)
        if not reaching:
            self.defined = before
            return False
        self.defined = set.intersection(*reaching)
        self.divide(x)
        return True

    def stmt_divide_loop(self):
        """`w = x; while <w < 0, or until w == 0 / w >= 0>: body; w = w / k`: a loop
        dividing toward zero (from below when x < 0, where truncation reaches 0 and
        floor division would stay at -1), also ended after a constant number of
        rounds (k may be 1 or -1, x positive)."""
        d = self.draw
        room = max(1, self.lim.max_iterations // self.mult)
        rounds = d(ints(0, min(12, room)))
        x = self.dividend()
        w = self.fresh_var("int")
        self.op(w, "int", "id", [x])
        k = self.const("int", self.narrow(self.pick(SIGN_DIVISORS)))
        zero = self.const("int", 0)
        n = self.fresh_var("int")
        self.const("int", 0, n)
        one = self.const("int", 1)
        stop = self.const("int", rounds)
        self.readonly |= {n, one, stop, k, zero}     # (the body may assign w)
        head, body, inner, latch, done = (self.fresh_label() for _ in range(5))
        before = set(self.defined)
        saved_mult = self.mult
        self.mult *= rounds + 1
        self.label(head)
        o, args, go_on = self.pick([
            ("eq", [w, zero], False), ("eq", [zero, w], False),     # until w == 0
            ("lt", [w, zero], True), ("gt", [zero, w], True),       # while w < 0
            ("ge", [w, zero], False), ("le", [zero, w], False)])    # until w >= 0
        c = self.fresh_var("bool")
        self.op(c, "bool", o, args)
        if d(ints(0, 3)) == 3:
            nc = self.fresh_var("bool")
            self.op(nc, "bool", "not", [c])
            c, go_on = nc, not go_on
        self.op(None, None, "br", [c], labels=[body, done] if go_on else [done, body])
        self.label(body)
        more = self.fresh_var("bool")
        self.op(more, "bool", "lt", [n, stop])
        self.op(None, None, "br", [more], labels=[inner, done])
        self.label(inner)
        self.loops.append((latch, done))
        self.counters[n] = (0, max(rounds - 1, 0))
        falls = self.nested(self.block) if d(BOOLS) else True
        if falls:
            self.op(None, None, "jmp", labels=[latch])
        del self.counters[n]
        self.loops.pop()
        self.defined = set(before)
        self.label(latch)
        self.op(w, "int", "div", [w, k])
        self.op(n, "int", "add", [n, one])
        self.op(None, None, "jmp", labels=[head])
        self.mult = saved_mult
        self.label(done)
        self.defined = before
        if d(ints(0, 3)) > 0:
            self.op(None, None, "print", [w, n])
        return True

    def stmt_loop(self):
        d = self.draw
        room = max(1, self.lim.max_iterations // self.mult)
        trip = d(ints(0, min(self.lim.max_trip, room)))
        # "input": also stop once i reaches some int variable (often an argument
        # of @main), so the trip count depends on the input, up to `trip`.
        style = self.pick(["while", "do", "down", "input"])
        if style == "do":
            trip = max(trip, 1)
        head, body, latch, done = (self.fresh_label() for _ in range(4))
        i = self.fresh_var("int")
        one = self.const("int", 1)
        if style == "down":
            self.const("int", trip, i)
            stop = self.const("int", 0)
            test, step, span = "gt", "sub", (1, trip)
        else:
            self.const("int", 0, i)
            stop = self.const("int", trip)
            test, step, span = "lt", "add", (0, trip - 1)
        if trip == 0:
            span = (0, 0)                  # the body never runs; any range will do
        limit = self.input_limit() if style == "input" else None
        self.readonly |= {i, one, stop}
        before = set(self.defined)
        c = self.fresh_var("bool")

        def check(true_label, false_label):
            self.op(c, "bool", test, [i, stop])
            if limit is not None:
                below = self.fresh_var("bool")
                self.op(below, "bool", "lt", [i, limit])
                self.op(c, "bool", "and", [c, below])
            self.op(None, None, "br", [c], labels=[true_label, false_label])

        if style != "do":
            self.label(head)
            check(body, done)
        self.label(body)
        self.loops.append((latch, done))
        self.counters[i] = span
        saved_mult = self.mult
        self.mult *= max(trip, 1)
        falls = self.nested(self.block)
        if falls:
            self.op(None, None, "jmp", labels=[latch])
        self.mult = saved_mult
        del self.counters[i]
        self.loops.pop()
        self.defined = set(before)
        self.label(latch)
        self.op(i, "int", step, [i, one])
        if style == "do":
            check(body, done)
        else:
            self.op(None, None, "jmp", labels=[head])
        self.label(done)
        self.defined = before
        return True

    def input_limit(self):
        """An int variable whose value likely comes from the input."""
        args = [n for n, t in self.sig.params if t == "int" and n in self.defined]
        if args and self.draw(BOOLS):
            return self.pick(args)
        return self.operand("int")

    def stmt_two_entry_loop(self):
        """An irreducible loop: two blocks that jump to each other, entered at
        either one; every pass through a block advances the shared counter."""
        d = self.draw
        room = max(1, self.lim.max_iterations // self.mult)
        trip = d(ints(0, min(self.lim.max_trip, room)))
        a, b, done = self.fresh_label(), self.fresh_label(), self.fresh_label()
        c = self.condition()
        i = self.fresh_var("int")
        self.const("int", 0, i)
        one = self.const("int", 1)
        stop = self.const("int", trip)
        self.readonly |= {i, one, stop}
        self.op(None, None, "br", [c], labels=[a, b])
        before = set(self.defined)
        saved_loops, saved_mult = self.loops, self.mult
        self.loops = []
        self.mult *= max(trip, 1)
        self.counters[i] = (0, trip)
        for here, there in ((a, b), (b, a)):
            self.label(here)
            self.defined = set(before)      # either block may run first
            self.nested(lambda: self.block(3))
            self.op(i, "int", "add", [i, one])
            t = self.fresh_var("bool")
            self.op(t, "bool", "lt", [i, stop])
            self.op(None, None, "br", [t], labels=[there, done])
        del self.counters[i]
        self.loops, self.mult = saved_loops, saved_mult
        self.label(done)
        self.defined = before
        return True

    def stmt_labels(self):
        """Control-flow noise: a jump to the next instruction, labels in a row."""
        first, second = self.fresh_label(), self.fresh_label()
        self.op(None, None, "jmp", labels=[first])
        self.label(first)
        self.label(second)
        return True

    def stmt_break(self):
        self.op(None, None, "jmp", labels=[self.loops[-1][1]])
        return False

    def stmt_continue(self):
        self.op(None, None, "jmp", labels=[self.loops[-1][0]])
        return False

    def stmt_ret(self):
        if self.sig.ret is None:
            self.op(None, None, "ret")
        else:
            self.op(None, None, "ret", [self.operand(self.sig.ret)])
        return False

    def stmt_spec(self):
        """speculate; pre; guard c .fail; mid; [guard c2 .fail]; commit; jmp .done;
        .fail: recovery; .done:  -- nothing inside leaves the region by a jump."""
        d = self.draw
        fail, done = self.fresh_label(), self.fresh_label()
        before = set(self.defined)
        saved_loops = self.loops
        self.op(None, None, "speculate")
        self.in_spec += 1
        self.loops = []                     # no break/continue out of the region
        self.nested(lambda: self.block(3))
        for _ in range(d(ints(0, 2))):
            c = self.condition()
            self.op(None, None, "guard", [c], labels=[fail])
            self.nested(lambda: self.block(2))
        self.op(None, None, "commit")
        self.in_spec -= 1
        self.loops = saved_loops
        committed = set(self.defined)
        self.op(None, None, "jmp", labels=[done])
        self.label(fail)
        self.defined = set(before)          # an abort rolls the variables back
        fail_falls = self.nested(lambda: self.block(3))
        if fail_falls:
            self.defined &= committed
        else:
            self.defined = committed
        self.label(done)
        return True

    def stmt_region(self):
        """alloc; initialise every cell; body (loads/stores in bounds); free."""
        d = self.draw
        elem = self.pick(self.enabled_types())
        size = d(ints(1, 4))
        ptype = {"ptr": elem}
        n = self.const("int", size)
        p = self.fresh_var(ptype)
        self.op(p, ptype, "alloc", [n])
        self.readonly.add(p)
        for k in range(size):
            self.store_at(p, elem, self.const("int", k))
        saved_loops = self.loops
        self.loops = []                    # no break/continue past the free
        self.regions = self.regions + [(p, elem, size)]
        self.owned += 1
        self.nested(self.block)
        self.owned -= 1
        self.regions = self.regions[:-1]
        self.loops = saved_loops
        if d(BOOLS):
            self.op(None, None, "free", [p])
        else:
            q = self.fresh_var(ptype)
            self.op(q, ptype, "ptradd", [p, self.const("int", 0)])
            self.op(None, None, "free", [q])
        return True

    def pointer_to(self, p, elem, size):
        """A pointer to an in-bounds cell of region p, via ptradd (sometimes two steps,
        sometimes indexed by a loop counter whose range lies inside the region)."""
        d = self.draw
        ptype = {"ptr": elem}
        counters = [i for i, (lo, hi) in sorted(self.counters.items()) if lo >= 0 and hi < size]
        if counters and d(BOOLS):
            off = self.pick(counters)
        else:
            k = d(ints(0, size - 1))
            if d(BOOLS):
                j = d(ints(-3, 3))
                mid = self.fresh_var(ptype)
                self.op(mid, ptype, "ptradd", [p, self.const("int", k + j)])
                p, k = mid, -j
            off = self.const("int", k)
        q = self.fresh_var(ptype)
        self.op(q, ptype, "ptradd", [p, off])
        return q

    def store_at(self, p, elem, off):
        ptype = {"ptr": elem}
        q = self.fresh_var(ptype)
        self.op(q, ptype, "ptradd", [p, off])
        self.op(None, None, "store", [q, self.operand(elem)])

    def stmt_load(self):
        p, elem, size = self.pick(self.regions)
        q = self.pointer_to(p, elem, size)
        self.op(self.target(elem), elem, "load", [q])
        return True

    def stmt_store(self):
        p, elem, size = self.pick(self.regions)
        q = self.pointer_to(p, elem, size)
        self.op(None, None, "store", [q, self.operand(elem)])
        return True

    def memory_for(self, elem, size):
        """Regions in reach that can lend `size` cells of `elem`."""
        return [r for r in self.regions if r[1] == elem and r[2] >= size]

    def can_pass(self, sig):
        return all(self.memory_for(t["ptr"], sig.sizes[n])
                   for n, t in sig.params if isinstance(t, dict))

    def callable(self):
        return [s for s in self.callees
                if self.cost + self.mult * s.cost <= self.lim.budget and self.can_pass(s)] + (
            [self.sig] if self.sig.recursive and self.mult == 1 and self.self_calls < 2 else [])

    def stmt_call(self):
        d = self.draw
        callee = self.pick(self.callable())
        args = []
        for pname, ptype in callee.params:
            if isinstance(ptype, dict):
                # Lend memory: a region's start, or a pointer into it that still
                # leaves the callee its cells.
                need = callee.sizes[pname]
                p, elem, size = self.pick(self.memory_for(ptype["ptr"], need))
                shift = self.draw(ints(0, size - need))
                if shift:
                    arg = self.fresh_var(ptype)
                    self.op(arg, ptype, "ptradd", [p, self.const("int", shift)])
                else:
                    arg = p
            elif callee.recursive and pname == "depth":
                if callee is self.sig:
                    self.self_calls += 1
                    arg = self.fresh_var("int")
                    self.op(arg, "int", "sub", ["depth", self.const("int", 1)])
                else:
                    arg = self.const("int", d(ints(-1, self.lim.max_recursion)))
            else:
                arg = self.operand(ptype)
            args.append(arg)
        if callee is not self.sig:
            self.cost += self.mult * callee.cost
        if callee.ret is None:
            self.op(None, None, "call", args, funcs=[callee.name])
        else:
            self.op(self.target(callee.ret), callee.ret, "call", args, funcs=[callee.name])
        return True

    # --- whole functions -----------------------------------------------------------

    def seed(self):
        """One defined variable of every type, so operands and returns always exist."""
        for typ in self.enabled_types():
            if not self.vars_of(typ):
                self.const(typ, self.literal(typ))

    def body(self):
        self.seed()
        if self.sig.recursive:
            # Base case first: depth <= 0 returns without recursing.
            self.readonly.add("depth")
            c = self.fresh_var("bool")
            base, rec = self.fresh_label(), self.fresh_label()
            self.op(c, "bool", "le", ["depth", self.const("int", 0)])
            self.op(None, None, "br", [c], labels=[base, rec])
            self.label(base)
            before = set(self.defined)
            self.self_calls = 2             # no recursion from the base case
            self.nested(lambda: self.block(2))
            self.stmt_ret()
            self.defined = before
            self.self_calls = 0
            self.label(rec)
        # Hypothesis often draws the simplest choice; a floor keeps @main busy.
        floor = 3 if self.is_main else 1
        if self.block(self.lim.max_stmts + 3, floor) and (self.sig.ret is not None or self.draw(BOOLS)):
            self.stmt_ret()
        func = {"name": self.sig.name, "instrs": self.instrs}
        if self.sig.params:
            func["args"] = [{"name": n, "type": t} for n, t in self.sig.params]
        if self.sig.ret is not None:
            func["type"] = self.sig.ret
        return func


def _activation_cost(cost, sig, limits):
    """Upper bound on a call's dynamic instructions, recursion included."""
    if not sig.recursive:
        return cost
    # Up to two self-calls per activation, depth at most max_recursion.
    return cost * (2 ** (limits.max_recursion + 2) - 1)


def _main_argument(draw, typ, limits):
    if typ == "int":
        kind = draw(ints(0, 3))       # small values decide input-bounded loops
        if kind == 0:
            v = draw(ints(0, 6))
        elif kind == 3:                      # negative values reach sign tests and div
            v = _pick(draw, NEGATIVE_INTS) if draw(BOOLS) \
                else draw(ints(-200000, -1))
        else:
            v = _pick(draw, INT_EDGES) if kind == 1 else draw(ints(-1000, 1000))
        if not limits.wide_ints and abs(v) > WIDE:
            v = v % 1000
        return str(v)
    if typ == "bool":
        return _pick(draw, ["true", "false"])
    if typ == "float":
        v = _pick(draw, FLOAT_EDGES) if draw(BOOLS) else draw(_ANY_FLOAT)
        return repr(v)
    banned = "\0" if limits.cr_arguments else "\0\r"
    return _pick(draw, [c for c in CHAR_EDGES if c not in banned])


@dataclass
class Case:
    """A generated program and command-line arguments for its @main: `argv`,
    and `alt_argv`, a second input (to trace on one input and run on another)."""
    prog: dict
    argv: list
    alt_argv: list


@st.composite
def cases(draw, limits=DEFAULT):
    """A random terminating program with arguments for @main."""
    types = [t for t in BASE_TYPES
             if (t != "float" or limits.floats) and (t != "char" or limits.chars)]
    callees = []
    funcs = []
    prefix = _pick(draw, FUNC_PREFIXES)
    for k in range(draw(ints(0, limits.max_helpers))):
        recursive = draw(ints(0, 2)) == 2
        params = [("depth", "int")] if recursive else []
        sizes = {}
        for j in range(draw(ints(0, 3))):
            typ = _pick(draw, types)
            if limits.memory and draw(ints(0, 3)) == 3:
                sizes[f"p{j}"] = draw(ints(1, 3))
                typ = {"ptr": typ}
            params.append((f"p{j}", typ))
        ret = _pick(draw, [None, *types])
        name = f"{prefix}{k}"
        pick = draw(ints(0, 5))
        taken = {c.name for c in callees} | {"main"}
        if pick == 5:
            name = _pick(draw, [n for n in HOSTILE_NAMES if n not in taken])
        elif pick == 4 and callees and _twin(callees[-1].name) not in taken | {None}:
            name = _twin(callees[-1].name)
        sig = Signature(name, params, ret, 0, recursive, sizes)
        gen = _FunctionGen(draw, limits, sig, list(callees), is_main=False)
        funcs.append(gen.body())
        sig.cost = _activation_cost(gen.cost + 1, sig, limits)
        callees.append(sig)
    params = [(f"arg{j}", _pick(draw, types)) for j in range(draw(ints(0, 3)))]
    main = _FunctionGen(draw, limits, Signature("main", params, None, 0), callees, is_main=True)
    main_func = main.body()
    if draw(BOOLS):
        funcs.insert(0, main_func)
    else:
        funcs.append(main_func)
    argv = [_main_argument(draw, t, limits) for _, t in params]
    alt_argv = [_main_argument(draw, t, limits) for _, t in params]
    return Case({"functions": funcs}, argv, alt_argv)


def programs(limits=DEFAULT):
    """Just the program of `cases` (for properties that do not run it)."""
    return cases(limits).map(lambda c: c.prog)


# --- programs whose `any` values change kind during the run ---------------------------

_STEP = """@step(a: any, b: any, fl: bool): any {
  br fl .f .i;
.i:
  r: any = add a b;
  ret r;
.f:
  r: any = fadd a b;
  ret r;
}
"""


@st.composite
def phase_cases(draw):
    """A loop whose `any` accumulators change kind during the run (what the tiers
    assume of `any` values at loop headers and of `any` parameters must follow):
    ints in one phase and floats in another, and back, flipped at iterations
    given as arguments; updated by `add` or `fadd` as a flag says, in the loop or
    through an `any` function (whose parameters then change kind), sometimes in
    an inner loop of its own; sometimes an `add` at a chosen iteration meets a
    float (the run ends in the reference's error there).  A Case whose alt_argv
    moves the flips."""
    # (mostly long enough for the loop to move to generated code before a flip)
    n = draw(ints(0, 60)) if draw(ints(0, 3)) == 0 else draw(ints(400, 2500))
    inner = draw(ints(0, 2))            # 0: no inner loop; else its trip count's scale
    via_call = draw(BOOLS)
    start_float = draw(BOOLS)
    trip = draw(ints(1, 40)) if inner else 0
    printing = draw(ints(0, 3)) == 0

    def update(acc, ind):
        if via_call:
            return [f"{ind}{acc}: any = call @step {acc} x fl;"]
        return [f"{ind}br fl .f_{acc} .i_{acc};",
                f".i_{acc}:", f"{ind}{acc}: any = add {acc} x;", f"{ind}jmp .u_{acc};",
                f".f_{acc}:", f"{ind}{acc}: any = fadd {acc} x;", f".u_{acc}:"]

    first = ["  acc: any = id fz;", "  x: any = id fh;"] if start_float else \
        ["  acc: any = const 0;", "  x: any = const 1;"]
    body = [
        "@main(n: int, s1: int, s2: int, bad: int) {",
        "  one: int = const 1;", "  i: int = const 0;",
        f"  fl: bool = const {'true' if start_float else 'false'};",
        "  fz: float = const 0.25;", "  fh: float = const 0.5;", *first,
        "  acc2: any = id acc;",
        ".loop:", "  more: bool = lt i n;", "  br more .body .done;",
        ".body:", "  a1: bool = eq i s1;", "  br a1 .flip .c2;",
        ".c2:", "  a2: bool = eq i s2;", "  br a2 .flip .c3;",
        ".c3:", "  a3: bool = eq i bad;", "  br a3 .wrong .go;",
        ".wrong:", "  acc: any = add acc x;", "  jmp .go;",
        ".flip:", "  fl: bool = not fl;", "  br fl .tofloat .toint;",
        ".tofloat:", "  acc: any = id fz;", "  x: any = id fh;", "  acc2: any = id fz;",
        "  jmp .go;",
        ".toint:", "  acc: any = const 3;", "  x: any = const 2;", "  acc2: any = const 1;",
        ".go:", *update("acc", "  ")]
    if inner:
        body += ["  j: int = const 0;", f"  m: int = const {trip * inner};",
                 ".inner:", "  c: bool = lt j m;", "  br c .ibody .next;",
                 ".ibody:", *update("acc2", "  "), "  j: int = add j one;", "  jmp .inner;"]
    body += [".next:", "  i: int = add i one;"]
    if printing:
        body += ["  seven: int = const 7;", "  q: int = div i seven;", "  q: int = mul q seven;",
                 "  p: bool = eq q i;", "  br p .show .loop;", ".show:", "  print acc acc2;"]
    body += ["  jmp .loop;", ".done:", "  print acc x acc2;", "}"]
    from bril.ir.text import parse_program
    prog = parse_program((_STEP if via_call else "") + "\n".join(body) + "\n")

    def flips():
        bad = draw(ints(-1, n + 1)) if draw(ints(0, 3)) == 0 else -1
        return [str(draw(ints(-1, n + 1))), str(draw(ints(-1, n + 1))), str(bad)]
    return Case(prog, [str(n)] + flips(), [str(n)] + flips())
