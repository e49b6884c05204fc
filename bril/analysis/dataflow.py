"""A generic dataflow solver and the classic analyses built on it.

Also the two facts every analysis needs about an instruction: which ordinary
variables it reads (`uses`) and which it writes (`dest`).  The ssa2 `set`
instruction names a *shadow* variable in its first argument; shadow variables
are a separate namespace and are not uses.
"""

from collections.abc import Set


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


# --- Variable sets as bits ---------------------------------------------------------

class VarIndex:
    """Numbers for a function's variables: a set of variables is then one Python
    int (bit i for variable i), so a block's fact costs a few machine words per
    64 variables and a union is one C operation, however many variables."""

    __slots__ = ("bit", "names")

    def __init__(self):
        self.bit = {}           # name -> bit position
        self.names = []

    def of(self, name):
        """The bit (1 << i) of a variable, numbering it if new."""
        i = self.bit.get(name)
        if i is None:
            i = self.bit[name] = len(self.names)
            self.names.append(name)
        return 1 << i

    def mask(self, names):
        return bits_of({self.of(n).bit_length() - 1 for n in names})


class VarSet(Set):
    """A read-only set of variables stored as bits of a VarIndex (what `liveness`
    and `defined_vars` return per block); `in` costs no more than a shift."""

    __slots__ = ("bits", "index")

    def __init__(self, bits, index):
        self.bits, self.index = bits, index

    def __contains__(self, name):
        try:
            i = self.index.bit.get(name)
        except TypeError:                   # unhashable: no variable
            return False
        return i is not None and (self.bits >> i) & 1 == 1

    def __iter__(self):
        names, bits = self.index.names, self.bits
        while bits:
            low = bits & -bits
            yield names[low.bit_length() - 1]
            bits ^= low

    def __len__(self):
        return self.bits.bit_count()

    def __eq__(self, other):
        if isinstance(other, VarSet) and other.index is self.index:
            return self.bits == other.bits
        return Set.__eq__(self, other)

    def __hash__(self):
        return self._hash()

    @classmethod
    def _from_iterable(cls, it):
        return frozenset(it)

    def __repr__(self):
        return f"VarSet({set(self)!r})"


