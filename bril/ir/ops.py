"""The one definition of every Bril op.

Every consumer reads this table: the Python engine's code generator, constant
folding in the passes, the checker, the tracer and the LLVM lowering.  A new
op, or a fix to an op's meaning, is made here and nowhere else.

An op's meaning is a Python expression template (`Op.py`) over its operands
`{0}`, `{1}`, ...; the names it uses are the helpers defined in this module
(exported in `HELPERS`).  The engine pastes the template into generated
source; `evaluate` compiles it once into a function for folding.  Templates
raise `BrilError` for run-time errors (division by zero, bad char code).

Types in signatures: 'int', 'bool', 'float', 'char', 'ptr' (any pointer),
'T' (the same type as the result / other 'T' operands), 'any' (anything).
"""

import math

from . import messages as M
from .errors import BrilError

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
_MASK = (1 << 64) - 1


# --- Value helpers used by templates -------------------------------------------------

def wrap64(x):
    """Wrap an exact integer to signed 64 bits (two's complement)."""
    if INT_MIN <= x <= INT_MAX:
        return x
    return ((x - INT_MIN) & _MASK) + INT_MIN


def idiv(a, b):
    """Bril `div`: truncates toward zero, wraps INT_MIN / -1, errors on zero."""
    if b == 0:
        raise BrilError(M.DIVISION_BY_ZERO)
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return wrap64(q)


def fdiv(a, b):
    """IEEE division, as JavaScript does it (x/0 is +-Infinity or NaN, never an error)."""
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0.0:
            return math.nan
        # Sign of the result: sign(a) xor sign(b), with b = +-0.0.
        neg = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if neg else math.inf


def int2char(i):
    if i < 0 or i > 0x10FFFF or 0xD7FF < i < 0xE000:
        raise BrilError(M.text(M.BAD_CHAR, value=i))
    return chr(i)


def char2int(c):
    return ord(c)


def bits2float(i):
    import struct       # (rare: not worth its start-up cost on every run)
    return struct.unpack("<d", struct.pack("<q", i))[0]


def float2bits(f):
    import struct
    return struct.unpack("<q", struct.pack("<d", f))[0]


HELPERS = {
    "wrap64": wrap64,
    "idiv": idiv,
    "fdiv": fdiv,
    "int2char": int2char,
    "char2int": char2int,
    "bits2float": bits2float,
    "float2bits": float2bits,
}


# --- The table -----------------------------------------------------------------------

class Op:
    """One op's row of the table (a plain class: `dataclasses` costs start-up time)."""

    __slots__ = ("name", "ext", "kind", "args", "result", "labels", "funcs", "py", "pure",
                 "may_trap", "commutative", "optional_result", "py_nonneg", "effect",
                 "negated", "swapped", "llvm")

    def __init__(self, name, ext, kind, args, result, labels=0, funcs=0, py=None, pure=False,
                 may_trap=False, commutative=False, optional_result=False, py_nonneg=None,
                 effect=None, negated=None, swapped=None, llvm=None):
        self.name = name
        self.ext = ext                # extension: core, float, mem, char, ssa, ssa2, spec, bitcast
        self.kind = kind              # 'value', 'effect', 'control' (changes control flow) or 'const'
        self.args = args              # operand types; None: variadic / checked specially
        self.result = result          # result type ('T': same as operand 'T'); None: no result
        self.labels = labels          # number of labels; -1: any number (phi)
        self.funcs = funcs            # number of function names
        self.py = py                  # Python expression template over {0}, {1}, ...
        self.pure = pure              # no effect at all: removable when the result is dead
        self.may_trap = may_trap      # evaluating can raise a Bril run-time error
        self.commutative = commutative
        self.optional_result = optional_result  # call: result present or not
        # A cheaper template, valid when operand 0 is >= 0 and every other operand >= 1
        # (engines use it when they can prove or cheaply test that).
        self.py_nonneg = py_nonneg
        # What it does that other code can observe: 'output' (print), 'heap' (writes
        # or changes memory), 'call'; None for none.
        self.effect = effect
        # Comparisons: the op that holds when this one does not (`lt` -> `ge`), and the
        # one that holds with the operands swapped (`lt` -> `gt`).
        self.negated = negated
        self.swapped = swapped
        # Its meaning in LLVM IR (bril.backend.llvm_lower): ("binop", IRBuilder method),
        # ("icmp"|"fcmp", predicate), ("unop", method), ("cast", method, type name),
        # ("id",); None: lowered by a function of its own (`_lower_<name>`).
        self.llvm = llvm

    @property
    def is_value(self):
        return self.result is not None

    def __repr__(self):
        return f"Op({self.name!r})"


