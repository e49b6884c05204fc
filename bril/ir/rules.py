"""The rules of a well-formed Bril program, written once.

Two kinds of rules, two consumers:

* **Shape** (`shape_problems`): the JSON has the documented structure (a
  `functions` list, instructions that are objects with a known string `op`,
  string lists for `args`/`funcs`/`labels`, well-formed types, a const with a
  `dest` and a value).  Every tool's load-time check (`bril.ir.program.check_program`,
  and so `brili`, `bril-opt`, `brilc`...) raises the first of these; `bril-check`
  reports them all.
* **Types and names** (`type_problems`, for a program of the right shape): the
  reference checker's (`brilck`'s) rules and wording, from the signatures of the
  op table (`bril.ir.ops`): one type per variable in a function, operand and result
  types, operand, label and function counts, defined variables, labels and
  functions, `ret` against the function's type, a `ret` in every function with a
  result type, `@main` with no result type; plus what the reference interpreter
  only finds when it runs (two functions of one name, a non-integral int const,
  an `any` argument of `@main`).  `any` is compatible with every type (the
  dynamic extension).  `bril-check` reports these too.

A problem is a `Problem(message, pos, where)`: `pos` the (row, col) of the
instruction or function when the program carries positions (`bril2json -p`),
`where` a readable place (`@f, instruction 3`) otherwise.
"""

from . import messages as M
from .ops import OPS

_BASE_TYPES = ("int", "bool", "float", "char", "any")
_CONST_TYPES = {"int": (int, float), "float": (int, float), "bool": (bool,), "char": (str,)}


class Problem:
    __slots__ = ("message", "pos", "where")

    def __init__(self, message, pos=None, where=None):
        self.message = message
        self.pos = pos
        self.where = where

    def text(self):
        """The message with its place in the program when no position is known."""
        if self.pos is None and self.where:
            return f"{self.where}: {self.message}"
        return self.message

    def __repr__(self):
        return f"Problem({self.message!r}, {self.pos!r}, {self.where!r})"


def _pos(obj):
    p = obj.get("pos") if isinstance(obj, dict) else None
    if isinstance(p, dict) and isinstance(p.get("row"), int) and isinstance(p.get("col"), int):
        return (p["row"], p["col"])
    return None


def where(func, index):
    return f"@{func}, instruction {index}"


# --- shape ---------------------------------------------------------------------------

def type_is_wellformed(t):
    """A type is a name or a one-key object around a type (a loop, not recursion)."""
    while isinstance(t, dict) and len(t) == 1:
        (k, t), = t.items()
        if not isinstance(k, str):
            return False
    return isinstance(t, str)


def _malformed_type(t):
    import json
    return f"malformed type {json.dumps(t)}"


def instruction_shape(instr):
    """The first shape problem of one instruction (a message), or None."""
    if type(instr) is not dict:
        return "instruction must be a JSON object"
    if "op" not in instr:
        if not isinstance(instr.get("label"), str):
            return "neither an instruction (no 'op') nor a label"
        return None
    op = instr["op"]
    if not isinstance(op, str):
        return "'op' must be a string"
    if op not in OPS:
        return M.text(M.UNKNOWN_OPCODE, op=op)
    for key in ("args", "funcs", "labels"):
        v = instr.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return f"field '{key}' must be a list of strings"
    if "dest" in instr and not isinstance(instr["dest"], str):
        return "'dest' must be a string"
    if "type" in instr and not type_is_wellformed(instr["type"]):
        return _malformed_type(instr["type"])
    if op == "const":
        if "dest" not in instr:
            return "const needs a 'dest'"
        if not isinstance(instr.get("value"), (bool, int, float, str)):
            return "const needs a number, boolean or char 'value'"
    return None


def _import_ok(imp):
    return (isinstance(imp, dict) and isinstance(imp.get("path"), str)
            and isinstance(imp.get("functions"), list)
            and all(isinstance(f, dict) and isinstance(f.get("name"), str)
                    and isinstance(f.get("alias", ""), str) for f in imp["functions"]))


