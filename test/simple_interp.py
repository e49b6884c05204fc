"""A deliberately simple Bril interpreter: the oracle for the property tests.

Every engine we build (the fast interpreter, later the tracer and the JIT)
must agree with this one on generated programs.  It is written for
obviousness, not speed: a dict of variables per call, one `if` per op kind,
the meaning of every pure op taken from `bril.ir.ops.evaluate` (the one table of
op semantics), and the reference interpreter's error messages.

Semantics follow the project's decisions (team brief / DESIGN-NOTES), not the
reference interpreter's quirks: integers are exact 64-bit values, and an inner
`commit` returns to the parent speculation instead of ending all of them.
"""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
import math

from bril.ir.errors import BrilError
from bril.ir.ops import OPS, evaluate, wrap64


@dataclass
class Outcome:
    """What one run of a program shows to a user of `brili -p`."""
    stdout: str
    error: str | None      # the message after `error: `, or None on success
    count: int | None      # `total_dyn_inst`, None when the run failed


# --- printing values exactly as the reference (JavaScript) does ---------------------

_EXACT = Context(prec=1200)   # enough digits for any double's exact decimal value


def _to_fixed_17(x):
    """JavaScript `x.toFixed(17)` for |x| < 1e21: exact value, ties away from zero."""
    d = Decimal(x).quantize(Decimal("1e-17"), rounding=ROUND_HALF_UP, context=_EXACT)
    return f"{d:f}"


def _to_exponential_17(x):
    """JavaScript `x.toExponential(17)`: 18 significant digits, ties away from zero."""
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    sign = "-" if x < 0 else ""
    d = Decimal(abs(x))
    exp = d.adjusted()
    mant = d.scaleb(-exp, context=_EXACT).quantize(
        Decimal("1e-17"), rounding=ROUND_HALF_UP, context=_EXACT)
    if mant >= 10:                       # 9.99...95 rounded up to 10
        exp += 1
        mant = d.scaleb(-exp, context=_EXACT).quantize(
            Decimal("1e-17"), rounding=ROUND_HALF_UP, context=_EXACT)
    return f"{sign}{mant:f}e{'+' if exp >= 0 else '-'}{abs(exp)}"


def format_float(x):
    if math.isnan(x):
        return "NaN"
    if x == 0.0:
        return "-0.00000000000000000" if math.copysign(1.0, x) < 0 else "0.00000000000000000"
    if math.isinf(x) or abs(math.log10(abs(x))) >= 10:
        return _to_exponential_17(x)
    return _to_fixed_17(x)


def format_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, Pointer):
        return f"ptr({v.base},{v.offset})"   # unspecified by Bril; never compared
    return str(v)


# --- values ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Pointer:
    base: int
    offset: int
    elem: object      # the pointed-to type


_UNDEF = object()

_TYPE_CHECK = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: isinstance(v, float),
    "char": lambda v: isinstance(v, str),
}


def _has_type(v, typ):
    if typ == "any" or typ == "T":
        return True
    if isinstance(typ, dict) or typ == "ptr":
        return isinstance(v, Pointer)
    check = _TYPE_CHECK.get(typ)
    return check(v) if check else False


def _same_type(a, b):
    if a == "any" or b == "any":
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return _same_type(a.get("ptr"), b.get("ptr"))
    return a == b


def _type_name(typ):
    if isinstance(typ, dict):
        (k, v), = typ.items()
        return f"{k}<{_type_name(v)}>"
    return str(typ)


# --- the interpreter ------------------------------------------------------------------

class _Return(Exception):
    pass