def _arith(name, ext, typ, tmpl, res=None, **kw):
    if "llvm" not in kw:
        # A comparison: its template's operator (ints and chars signed, floats
        # ordered, false with a NaN as in JavaScript); else the IRBuilder method.
        kw["llvm"] = ("fcmp" if typ == "float" else "icmp", tmpl.split()[1]) \
            if res == "bool" else ("binop", name)
    return Op(name, ext, "value", (typ, typ), res or typ, py=tmpl, pure=True, **kw)


_TABLE = [
    # core arithmetic: exact 64-bit two's complement
    _arith("add", "core", "int", "wrap64({0} + {1})", commutative=True),
    _arith("mul", "core", "int", "wrap64({0} * {1})", commutative=True),
    _arith("sub", "core", "int", "wrap64({0} - {1})"),
    Op("div", "core", "value", ("int", "int"), "int", py="idiv({0}, {1})", may_trap=True,
       py_nonneg="({0} // {1})"),
    # core comparisons and logic
    _arith("eq", "core", "int", "({0} == {1})", "bool", negated=None, swapped="eq", commutative=True),
    _arith("lt", "core", "int", "({0} < {1})", "bool", negated="ge", swapped="gt"),
    _arith("gt", "core", "int", "({0} > {1})", "bool", negated="le", swapped="lt"),
    _arith("le", "core", "int", "({0} <= {1})", "bool", negated="gt", swapped="ge"),
    _arith("ge", "core", "int", "({0} >= {1})", "bool", negated="lt", swapped="le"),
    Op("not", "core", "value", ("bool",), "bool", py="(not {0})", pure=True,
       llvm=("unop", "not_")),
    _arith("and", "core", "bool", "({0} and {1})", commutative=True, llvm=("binop", "and_")),
    _arith("or", "core", "bool", "({0} or {1})", commutative=True, llvm=("binop", "or_")),
    Op("id", "core", "value", ("T",), "T", py="{0}", pure=True, llvm=("id",)),
    Op("const", "core", "const", (), "T", pure=True),
    Op("nop", "core", "effect", (), None, pure=True),
    Op("print", "core", "effect", None, None, effect="output"),
    Op("jmp", "core", "control", (), None, labels=1),
    Op("br", "core", "control", ("bool",), None, labels=2),
    Op("ret", "core", "control", None, None),
    Op("call", "core", "effect", None, None, funcs=1, optional_result=True, effect="call"),
    # float
    _arith("fadd", "float", "float", "({0} + {1})", commutative=True),
    _arith("fmul", "float", "float", "({0} * {1})", commutative=True),
    _arith("fsub", "float", "float", "({0} - {1})"),
    # (IEEE arithmetic is what JavaScript does: x/0 is +-Infinity or NaN)
    # (inline but for a zero divisor: a call costs more than the division)
    _arith("fdiv", "float", "float", "({0} / {1} if {1} else fdiv({0}, {1}))",
           llvm=("binop", "fdiv")),
    _arith("feq", "float", "float", "({0} == {1})", "bool", negated=None, swapped="feq", commutative=True),
    _arith("flt", "float", "float", "({0} < {1})", "bool", negated=None, swapped="fgt"),
    _arith("fgt", "float", "float", "({0} > {1})", "bool", negated=None, swapped="flt"),
    _arith("fle", "float", "float", "({0} <= {1})", "bool", negated=None, swapped="fge"),
    _arith("fge", "float", "float", "({0} >= {1})", "bool", negated=None, swapped="fle"),
    # memory (templates live in the engine: they need the heap)
    Op("alloc", "mem", "value", ("int",), "ptr", may_trap=True, effect="heap"),
    Op("free", "mem", "effect", ("ptr",), None, may_trap=True, effect="heap"),
    Op("store", "mem", "effect", ("ptr", "T"), None, may_trap=True, effect="heap"),
    Op("load", "mem", "value", ("ptr",), "T", may_trap=True),
    Op("ptradd", "mem", "value", ("ptr", "int"), "ptr", pure=True),
    # char
    _arith("ceq", "char", "char", "({0} == {1})", "bool", negated=None, swapped="ceq", commutative=True),
    _arith("clt", "char", "char", "({0} < {1})", "bool", negated="cge", swapped="cgt"),
    _arith("cle", "char", "char", "({0} <= {1})", "bool", negated="cgt", swapped="cge"),
    _arith("cgt", "char", "char", "({0} > {1})", "bool", negated="cle", swapped="clt"),
    _arith("cge", "char", "char", "({0} >= {1})", "bool", negated="clt", swapped="cle"),
    Op("char2int", "char", "value", ("char",), "int", py="char2int({0})", pure=True,
       llvm=("cast", "zext", "int")),
    Op("int2char", "char", "value", ("int",), "char", py="int2char({0})", may_trap=True),
    # bitcast
    Op("bits2float", "bitcast", "value", ("int",), "float", py="bits2float({0})", pure=True,
       llvm=("cast", "bitcast", "float")),
    Op("float2bits", "bitcast", "value", ("float",), "int", py="float2bits({0})", pure=True,
       llvm=("cast", "bitcast", "int")),
    # classic SSA
    Op("phi", "ssa", "value", None, "T", labels=-1),
    # ssa2: shadow variables
    Op("set", "ssa2", "effect", (None, "T"), None),
    Op("get", "ssa2", "value", (), "T"),
    Op("undef", "ssa2", "value", (), "T", pure=True),
    # speculation
    Op("speculate", "spec", "effect", (), None),
    Op("commit", "spec", "effect", (), None),
    Op("guard", "spec", "control", ("bool",), None, labels=1),
]

