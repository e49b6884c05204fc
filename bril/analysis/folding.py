"""Compile-time constants: reading them from `const`, folding ops, writing them back.

The one folding front end: the passes (`lvn`, `constprop`) and the tracer's
optimizer and exit analysis (`bril.tracing.trace_opt`, `bril.tracing.trace_exit`) fold through it.

A `Const` is a run-time value with its run-time type ('int', 'bool', 'float',
'char'), as the interpreter would hold it.  Equality is exact: 0.0 and -0.0
differ, NaN equals the same NaN bits, and `true` is not the integer 1.

Folding goes through `bril.ir.ops.evaluate`, the one definition of op semantics,
and gives up (returns None) whenever evaluation raises or the operands do not
have the types the op requires: such an instruction stays in the program so it
fails, or type-checks, at run time exactly as before.
"""

import math

from ..ir import ops
from ..ir.errors import BrilError

SCALARS = ("int", "bool", "float", "char")


class Const:
    __slots__ = ("type", "value")

    def __init__(self, typ, value):
        self.type = typ
        self.value = value

    def key(self):
        if self.type == "float":
            return ("float", ops.float2bits(self.value))
        return (self.type, self.value)

    def __eq__(self, other):
        return isinstance(other, Const) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"Const({self.type}, {self.value!r})"


def runtime_type(value):
    """The Bril run-time type of a Python value, or None."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "char"
    return None


def _valid_char(s):
    return isinstance(s, str) and len(s) == 1 and not 0xD800 <= ord(s) <= 0xDFFF


def const_of(instr):
    """The value a `const` instruction produces, or None if it is not a plain,
    valid constant (a wrong JSON value for its type is left to run time)."""
    typ, v = instr.get("type"), instr.get("value")
    if typ == "any":                    # the dynamic extension: type from the JSON value
        typ = runtime_type(v)
    if typ == "int":
        if isinstance(v, int) and not isinstance(v, bool) and ops.INT_MIN <= v <= ops.INT_MAX:
            return Const("int", v)
    elif typ == "bool":
        if isinstance(v, bool):
            return Const("bool", v)
    elif typ == "float":
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return Const("float", float(v))
            except OverflowError:       # an integer literal too big for a double
                return None
    elif typ == "char":
        if _valid_char(v):
            return Const("char", v)
    return None


def exact_in_double(n):
    """True if the integer n is read exactly by a JSON reader that reads numbers as
    doubles -- the reference tools: every int literal our tools write must be one
    (a folded 9000000000000000005 would read as 9000000000000000000 there)."""
    return float(n) == n


def exact_at_most(n):
    """The largest integer <= n that `exact_in_double` accepts."""
    f = float(n)
    return int(f) if f <= n else int(math.nextafter(f, -math.inf))


def exact_at_least(n):
    """The smallest integer >= n that `exact_in_double` accepts."""
    f = float(n)
    return int(f) if f >= n else int(math.nextafter(f, math.inf))


def representable(c, typ):
    """True if a `const` of declared type `typ` can stand for value c in JSON, read
    the same by every Bril tool."""
    if typ != c.type:                   # never write 'any' or mismatched consts
        return False
    if c.type == "int":
        return exact_in_double(c.value)  # (else the computation stays)
    if c.type == "float":
        return math.isfinite(c.value)   # NaN and infinities are not JSON
    if c.type == "char":
        return _valid_char(c.value)
    return True


def as_const_instr(instr, c):
    """`instr` rewritten as `dest: type = const c`, keeping its extra fields;
    None if the declared type cannot hold c."""
    if not representable(c, instr.get("type")):
        return None
    new = {k: v for k, v in instr.items() if k not in ("args", "funcs", "labels")}
    new["op"] = "const"
    new["value"] = c.value
    return new


def fold(op, args):
    """The Const an op yields on constant operands, or None if it cannot be
    folded: not a foldable op, wrong operand types, or evaluation raises."""
    if op not in ops.FOLDABLE or op == "id":
        return None
    sig = ops.OPS[op]
    if sig.args is None or len(sig.args) != len(args):
        return None
    t_type = None
    for want, c in zip(sig.args, args):
        if want == "T":
            if t_type is not None and c.type != t_type:
                return None
            t_type = c.type
        elif want != c.type:
            return None
    try:
        value = ops.evaluate(op, *(c.value for c in args))
    except (BrilError, ArithmeticError, ValueError, TypeError):
        return None
    typ = t_type if sig.result == "T" else sig.result
    if runtime_type(value) != typ:
        return None
    return Const(typ, value)


def fold_values(op, values):
    """The Python value an op yields on constant Python operands (their Bril types
    taken from the values), or None when `fold` gives up or the result is not a
    JSON constant (NaN, an infinity)."""
    args = []
    for v in values:
        t = runtime_type(v)
        if t is None:
            return None
        args.append(Const(t, v))
    c = fold(op, args)
    if c is None or (c.type == "float" and not math.isfinite(c.value)):
        return None
    return c.value


def single_constants(func):
    """Variables the function assigns exactly once, by a `const`, and does not take
    as arguments: wherever they are defined they hold that value."""
    defs = {}
    for ins in func.get("instrs", []):
        d = ins.get("dest")
        if d is not None:
            defs.setdefault(d, []).append(ins)
    params = {a["name"] for a in func.get("args") or []}
    known = {}
    for v, ds in defs.items():
        if len(ds) == 1 and v not in params and ds[0]["op"] == "const" and ds[0].get(
                "type") in ("int", "bool", "char"):
            c = const_of(ds[0])         # (None for a value of the wrong type)
            if c is not None:
                known[v] = c.value
    return known