class Interpreter:
    def __init__(self, prog):
        self.funcs = {}
        for f in prog["functions"]:
            if f["name"] in self.funcs:
                raise BrilError(f"multiple functions of name {f['name']} found")
            self.funcs[f["name"]] = f
        self.heap = {}          # base -> list of values (None: uninitialised)
        self.next_base = 0
        self.out = []
        self.count = 0

    # main's command-line arguments
    @staticmethod
    def parse_arg(text, typ):
        if typ == "int":
            try:
                return wrap64(int(text))
            except ValueError:
                raise BrilError(f"int argument to main must be an integer; got {text}")
        if typ == "float":
            try:
                v = float(text)
            except ValueError:
                v = math.nan
            if math.isnan(v):
                raise BrilError(f"float argument to main must not be 'NaN'; got {text}")
            return v
        if typ == "bool":
            if text in ("true", "false"):
                return text == "true"
            raise BrilError(f"boolean argument to main must be 'true'/'false'; got {text}")
        if typ == "char":
            if len(text) != 1:
                raise BrilError(f"char argument to main must have one character; got {text}")
            return text
        raise BrilError(f"unsupported type for main argument: {_type_name(typ)}")

    def run_main(self, argv):
        main = self.funcs.get("main")
        if main is None:
            raise BrilError("no function of name main found")
        params = main.get("args", [])
        if len(params) != len(argv):
            raise BrilError(
                f"mismatched main argument arity: expected {len(params)}; got {len(argv)}")
        env = {p["name"]: self.parse_arg(a, p["type"]) for p, a in zip(params, argv)}
        self.call_function(main, env)
        if self.heap:
            raise BrilError("Some memory locations have not been freed by end of execution.")

    def call_function(self, func, env):
        """Run `func` with the given variables; return its value (or None)."""
        instrs = func["instrs"]
        labels = {ins["label"]: i for i, ins in enumerate(instrs) if "label" in ins}
        spec_stack = []       # saved variable dicts, innermost last
        shadow = {}           # ssa2 `set`/`get` shadow variables
        pc = 0

        def arg(ins, i, typ=None):
            names = ins.get("args", [])
            if i >= len(names):
                raise BrilError(f"{ins['op']} expected at least {i + 1} arguments; got {len(names)}")
            name = names[i]
            if name not in env:
                raise BrilError(f"undefined variable {name}")
            v = env[name]
            if typ is not None and typ != "T" and not _has_type(v, typ):
                raise BrilError(f"{ins['op']} argument {i} must be a {_type_name(typ)}")
            return v

        def jump(label):
            if label not in labels:
                raise BrilError(f"label {label} not found")
            return labels[label]

        while pc < len(instrs):
            ins = instrs[pc]
            pc += 1
            if "op" not in ins:
                continue
            op = ins["op"]
            self.count += 1
            spec = OPS.get(op)
            if spec is None:
                raise BrilError(f"unknown opcode {op}")
            if spec.args is not None and op != "const":
                got = len(ins.get("args", []))
                if got != len(spec.args):
                    raise BrilError(f"{op} takes {len(spec.args)} argument(s); got {got}")
            if spec_stack and op in ("call", "ret"):
                raise BrilError(f"{op} not allowed during speculation")

            if op == "const":
                v = ins["value"]
                t = ins.get("type")
                if t == "float":
                    v = float(v)
                elif t == "int" and not isinstance(v, bool):
                    v = wrap64(int(v))
                env[ins["dest"]] = v
            elif op in ("and", "or") and arg(ins, 0, "bool") == (op == "or"):
                # Short-circuit like the reference: the second argument is not
                # even looked up (an undefined or ill-typed one goes unnoticed).
                env[ins["dest"]] = op == "or"
            elif spec.py is not None:
                vals = [arg(ins, i, t) for i, t in enumerate(spec.args)]
                env[ins["dest"]] = evaluate(op, *vals)
            elif op == "nop":
                pass
            elif op == "print":
                vals = []
                for i in range(len(ins.get("args", []))):
                    v = arg(ins, i)
                    if v is _UNDEF:
                        raise BrilError("print of undefined value")
                    vals.append(format_value(v))
                self.out.append(" ".join(vals) + "\n")
            elif op == "jmp":
                pc = jump(ins["labels"][0])
            elif op == "br":
                pc = jump(ins["labels"][0 if arg(ins, 0, "bool") else 1])
            elif op == "ret":
                names = ins.get("args", [])
                if len(names) > 1:
                    raise BrilError(f"ret takes 0 or 1 argument(s); got {len(names)}")
                return arg(ins, 0) if names else None
            elif op == "call":
                self.call(ins, env)
            elif op == "alloc":
                n = arg(ins, 0, "int")
                t = ins.get("type")
                if not isinstance(t, dict) or "ptr" not in t:
                    raise BrilError(f"cannot allocate non-pointer type {_type_name(t)}")
                if n <= 0:
                    raise BrilError(f"must allocate a positive amount of memory: {n} <= 0")
                base = self.next_base
                self.next_base += 1
                self.heap[base] = [None] * n
                env[ins["dest"]] = Pointer(base, 0, t["ptr"])
            elif op == "free":
                p = arg(ins, 0, "ptr")
                if p.base not in self.heap or p.offset != 0:
                    raise BrilError(f"Tried to free illegal memory location base: {p.base}, "
                                    f"offset: {p.offset}. Offset must be 0.")
                del self.heap[p.base]
            elif op == "store":
                p = arg(ins, 0, "ptr")
                v = arg(ins, 1, p.elem)
                cells = self._cells(p)
                cells[p.offset] = v
            elif op == "load":
                p = arg(ins, 0, "ptr")
                v = self._cells(p)[p.offset]
                if v is None:
                    raise BrilError(f"Pointer {ins['args'][0]} points to uninitialized data")
                env[ins["dest"]] = v
            elif op == "ptradd":
                p = arg(ins, 0, "ptr")
                env[ins["dest"]] = Pointer(p.base, p.offset + arg(ins, 1, "int"), p.elem)
            elif op == "set":
                shadow[ins["args"][0]] = arg(ins, 1)
            elif op == "get":
                if ins["dest"] not in shadow:
                    raise BrilError(f"get without corresponding set for {ins['dest']}")
                env[ins["dest"]] = shadow[ins["dest"]]
            elif op == "undef":
                env[ins["dest"]] = _UNDEF
            elif op == "speculate":
                spec_stack.append(env)
                env = dict(env)
            elif op == "commit":
                if not spec_stack:
                    raise BrilError("commit in non-speculative state")
                spec_stack.pop()              # back to the parent context, keeping env
            elif op == "guard":
                if not arg(ins, 0, "bool"):
                    if not spec_stack:
                        raise BrilError("abort in non-speculative state")
                    env = spec_stack.pop()    # roll variables back; heap and output stay
                    pc = jump(ins["labels"][0])
            else:
                raise BrilError(f"unsupported opcode {op}")
        if spec_stack:
            raise BrilError("implicit return in speculative state")
        return None

    def _cells(self, p):
        cells = self.heap.get(p.base)
        if cells is None or not 0 <= p.offset < len(cells):
            raise BrilError(f"Uninitialized heap location {p.base} and/or illegal offset {p.offset}")
        return cells

    def call(self, ins, env):
        name = ins["funcs"][0]
        func = self.funcs.get(name)
        if func is None:
            raise BrilError(f"no function of name {name} found")
        params = func.get("args", [])
        names = ins.get("args", [])
        if len(params) != len(names):
            raise BrilError(f"function expected {len(params)} arguments, got {len(names)}")
        new_env = {}
        for p, n in zip(params, names):
            if n not in env:
                raise BrilError(f"undefined variable {n}")
            if not _has_type(env[n], p["type"]):
                raise BrilError("function argument type mismatch")
            new_env[p["name"]] = env[n]
        result = self.call_function(func, new_env)
        if "dest" not in ins:
            if result is not None:
                raise BrilError("unexpected value returned without destination")
            if "type" in func:
                raise BrilError(f"non-void function (type: {_type_name(func['type'])}) "
                                "doesn't return anything")
            return
        if result is None:
            raise BrilError(f"non-void function (type: {_type_name(func.get('type'))}) "
                            "doesn't return anything")
        if not _has_type(result, ins.get("type")):
            raise BrilError("type of value returned by function does not match destination type")
        if "type" not in func:
            raise BrilError("function with void return type used in value call")
        if not _same_type(ins["type"], func["type"]):
            raise BrilError("type of value returned by function does not match declaration")
        env[ins["dest"]] = result


def run(prog, argv=()):
    """Run `prog` with command-line arguments `argv`; never raises BrilError."""
    interp = None
    try:
        interp = Interpreter(prog)
        interp.run_main([str(a) for a in argv])
    except BrilError as err:
        return Outcome("".join(interp.out) if interp else "", err.message, None)
    return Outcome("".join(interp.out), None, interp.count)