def program_header_problems(prog):
    """Shape problems of a program outside its functions; None if there is no
    `functions` list to look into."""
    if not isinstance(prog, dict):
        return None, [Problem("program must be a JSON object with a 'functions' list")]
    if not isinstance(prog.get("functions"), list):
        return None, [Problem("program must have a 'functions' list")]
    imports = prog.get("imports", [])
    if not isinstance(imports, list):
        return prog["functions"], [Problem("'imports' must be a list")]
    return prog["functions"], [
        Problem("malformed import: needs 'path' and a 'functions' list of names")
        for imp in imports if not _import_ok(imp)]


def function_header_problems(func):
    """Shape problems of a function outside its instructions; the second result
    says whether its instructions can be looked at."""
    if not isinstance(func, dict) or not isinstance(func.get("name"), str):
        return [Problem("every function needs a string 'name'")], False
    out = []
    fpos, fwhere = _pos(func), f"@{func['name']}"
    args = func.get("args", [])
    if not isinstance(args, list):
        out.append(Problem("'args' must be a list", fpos, fwhere))
    else:
        for a in args:
            if not (isinstance(a, dict) and isinstance(a.get("name"), str) and "type" in a):
                out.append(Problem("every argument needs a 'name' and a 'type'", fpos, fwhere))
            elif not type_is_wellformed(a["type"]):
                out.append(Problem(_malformed_type(a["type"]), fpos, fwhere))
    if "type" in func and not type_is_wellformed(func["type"]):
        out.append(Problem(_malformed_type(func["type"]), fpos, fwhere))
    if not isinstance(func.get("instrs"), list):
        out.append(Problem("function needs an 'instrs' list", fpos, fwhere))
        return out, False
    return out, True


def shape_problems(prog):
    """Every shape problem of a program, in order."""
    funcs, out = program_header_problems(prog)
    for func in funcs or ():
        problems, has_instrs = function_header_problems(func)
        out.extend(problems)
        if not has_instrs:
            continue
        name = func["name"]
        for i, instr in enumerate(func["instrs"]):
            msg = instruction_shape(instr)
            if msg is not None:
                out.append(Problem(msg, _pos(instr), where(name, i)))
    return out


# --- types ---------------------------------------------------------------------------

class _TVar:
    """The type variable of a polymorphic signature (`T`)."""
    def __repr__(self):
        return "T"


T = _TVar()


def _sig_type(t):
    """A signature type of the op table ('int', 'T', 'ptr', None) as a checker type."""
    if t == "ptr":
        return {"ptr": T}
    if t == "T" or t is None:
        return T
    return t


def signature(name):
    """(argument types, result type or None, label count) of an op, from the op table
    (`ptr` operands are `ptr<T>`); None for the ops checked by their own rules."""
    op = OPS[name]
    if op.args is None or name in ("const", "call", "ret", "print", "phi"):
        return None
    return ([_sig_type(a) for a in op.args],
            None if op.result is None else _sig_type(op.result), op.labels)


def _lookup(t, tenv):
    """t with its type variable replaced by its binding (if bound)."""
    depth = 0
    inner = t
    while isinstance(inner, dict) and "ptr" in inner:
        inner = inner["ptr"]
        depth += 1
    if inner is not T or T not in tenv:
        return t
    out = tenv[T]
    for _ in range(depth):
        out = {"ptr": out}
    return out


def compatible(a, b, tenv=None):
    """Whether a value of type a may be used where type b is wanted (b may hold the
    type variable, bound in tenv on first use); `any` matches everything."""
    b = _lookup(b, tenv) if tenv is not None else b
    while True:
        if b is T:
            tenv[T] = a
            return True
        if isinstance(a, str) and isinstance(b, str):
            return a == b or a == "any" or b == "any"
        if isinstance(a, dict) and isinstance(b, dict) and "ptr" in a and "ptr" in b:
            a, b = a["ptr"], b["ptr"]
            continue
        return False