def bits_of(positions):
    """The int with exactly the given bit positions set, in time linear in their
    number and span (OR-ing `1 << i` one by one copies a growing int each time:
    quadratic for a block of 100,000 variables)."""
    if len(positions) < 32:
        b = 0
        for i in positions:
            b |= 1 << i
        return b
    arr = bytearray((max(positions) >> 3) + 1)
    for i in positions:
        arr[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(arr, "little")


def _gen_kill(cfg, index):
    """Per block: (variables read before written, variables written), as bits."""
    bit = index.bit
    names = index.names
    gen, kill = {}, {}
    for n, b in cfg.blocks.items():
        g, k = set(), set()
        for instr in b.instrs:
            args = instr.get("args")
            if args:
                if instr.get("op") == "set":
                    args = args[1:]
                for a in args:
                    i = bit.get(a)
                    if i is None:
                        i = bit[a] = len(names)
                        names.append(a)
                    if i not in k:
                        g.add(i)
            d = instr.get("dest")
            if d is not None:
                i = bit.get(d)
                if i is None:
                    i = bit[d] = len(names)
                    names.append(d)
                k.add(i)
        gen[n], kill[n] = bits_of(g), bits_of(k)
    return gen, kill


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


def liveness_bits(cfg):
    """(index, live_in, live_out): per block, the variables live at its start and
    at its end, as bits of `index` (a VarIndex).

    Reducible control flow (the usual case) is solved without iterating: one
    pass in postorder ignoring back edges, then per loop, outermost first, the
    header's live variables that the loop never assigns are live in all of it
    (one bit mask per loop, not per block), and those it assigns are carried
    backwards from its latches through the blocks where they stay live.  Time
    grows with the blocks and edges, not with loop depth times size (a nest of
    n loops costs O(n) steps, where a worklist iterates O(n^2) times).  Other
    graphs, and unreachable blocks, use a worklist in postorder."""
    from .cfg import LoopForest
    index = VarIndex()
    gen, kill = _gen_kill(cfg, index)
    succs, preds = cfg.succs, cfg.preds
    forest = LoopForest(cfg)
    live_in = {}
    if forest.reducible:
        back = forest.back
        for n in forest.postorder:
            out = 0
            for s in succs[n]:
                if (n, s) not in back:
                    out |= live_in[s]
            live_in[n] = gen[n] | (out & ~kill[n])
        # Variables assigned somewhere in each loop (inner loops included).
        loop_kill = {}
        for h in reversed(forest.headers):          # inner loops first
            loop_kill[h] = loop_kill.get(h, 0) | kill[h]
        parent = forest.parent
        for n in forest.order:
            h = parent[n]
            if h is not None and n not in forest.latches:
                loop_kill[h] |= kill[n]
        for h in reversed(forest.headers):          # fold inner loops into outer ones
            p = parent[h]
            if p is not None:
                loop_kill[p] |= loop_kill[h]
        through = {}                                # header -> live in its whole loop
        for h in forest.headers:                    # outer loops first
            p = parent[h]
            inherited = through.get(p, 0) if p is not None else 0
            at_header = live_in[h] | inherited
            live_in[h] = at_header
            through[h] = inherited | (at_header & ~loop_kill[h])
            carried = at_header & loop_kill[h]
            if not carried:
                continue
            work = [(t, carried) for t in forest.latches[h]]
            while work:
                n, bits = work.pop()
                new = bits & ~kill[n] & ~live_in[n]
                if not new or n == h:
                    continue
                live_in[n] |= new
                for q in preds[n]:      # inside the loop (n is not its header)
                    if q in forest.pre:
                        work.append((q, new))
        for n in forest.order:
            h = forest.loop_of(n)
            if h is not None:
                live_in[n] |= through[h]
        rest = [n for n in cfg.blocks if n not in live_in]
    else:
        rest = list(forest.postorder) + [n for n in cfg.blocks if n not in forest.pre]
    if rest:
        _solve_backward(rest, succs, preds, gen, kill, live_in)
    live_out = {}
    for n in cfg.blocks:
        out = 0
        for s in succs[n]:
            out |= live_in[s]
        live_out[n] = out
    return index, live_in, live_out


def _solve_backward(order, succs, preds, gen, kill, live_in):
    """Liveness of the blocks in `order` (the others' live_in are known) by a
    worklist that visits blocks in the given order (postorder first)."""
    import heapq
    rank = {n: i for i, n in enumerate(order)}
    for n in order:
        live_in[n] = 0
    heap = list(range(len(order)))
    queued = set(order)
    while heap:
        n = order[heapq.heappop(heap)]
        queued.discard(n)
        out = 0
        for s in succs[n]:
            out |= live_in[s]
        new = gen[n] | (out & ~kill[n])
        if new != live_in[n]:
            live_in[n] = new
            for p in preds[n]:
                if p in rank and p not in queued:
                    queued.add(p)
                    heapq.heappush(heap, rank[p])


def liveness(cfg):
    """(live_in, live_out): the variables live at each block's start and end
    (read-only sets, `VarSet`s; see `liveness_bits`)."""
    index, live_in, live_out = liveness_bits(cfg)
    return ({n: VarSet(b, index) for n, b in live_in.items()},
            {n: VarSet(b, index) for n, b in live_out.items()})


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


def defined_bits(cfg, args=()):
    """(index, def_in, def_out) of `defined_vars` as bits of `index` (a VarIndex);
    -1 (every bit) stands for ALL.  Passes in reverse postorder until nothing
    changes (two for most loops: a back edge only brings what its header
    already had, plus what the loop assigns)."""
    index = VarIndex()
    _, written = _gen_kill(cfg, index)
    entry_bits = index.mask(args)
    rpo = cfg.reverse_postorder()
    preds = cfg.preds
    def_in = dict.fromkeys(cfg.blocks, -1)
    def_out = dict.fromkeys(cfg.blocks, -1)
    entry = cfg.entry
    changed = True
    while changed:
        changed = False
        for n in rpo:
            v = entry_bits if n == entry else -1
            for p in preds[n]:
                v &= def_out[p]
            def_in[n] = v
            out = v | written[n]
            if out != def_out[n]:
                def_out[n] = out
                changed = True
    return index, def_in, def_out


def defined_vars(cfg, args=()):
    """(def_in, def_out): per block, the variables assigned on every path to its
    start/end.  Reading one outside these sets may fail at run time.  Blocks not
    reachable from the entry get ALL (nothing runs there).  The sets are
    read-only `VarSet`s (or ALL)."""
    index, def_in, def_out = defined_bits(cfg, args)

    def view(bits):
        return ALL if bits == -1 else VarSet(bits, index)

    return ({n: view(b) for n, b in def_in.items()},
            {n: view(b) for n, b in def_out.items()})


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
