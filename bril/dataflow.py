"""A generic dataflow solver and the classic analyses built on it.

Also the two facts every analysis needs about an instruction: which ordinary
variables it reads (`uses`) and which it writes (`dest`).  The ssa2 `set`
instruction names a *shadow* variable in its first argument; shadow variables
are a separate namespace and are not uses.
"""


def uses(instr):
    """The ordinary variables an instruction reads, in order."""
    args = instr.get("args", ())
    if instr.get("op") == "set":
        return list(args[1:])
    return list(args)


def dest(instr):
    return instr.get("dest")


def solve(cfg, *, forward, boundary, init, merge, transfer):
    """Solve a dataflow problem over `cfg` with a worklist.

    forward: direction.  boundary: the value entering the function (forward) or
    leaving it (backward).  init: the starting value of every block's result.
    merge(values): combine a list of values (never empty).  transfer(block, value):
    the value after (forward) or before (backward) the block.

    Returns (before, after): per block name, the value at the block's start and
    at its end in program order (for backward problems too)."""
    blocks = cfg.blocks
    order = cfg.reverse_postorder()
    seen = set(order)
    order += [n for n in blocks if n not in seen]
    if not forward:
        order.reverse()
    into = cfg.preds if forward else cfg.succs
    outof = cfg.succs if forward else cfg.preds
    result = {n: init for n in blocks}      # the transfer output of each block
    incoming = {}
    work = list(reversed(order))            # a stack: pop() takes order[0] first
    queued = set(work)
    while work:
        n = work.pop()
        queued.discard(n)
        vals = [result[p] for p in into[n]]
        if forward and n == cfg.entry or not forward and blocks[n].returns:
            vals.append(boundary)
        incoming[n] = merge(vals) if vals else init
        out = transfer(blocks[n], incoming[n])
        if out != result[n]:
            result[n] = out
            for s in outof[n]:
                if s not in queued:
                    queued.add(s)
                    work.append(s)
    if forward:
        return incoming, result
    return result, incoming


# --- Liveness ---------------------------------------------------------------------------

def block_use_def(block):
    """(variables read before written in the block, variables written in it)."""
    used, defined = set(), set()
    for instr in block.instrs:
        used.update(v for v in uses(instr) if v not in defined)
        d = dest(instr)
        if d is not None:
            defined.add(d)
    return used, defined


def liveness(cfg):
    """(live_in, live_out): the variables live at each block's start and end."""
    summary = {n: block_use_def(b) for n, b in cfg.blocks.items()}

    def transfer(block, live_out):
        used, defined = summary[block.name]
        return frozenset(used | (live_out - defined))

    return solve(cfg, forward=False, boundary=frozenset(), init=frozenset(),
                 merge=lambda vs: frozenset().union(*vs), transfer=transfer)


def live_after_each(block, live_out):
    """For each instruction of the block, the set of variables live just after it."""
    live = set(live_out)
    result = [None] * len(block.instrs)
    for i in range(len(block.instrs) - 1, -1, -1):
        instr = block.instrs[i]
        result[i] = frozenset(live)
        d = dest(instr)
        if d is not None:
            live.discard(d)
        live.update(uses(instr))
    return result


# --- Reaching definitions -----------------------------------------------------------

def reaching_definitions(cfg, args=()):
    """(reach_in, reach_out): per block, the definitions that may reach its start/end.

    A definition is (block name, index in block.instrs), or ('arg', name) for a
    function argument."""
    kill_vars, gen = {}, {}
    for n, b in cfg.blocks.items():
        last = {}
        for i, instr in enumerate(b.instrs):
            d = dest(instr)
            if d is not None:
                last[d] = (n, i)
        gen[n] = frozenset(last.values())
        kill_vars[n] = frozenset(last)
    var_of = {}
    for n, b in cfg.blocks.items():
        for i, instr in enumerate(b.instrs):
            if dest(instr) is not None:
                var_of[(n, i)] = dest(instr)
    for a in args:
        var_of[("arg", a)] = a

    def transfer(block, reach):
        killed = kill_vars[block.name]
        return frozenset(d for d in reach if var_of[d] not in killed) | gen[block.name]

    return solve(cfg, forward=True, boundary=frozenset(("arg", a) for a in args),
                 init=frozenset(), merge=lambda vs: frozenset().union(*vs),
                 transfer=transfer)


# --- Definite assignment ------------------------------------------------------------

class _All:
    """The set of all variables: the optimistic start of a must-analysis."""

    def __and__(self, other):
        return other

    __rand__ = __and__

    def __contains__(self, item):
        return True

    def __eq__(self, other):
        return isinstance(other, _All)

    def __hash__(self):
        return 0


ALL = _All()


def defined_vars(cfg, args=()):
    """(def_in, def_out): per block, the variables assigned on every path to its
    start/end.  Reading one outside these sets may fail at run time.  Blocks not
    reachable from the entry get ALL (nothing runs there)."""

    written = {n: block_use_def(b)[1] for n, b in cfg.blocks.items()}

    def transfer(block, defined):
        if isinstance(defined, _All):
            return ALL
        return frozenset(defined | written[block.name])

    def merge(vals):
        out = vals[0]
        for v in vals[1:]:
            out = out & v
        return out

    return solve(cfg, forward=True, boundary=frozenset(args), init=ALL,
                 merge=merge, transfer=transfer)


class DefinedBefore:
    """The variables surely assigned just before one instruction of a block
    (supports `in`); built in constant time from the block's summary."""

    __slots__ = ("def_in", "first_def", "index")

    def __init__(self, def_in, first_def, index):
        self.def_in, self.first_def, self.index = def_in, first_def, index

    def __contains__(self, var):
        if var in self.def_in:
            return True
        pos = self.first_def.get(var)
        return pos is not None and pos < self.index


def defined_before_each(block, def_in):
    """For each instruction of the block, the variables surely assigned before it
    (objects supporting `in`: linear time for the whole block, not quadratic)."""
    first_def = {}
    for i, instr in enumerate(block.instrs):
        d = dest(instr)
        if d is not None and d not in first_def:
            first_def[d] = i
    return [DefinedBefore(def_in, first_def, i) for i in range(len(block.instrs))]
