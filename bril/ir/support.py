"""Run-time support shared by the Python tiers (the cold tier and generated code).

The operand checks, the messages of calls (from `bril.ir.messages`), how many
operands each op takes: read by `bril.interpreter.cold` (which checks at run time) and
`bril.interpreter.codegen` (which emits the checks it cannot prove unnecessary), so both
tiers fail with the same message at the same point.
"""

from . import messages as M
from .errors import BrilError
from .ops import OPS
from .values import js_type_text

# Operand counts the reference checks before running an op ("add takes 2 argument(s); got 3").
ARG_COUNTS = {name: (len(op.args) if op.args is not None else None)
              for name, op in OPS.items() if name != "const"}

# The checking helper of each value kind (names in the generated code's namespace).
CHECKERS = {"int": "_cint", "bool": "_cbool", "float": "_cfloat", "char": "_cchar",
            "ptr": "_cptr"}
# The Python type holding each value kind (a pointer is a (data, offset, region) tuple).
PY_TYPES = {"int": int, "bool": bool, "float": float, "char": str, "ptr": tuple}
# The kind of a scalar value, by its Python type.
SCALAR_KIND = {t: k for k, t in PY_TYPES.items() if k != "ptr"}


def checked_expr(v, kind, msg):
    """Generated code for variable v checked to hold `kind`: the type test written
    out, the helper called only to raise.  (A helper call at every use costs more
    than the call itself in deep recursion: each call may push a new chunk of
    CPython's frame stack, 1.5x on ackermann's dynamic form.)"""
    return f"({v} if type({v}) is {PY_TYPES[kind].__name__} else {CHECKERS[kind]}({v}, {msg!r}))"


def check_stmt(v, kind, msg):
    """A statement raising msg unless variable v holds `kind` (see `checked_expr`)."""
    return f"if type({v}) is not {PY_TYPES[kind].__name__}: {CHECKERS[kind]}({v}, {msg!r})"


def operand_message(op, i, kind):
    """What the reference says when operand i of op is not of `kind`."""
    return M.text(M.OPERAND_KIND, op=op, i=i, kind="Pointer" if kind == "ptr" else kind)


def argcount_message(op, expected, found):
    return M.text(M.ARGCOUNT, op=op, expected=expected, found=found)


def nonvoid_message(ftype):
    return M.text(M.NONVOID_NO_VALUE, type=js_type_text(ftype))


def call_funcs_message(funcs):
    """The error of a `call` whose `funcs` is missing or empty."""
    if funcs is None:
        return M.MISSING_FUNCS
    return M.text(M.FUNCS_COUNT, found=len(funcs))


def arity_message(params, args):
    return M.text(M.ARITY, expected=len(params), found=len(args))


def decl_kind(typ):
    """The value kind a declared type checks ('any' for any; None: a type no value has)."""
    if typ in ("int", "bool", "float", "char", "any"):
        return typ
    if isinstance(typ, dict) and "ptr" in typ:
        return "ptr"
    return None


def unknown_type_message(typ):
    return M.text(M.UNKNOWN_TYPE, type=js_type_text(typ))


# --- the checking helpers ------------------------------------------------------------

def _checker(kind, pytype):
    """The helper checking that a value has one kind: it returns the value, or raises
    the reference's message (a closure: as fast as the test written out)."""
    def check(v, msg):
        if type(v) is pytype:
            return v
        raise BrilError(msg)
    check.__name__ = "c" + kind
    return check


cint = _checker("int", PY_TYPES["int"])
cbool = _checker("bool", PY_TYPES["bool"])
cfloat = _checker("float", PY_TYPES["float"])
cchar = _checker("char", PY_TYPES["char"])
cptr = _checker("ptr", PY_TYPES["ptr"])


def unknown_type(v, text):
    raise BrilError(M.text(M.UNKNOWN_TYPE, type=text))


CHECK_FUNCTIONS = {"_cint": cint, "_cbool": cbool, "_cfloat": cfloat, "_cchar": cchar,
                   "_cptr": cptr, "_unknown_type": unknown_type}
KIND_CHECK = {kind: CHECK_FUNCTIONS[name] for kind, name in CHECKERS.items()}


def any_variables(func):
    """The names func declares `any` (parameters and destinations)."""
    names = {p.get("name") for p in func.get("args") or () if p.get("type") == "any"}
    names.update(i.get("dest") for i in func.get("instrs") or () if i.get("type") == "any")
    names.discard(None)
    return names
