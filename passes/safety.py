"""What a pass may do to an instruction without changing the program's behaviour.

Passes must not change what a program prints, its exit code or its errors.  An
instruction whose result is unused can still fail at run time: a division by
zero, a load, an op applied to a value of the wrong type (possible with the
dynamic `any` type, `undef`, or values loaded from memory), or a read of a
variable that is not assigned on the path taken.  `cannot_fail` says when none
of that can happen; only then may a pass delete or move an instruction.

It rests on *trusted kinds*: a variable's kind (int, bool, float, char or
pointer) is trusted when every definition of it in the function is sure to
produce a value of its declared kind (constants, op results, checked call
results and arguments, copies of trusted variables).  Loaded values and
anything typed `any` are never trusted.

Functions that use speculation are left alone by every pass: variables
assigned inside a speculate..commit region roll back when a guard fails, which
none of the analyses model.
"""

import contextvars
import copy

from bril.ir import ops
from bril.analysis.dataflow import defined_vars, defined_before_each, dest, uses
from bril.analysis.folding import const_of

SPEC_OPS = ops.SPECULATION_OPS


def ops_in(func):
    return {i["op"] for i in func.get("instrs", ()) if "op" in i}


def arg_names(func):
    return [a["name"] for a in func.get("args", ())]


def well_formed(func):
    """True if every instruction has the shape its op needs: a `dest` and a
    `type` exactly for value ops (optional for `call`), and the documented
    numbers of arguments, labels and function names.  Passes leave other
    functions unchanged: the interpreter reports their problems when they run."""
    for instr in func.get("instrs", ()):
        op = instr.get("op")
        if op is None:
            continue
        spec = ops.OPS[op]
        has_dest = "dest" in instr
        if has_dest != ("type" in instr):
            return False
        if has_dest != spec.is_value and not spec.optional_result:
            return False
        if op == "const" and "value" not in instr:
            return False
        nargs = len(instr.get("args", ()))
        if spec.args is not None and nargs != len(spec.args):
            return False
        if op == "ret" and nargs > 1:
            return False
        nlabels = len(instr.get("labels", ()))
        if nlabels != (nargs if spec.labels == -1 else spec.labels):
            return False
        if len(instr.get("funcs", ())) != spec.funcs:
            return False
    return True


def copy_program(prog):
    """A deep copy of a program dict, as `copy.deepcopy` makes, several times
    faster: the program's own levels (functions, instructions, their lists) are
    copied in loops; only unusual nested values (types, extra fields) go
    through `copy.deepcopy`."""
    deep = copy.deepcopy

    def value(v):
        t = type(v)
        if t is str or t is int or t is bool or t is float or v is None:
            return v
        if t is list and all(type(x) is str for x in v):
            return v.copy()
        return deep(v)

    out = {}
    for key, v in prog.items():
        if key != "functions" or type(v) is not list:
            out[key] = deep(v)
            continue
        funcs = []
        for f in v:
            if type(f) is not dict:
                funcs.append(deep(f))
                continue
            nf = {}
            for fk, fv in f.items():
                if fk == "instrs" and type(fv) is list:
                    nf[fk] = [{k: value(x) for k, x in i.items()} if type(i) is dict else deep(i)
                              for i in fv]
                else:
                    nf[fk] = deep(fv)
            funcs.append(nf)
        out[key] = funcs
    return out


# While a pipeline runs on a program it owns (`owning`): {id(function dict):
# (the dict, whether it is well formed)}; else None.  Its passes change the
# program in place instead of copying it each (a pass's input there is the
# previous pass's output, which nothing else holds), and a function's shape is
# judged once: a pass leaves a malformed function alone and keeps a well-formed
# one so.  (The dict is held: its id cannot be reused meanwhile.)
_OWNED = contextvars.ContextVar("bril_pass_owns_program", default=None)


class owning:
    """`with owning(): ...`: the passes run inside change the program they are
    given (the caller made it its own, `copy_program`) rather than a copy."""

    def __enter__(self):
        self.token = _OWNED.set({})

    def __exit__(self, *exc):
        _OWNED.reset(self.token)