def fmt(t):
    """A type as Bril text writes it: ptr<int>."""
    depth = 0
    keys = []
    while isinstance(t, dict) and len(t) == 1:
        (k, t), = t.items()
        keys.append(k)
        depth += 1
    out = "T" if t is T else str(t)
    for k in reversed(keys):
        out = f"{k}<{out}>"
    return out


def _known_type(t):
    while isinstance(t, dict):
        if "ptr" not in t:
            return False
        t = t["ptr"]
    return t in _BASE_TYPES


class _Func:
    __slots__ = ("args", "ret")

    def __init__(self, args, ret):
        self.args = args
        self.ret = ret


def type_problems(prog):
    """Every type and name problem of a program of the right shape, in the order of
    the reference checker (per function: declarations, labels, instructions)."""
    out = []
    funcs = {}
    for func in prog["functions"]:
        name = func["name"]
        if name in funcs:
            out.append(Problem(M.text(M.MULTIPLE_FUNCTIONS, name=name), _pos(func), f"@{name}"))
        funcs[name] = _Func([a["type"] for a in func.get("args") or []], func.get("type"))
    for imp in prog.get("imports") or []:
        for f in imp["functions"]:
            funcs.setdefault(f.get("alias") or f["name"], None)     # signature unknown here
    for func in prog["functions"]:
        _check_function(func, funcs, out)
    return out


def _check_function(func, funcs, out):
    name = func["name"]
    fpos, fwhere = _pos(func), f"@{name}"
    vars_ = {}
    labels = set()

    def err(message, instr=None, index=None):
        if instr is None:
            out.append(Problem(message, fpos, fwhere))
        else:
            out.append(Problem(message, _pos(instr), where(name, index)))

    def declare(var, typ, instr=None, index=None):
        old = vars_.get(var)
        if old is None:
            vars_[var] = typ
        elif old != typ:
            err(f"new type {fmt(typ)} for {var} conflicts with old type {fmt(old)}", instr, index)

    for a in func.get("args") or []:
        if not _known_type(a["type"]):
            err(M.text(M.UNKNOWN_TYPE, type=fmt(a["type"])))
        elif name == "main" and a["type"] == "any":
            err(f"argument {a['name']} of @main cannot have type any")
        declare(a["name"], a["type"])
    if "type" in func and not _known_type(func["type"]):
        err(M.text(M.UNKNOWN_TYPE, type=fmt(func["type"])))
    instrs = func["instrs"]
    for i, instr in enumerate(instrs):
        if "op" not in instr:
            if instr["label"] in labels:
                err(f"multiply defined label .{instr['label']}", instr, i)
            labels.add(instr["label"])
        elif "dest" in instr:
            if "type" in instr:
                declare(instr["dest"], instr["type"], instr, i)
    ret_type = func.get("type")
    has_ret = False
    for i, instr in enumerate(instrs):
        op = instr.get("op")
        if op is None:
            continue
        if op == "const":
            _check_const(instr, lambda m: err(m, instr, i))
            continue
        if op == "ret":
            has_ret = True
        if "type" in instr and op != "const" and not _known_type(instr["type"]):
            err(M.text(M.UNKNOWN_TYPE, type=fmt(instr["type"])), instr, i)
            continue
        _check_op(instr, vars_, labels, funcs, ret_type, lambda m: err(m, instr, i))
    if ret_type is not None and not has_ret:
        err("function with return type must have at least one `ret`")
    if name == "main" and ret_type is not None:
        err(f"@main must have no return type; found {fmt(ret_type)}")