OPS = {op.name: op for op in _TABLE}

# Ops whose results are a pure function of their operands (safe to fold,
# value-number and remove when dead).  `div`/`int2char` may trap: fold them only
# when evaluation succeeds.
FOLDABLE = {name for name, op in OPS.items() if op.py is not None}

# Sets every tool derives from the table (never listed by hand elsewhere).
TERMINATORS = {"jmp", "br", "ret"}                  # end a block; nothing falls through
BLOCK_ENDERS = TERMINATORS | {"guard"}              # end a basic block
SPECULATION_OPS = frozenset(n for n, op in OPS.items() if op.ext == "spec")
SSA_OPS = frozenset(n for n, op in OPS.items() if op.ext in ("ssa", "ssa2"))
# State beyond a function's variables (open speculations, phi's labels, ssa2
# shadows): code holding these is not inlined, nor handed to native regions.
STATEFUL_OPS = SPECULATION_OPS | SSA_OPS
# Effects another part of the program can observe (output, the heap).
EFFECT_OPS = frozenset(n for n, op in OPS.items() if op.effect in ("output", "heap"))
# Integer comparisons (with `negated`/`swapped` in their rows).
INT_COMPARISONS = frozenset(n for n, op in OPS.items() if op.ext == "core"
                            and op.swapped is not None)
# Integer arithmetic that wraps around to 64 bits.
WRAPPING_OPS = frozenset(n for n, op in OPS.items()
                         if op.py is not None and op.py.startswith("wrap64("))


_compiled = {}


def evaluate(name, *operands):
    """Evaluate a foldable op on Python values; raises BrilError like the engine would."""
    fn = _compiled.get(name)
    if fn is None:
        op = OPS[name]
        params = [f"a{i}" for i in range(len(op.args))]
        src = f"lambda {', '.join(params)}: " + op.py.format(*params)
        fn = _compiled[name] = eval(src, dict(HELPERS))
    return fn(*operands)