def map_functions(prog, transform, avoid=SPEC_OPS):
    """A deep copy of `prog` (`prog` itself inside `owning`) where every
    well-formed function that uses none of the ops in `avoid` gets
    `transform(func)` (which returns its new instructions)."""
    shapes = _OWNED.get()
    out = prog if shapes is not None else copy_program(prog)
    for func in out["functions"]:
        if ops_in(func) & avoid:
            continue
        if shapes is None:
            ok = well_formed(func)
        else:
            known = shapes.get(id(func))
            ok = known[1] if known is not None else well_formed(func)
            if known is None:
                shapes[id(func)] = (func, ok)
        if ok:
            func["instrs"] = transform(func)
    return out


def kind(typ):
    """'int', 'bool', 'float', 'char' or 'ptr' for a Bril type; None for 'any'/unknown."""
    if typ in ("int", "bool", "float", "char"):
        return typ
    if isinstance(typ, dict) and "ptr" in typ:
        return "ptr"
    return None


_RESULT_KIND = {name: (op.result if op.result in ("int", "bool", "float", "char") else None)
                for name, op in ops.OPS.items()}
_RESULT_KIND["ptradd"] = "ptr"
_RESULT_KIND["alloc"] = "ptr"


def trusted_kinds(func):
    """Map each trusted variable of the function to its kind (see module doc)."""
    declared = {}
    defs = {}
    for a in func.get("args", ()):
        declared.setdefault(a["name"], set()).add(kind(a.get("type")))
        defs.setdefault(a["name"], []).append(None)      # None: an argument
    sets = {}
    for instr in func.get("instrs", ()):
        d = instr.get("dest")
        if d is not None:
            declared.setdefault(d, set()).add(kind(instr.get("type")))
            defs.setdefault(d, []).append(instr)
        if instr.get("op") == "set" and len(instr.get("args", ())) == 2:
            sets.setdefault(instr["args"][0], []).append(instr["args"][1])
    trusted = {v: next(iter(ks)) for v, ks in declared.items()
               if len(ks) == 1 and None not in ks}

    # What each definition produces is fixed, except for copies (`id`, `phi`: of
    # their arguments) and `get` (of what the `set`s write): those depend on
    # which variables stay trusted.  Judge the rest once, then drop variables
    # with a dependent definition until stable (the greatest fixpoint).
    depends = {}                        # variable -> variables its value comes from
    for v in list(trusted):
        k = trusted[v]
        sources = []
        for instr in defs[v]:
            if instr is None:
                continue                # arguments are checked at the call
            op = instr["op"]
            if op in ("id", "phi"):
                sources.extend(instr.get("args", ()))
            elif op == "get":
                sources.extend(sets.get(instr["dest"], ()))
            elif op == "const":
                c = const_of(instr)
                if c is None or c.type != k:
                    break
            elif op == "call":
                continue                # the interpreter checks the result's type
            elif op in ("load", "undef") or _RESULT_KIND.get(op) != k:
                break
        else:
            if sources:
                depends[v] = sources
            continue
        del trusted[v]
    changed = True
    while changed:
        changed = False
        for v, sources in list(depends.items()):
            k = trusted[v]
            if not all(trusted.get(a) == k for a in sources):
                del trusted[v]
                del depends[v]
                changed = True
    return trusted


def _operand_kinds_ok(op, args, kinds):
    sig = ops.OPS[op].args
    if sig is None or len(sig) != len(args):
        return False
    t_kind = None
    for want, a in zip(sig, args):
        have = kinds.get(a)
        if have is None:
            return False
        if want == "T":
            if t_kind is not None and have != t_kind:
                return False
            t_kind = have
        elif want != have:
            return False
    return True


class FunctionFacts:
    """Per-function facts for `cannot_fail`: trusted kinds and definite assignment."""

    def __init__(self, func, cfg):
        self.kinds = trusted_kinds(func)
        self.cfg = cfg
        self.def_in, _ = defined_vars(cfg, arg_names(func))

    def defined_before(self, block):
        """For each instruction of the block: the variables surely assigned before it."""
        return defined_before_each(block, self.def_in.get(block.name, frozenset()))

    def cannot_fail(self, instr, defined):
        """True if the instruction can never raise a run-time error, given the
        variables `defined` surely assigned before it; such an instruction may be
        deleted when its result is unused, or computed at another point."""
        op = instr.get("op")
        if op == "nop":
            return True
        if op == "const":
            return const_of(instr) is not None
        if not all(a in defined for a in uses(instr)):
            return False
        if op in ("id", "undef"):
            return True
        spec = ops.OPS.get(op)
        if spec is None or not spec.pure or dest(instr) is None:
            return False
        return _operand_kinds_ok(op, instr.get("args", ()), self.kinds)