def _check_const(instr, err):
    if "type" not in instr:
        err("const missing type")
        return
    typ = instr["type"]
    if not isinstance(typ, str):
        err(f"const of non-primitive type {fmt(typ)}")
        return
    if typ == "any":
        return
    kinds = _CONST_TYPES.get(typ)
    if kinds is None:
        err(f"unknown const type {typ}")
        return
    v = instr["value"]
    if (type(v) is bool) != (typ == "bool") or not isinstance(v, kinds):
        shown = "true" if v is True else "false" if v is False else v
        err(f"const value {shown} does not match type {typ}")
    elif typ == "int" and isinstance(v, float) and not v.is_integer():
        err(M.text(M.CONST_NOT_INT, value=v))
    elif typ == "char" and len(v) != 1:
        err(M.CONST_CHAR_LENGTH)


def _check_op(instr, vars_, labels, funcs, ret_type, err):
    op = instr["op"]
    if op == "print":
        if "type" in instr:
            err("print should have no result type")
        _check_defined(instr.get("args") or [], vars_, err)
        return
    if op == "call":
        fnames = instr.get("funcs") or []
        if len(fnames) != 1:
            err(f"call should have one function, not {len(fnames)}")
            return
        if fnames[0] not in funcs:
            err(f"function @{fnames[0]} undefined")
            return
        ftype = funcs[fnames[0]]
        if ftype is None:       # imported: its signature is checked where it is defined
            _check_defined(instr.get("args") or [], vars_, err)
            return
        _check_sig(instr, (ftype.args, ftype.ret, 0), vars_, labels, err, f"@{fnames[0]}")
        return
    if op == "ret":
        args = instr.get("args") or []
        if ret_type is not None:
            if not args:
                err("missing return value in function with return type")
            elif len(args) != 1:
                err("cannot return multiple values")
            else:
                _check_sig(instr, ([ret_type], None, 0), vars_, labels, err)
        elif args:
            err("returning value in function without a return type")
        return
    if op == "phi":
        args, labs = instr.get("args") or [], instr.get("labels") or []
        if len(args) != len(labs):
            err(f"phi needs one label per argument; found {len(args)} args, {len(labs)} labels")
            return
        _check_sig(instr, ([T] * len(args), T, len(labs)), vars_, labels, err,
                   undefined_ok=True)
        return
    _check_sig(instr, signature(op), vars_, labels, err)


def _check_defined(args, vars_, err):
    for i, a in enumerate(args):
        if a not in vars_:
            err(f"{a} (arg {i}) undefined")


def _check_sig(instr, sig, vars_, labels, err, name=None, undefined_ok=False):
    """brilck's checkSig: result type, operands, labels."""
    name = name or instr["op"]
    arg_types, dest, label_count = sig
    tenv = {}
    if "type" in instr:
        if dest is not None:
            if not compatible(instr["type"], dest, tenv):
                err(f"result type of {name} should be {fmt(_lookup(dest, tenv))}, "
                    f"but found {fmt(instr['type'])}")
        else:
            err(f"{name} should have no result type")
    elif dest is not None:
        err(f"missing result type {fmt(_lookup(dest, tenv))} for {name}")
    args = instr.get("args") or []
    if len(args) != len(arg_types):
        err(f"{name} expects {len(arg_types)} args, not {len(args)}")
    else:
        for i, a in enumerate(args):
            typ = vars_.get(a)
            if typ is None:
                if not undefined_ok:
                    err(f"{a} (arg {i}) undefined")
                continue
            if not compatible(typ, arg_types[i], tenv):
                err(f"{a} has type {fmt(typ)}, but arg {i} for {name} "
                    f"should have type {fmt(_lookup(arg_types[i], tenv))}")
    labs = instr.get("labels") or []
    if label_count == -1:
        label_count = len(labs)
    if len(labs) != label_count:
        err(f"{instr['op']} needs {label_count} labels; found {len(labs)}")
    else:
        for lab in labs:
            if lab not in labels:
                err(f"label .{lab} undefined")


def problems(prog):
    """Every problem of a program: its shape problems, or, when it has the right
    shape, its type and name problems."""
    shape = shape_problems(prog)
    if shape:
        return shape
    return type_problems(prog)
