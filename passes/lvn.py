"""Local value numbering: common subexpressions, copy propagation, constant folding.

Within each basic block, every value gets a number; an expression whose
(op, operand numbers) was computed before, and is still held by some variable,
becomes a copy of that variable; arguments are replaced by the first variable
holding their value (copy propagation); commutative ops sort their operands;
ops on constant operands fold to `const` through `bril.analysis.folding` (never when
evaluation raises: a division by zero stays to fail at run time).

Only ops with a Python meaning in the op table are numbered (they are
deterministic; for `div` and `int2char` a repeated computation either never
runs, because the first one failed, or gives the same value).  Loads, calls,
`get`, `phi` and `undef` produce fresh, unknown values.

A definition that is overwritten later in the same block is renamed to a fresh
variable so its value stays available.  `get` is never renamed (its destination
names the shadow variable it reads).

`lvn_block` rewrites one straight-line instruction list and can be reused on
traces.
"""

from bril.ir import ops
from bril.analysis.cfg import CFG, NameSupply, variable_names
from bril.analysis.numbering import ValueNumbers
from .safety import map_functions, SPEC_OPS
from bril.analysis.folding import const_of, fold, as_const_instr

# Ops whose run-time error message names their operand variable
# ("Pointer p points to uninitialized data"): their operands keep their names.
NAMED_IN_ERRORS = {"load"}

# Ops whose result depends only on their operands: op-table templates, and
# `ptradd` (pure, evaluated by the engine with the heap's pointer type).
NUMBERED = ops.FOLDABLE | {"ptradd"}


class _BlockNumbers(ValueNumbers):
    """Value numbers for one block, where a source name's definition may be
    renamed: `env` says which value each source name refers to, the table's
    variables are the physical ones."""

    __slots__ = ("env",)

    def __init__(self):
        super().__init__()
        self.env = {}           # source variable name -> value number

    def source(self, name):
        """The value number a source name refers to (live-in names get a fresh one)."""
        num = self.env.get(name)
        if num is None:
            num = self.env[name] = self.number(name)
        return num

    def define(self, name, phys, num):
        """Source name `name`, stored in physical variable `phys`, now holds `num`."""
        self.assign(phys, num)
        self.env[name] = num


def lvn_block(instrs, names):
    """Value-number one straight-line list of instructions (no labels inside).

    names: a `NameSupply` over every variable name in the function."""
    last_def = {}
    named = set()
    for i, instr in enumerate(instrs):
        if "dest" in instr:
            last_def[instr["dest"]] = i
        if instr.get("op") in NAMED_IN_ERRORS:
            named.update(instr.get("args", ()))
    vn = _BlockNumbers()
    out = []
    for i, instr in enumerate(instrs):
        args = instr.get("args")
        nums = []
        if args:
            first = 1 if instr["op"] == "set" else 0     # set's first argument is a shadow name
            nums = [vn.source(a) for a in args[first:]]
            if instr["op"] in NAMED_IN_ERRORS:
                new_args = [a if vn.num_of.get(a) == n else vn.home(n)
                            for a, n in zip(args, nums)]
            else:
                new_args = args[:first] + [vn.home(n) for n in nums]
            if new_args != args:
                instr = dict(instr, args=new_args)
        d = instr.get("dest")
        if d is None:
            out.append(instr)
            continue
        op = instr["op"]
        phys = d
        if last_def[d] != i and op != "get" and d not in named:
            phys = names.fresh(d)
            instr = dict(instr, dest=phys)
        num = None
        if op == "const":
            c = const_of(instr)
            if c is not None:
                num = _number_of_const(vn, c)
        elif op == "id" and len(nums) == 1:
            num = nums[0]
            c = vn.consts.get(num)
            if c is not None:
                instr = as_const_instr(instr, c) or instr
        elif op in NUMBERED and nums:
            consts = [vn.consts.get(n) for n in nums]
            c = fold(op, consts) if None not in consts else None
            if c is not None:
                num = _number_of_const(vn, c)
                instr = as_const_instr(instr, c) or instr
            else:
                num, seen = vn.of_expr(op, nums)
                if seen and vn.home(num) is not None:
                    instr = _copy_of(instr, vn.home(num))
        if num is None:
            num = vn.new()
        vn.define(d, phys, num)
        out.append(instr)
    return out


def _number_of_const(vn, c):
    return vn.of_const(("const", c.key()), c)


def _copy_of(instr, var):
    new = {k: v for k, v in instr.items() if k not in ("funcs", "labels")}
    new["op"] = "id"
    new["args"] = [var]
    return new


def lvn_instrs(func):
    names = NameSupply(variable_names(func))
    cfg = CFG.from_function(func)
    for block in cfg.blocks.values():
        block.instrs = lvn_block(block.instrs, names)
    return cfg.to_instrs()


def lvn(prog):
    """Pass: local value numbering on every function."""
    return map_functions(prog, lvn_instrs, avoid=SPEC_OPS)
