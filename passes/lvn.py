"""Local value numbering: common subexpressions, copy propagation, constant folding.

Within each basic block, every value gets a number; an expression whose
(op, operand numbers) was computed before, and is still held by some variable,
becomes a copy of that variable; arguments are replaced by the first variable
holding their value (copy propagation); commutative ops sort their operands;
ops on constant operands fold to `const` through `bril.ops.evaluate` (never when
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

from bril import ops
from bril.cfg import CFG, NameSupply, variable_names
from .safety import map_functions, SPEC_OPS
from .values import const_of, fold, as_const_instr

# Ops whose run-time error message names their operand variable
# ("Pointer p points to uninitialized data"): their operands keep their names.
NAMED_IN_ERRORS = {"load"}

# Ops whose result depends only on their operands: op-table templates, and
# `ptradd` (pure, evaluated by the engine with the heap's pointer type).
NUMBERED = ops.FOLDABLE | {"ptradd"}


class _Numbering:
    """Value numbers for one block: what each source name refers to, and which
    variables physically hold each value."""

    def __init__(self):
        self.env = {}           # source variable name -> value number
        self.phys = {}          # physical variable -> value number it holds
        self.holders = {}       # value number -> physical variables holding it
        self.consts = {}        # value number -> Const
        self.table = {}         # expression key -> value number
        self.count = 0

    def new(self):
        self.count += 1
        self.holders[self.count] = []
        return self.count

    def number(self, name):
        """The value number a source name refers to (live-in names get a fresh one)."""
        num = self.env.get(name)
        if num is None:
            num = self.new()
            self.env[name] = self.phys[name] = num
            self.holders[num].append(name)
        return num

    def home(self, num):
        return self.holders[num][0]

    def assign(self, name, phys, num):
        """Source name `name`, stored in physical variable `phys`, now holds `num`."""
        old = self.phys.get(phys)
        if old is not None:
            self.holders[old].remove(phys)
        self.phys[phys] = num
        self.holders[num].append(phys)
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
    vn = _Numbering()
    out = []
    for i, instr in enumerate(instrs):
        args = instr.get("args")
        nums = []
        if args:
            first = 1 if instr["op"] == "set" else 0     # set's first argument is a shadow name
            nums = [vn.number(a) for a in args[first:]]
            if instr["op"] in NAMED_IN_ERRORS:
                new_args = [a if vn.phys.get(a) == n else vn.home(n)
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
                if ops.OPS[op].commutative:
                    nums = sorted(nums)
                key = (op, tuple(nums))
                num = vn.table.get(key)
                if num is not None and vn.holders[num]:
                    instr = _copy_of(instr, vn.home(num))
                elif num is None:
                    num = vn.table[key] = vn.new()
        if num is None:
            num = vn.new()
        vn.assign(d, phys, num)
        out.append(instr)
    return out


def _number_of_const(vn, c):
    key = ("const", c.key())
    num = vn.table.get(key)
    if num is None:
        num = vn.table[key] = vn.new()
        vn.consts[num] = c
    return num


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
