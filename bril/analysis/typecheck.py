"""Per-function type inference for the code generator.

The reference interpreter checks operand types as each op runs (`add argument 0
must be a int`).  We instead infer, once per function, which kinds of values
each variable can hold at each point; the code generator then emits no check
where the kinds are certain, and a run-time check (raising the reference's
message when, and only when, it fails) elsewhere: for values typed `any`, for
`undef`, and for ill-typed programs.

An abstract value is a frozenset of tags:

    'int' 'bool' 'float' 'char' 'undef'
    'ptr:K'   a pointer into a region whose element kind K is one of
              int bool float char ptr any (known from the `alloc`)
    'ptr:?'   a pointer into a region of unknown element kind
    '?'       anything (TOP)

Shadow variables of the ssa2 extension (`set`/`get`) are tracked like normal
variables under the key `('shadow', name)`.

The analysis also records which variables are definitely assigned at each
block entry, which `speculate` needs to snapshot variables cheaply, and a
summary of what the function can return (tags, plus 'none' for a return
without a value).
"""

import gc
from itertools import compress
# (the C halves of heapq and operator: the pure-Python modules around them cost
# 1.3 and 0.5 ms to import, on the path of every run that generates code)
try:
    from _heapq import heapify, heappop, heappush
    from _operator import is_not
except ImportError:
    from heapq import heapify, heappop, heappush
    from operator import is_not

from .cfg import Graph, LoopForest
from ..ir.errors import BrilError
from ..ir.ops import INT_MAX, INT_MIN, OPS
from ..ir.values import const_value

TOP = frozenset({"?"})
NONE = frozenset()
PRIMS = ("int", "bool", "float", "char")
_ELEM_KINDS = {"int", "bool", "float", "char", "any"}


# The value kinds a region of each element kind accepts (the reference's typeCheck).
ELEM_ACCEPTS = {"int": {"int"}, "bool": {"bool"}, "float": {"float"}, "char": {"char"},
                "ptr": {"ptr"}, "any": {"int", "bool", "float", "char", "ptr", "undef"}}


def tag_kind(tag):
    """'int' -> 'int', 'ptr:int' -> 'ptr', '?' -> None (unknown)."""
    if tag.startswith("ptr:"):
        return "ptr"
    return None if tag == "?" else tag


def checked_tags(typ):
    """Tags of a value that passed the reference's `typeCheck(value, typ)`."""
    if typ in PRIMS:
        return frozenset({typ})
    if isinstance(typ, dict) and "ptr" in typ:
        return frozenset({"ptr:?"})
    return TOP


def elem_kind(typ):
    """The element kind of a region allocated with pointer type {"ptr": typ}."""
    if isinstance(typ, dict):
        return "ptr" if "ptr" in typ else "?"
    return typ if typ in _ELEM_KINDS else "?"


def const_tags(instr):
    v = instr.get("value")
    if isinstance(v, bool):
        return frozenset({"bool"})
    if isinstance(v, (int, float)):
        return frozenset({"float" if instr.get("type") == "float" else "int"})
    if isinstance(v, str):
        return frozenset({"char"})
    return TOP


_INTERNED = {TOP: TOP, NONE: NONE}


def intern(tags):
    """One shared object per distinct tag set (joins then mostly compare by identity)."""
    return _INTERNED.setdefault(tags, tags)


def _checked(tags, typ):
    """The tags of a value that passed an operand check of kind `typ` (a primitive,
    or "ptr"), given its tags before; unchanged if the check can never pass."""
    if typ == "ptr":
        kept = frozenset(t for t in tags if t.startswith("ptr:"))
        if "?" in tags:
            kept |= {"ptr:?"}
        return intern(kept) if kept and kept != tags else tags
    if tags == frozenset((typ,)):
        return tags
    if typ in tags or "?" in tags:
        return intern(frozenset((typ,)))
    return tags


def _never(tags, typ):
    """True if no value with these tags passes an operand check of kind `typ`."""
    if "?" in tags:
        return False
    if typ == "ptr":
        return not any(t.startswith("ptr:") for t in tags)
    return typ not in tags


def join(a, b):
    if a is b:
        return a
    if "?" in a or "?" in b:
        return TOP
    return intern(a | b)


def only(tags, kind):
    """True if every value with these tags has the given kind ('ptr' for pointers)."""
    if not tags or "?" in tags:
        return False
    if kind == "ptr":
        return all(t.startswith("ptr:") for t in tags)
    return tags == {kind}


def load_tags(ptr_tags):
    """What `load` can produce through a pointer with these tags."""
    out = set()
    for t in ptr_tags:
        if not t.startswith("ptr:"):
            continue            # not a pointer: the load fails
        k = t[4:]
        if k in PRIMS:
            out.add(k)
        elif k == "ptr":
            out.add("ptr:?")
        else:
            return TOP
    return frozenset(out) if out else TOP


FULL = (INT_MIN, INT_MAX)
WIDEN_AFTER = 3         # merges into a block before its ranges are widened
# Widening jumps to the next of these bounds (not straight to the end of the range),
# so that `i < n` in an outer loop still bounds i inside an inner loop.
_HI_THRESHOLDS = (-1, 0, 1, INT_MAX - 1, INT_MAX)
_LO_THRESHOLDS = (INT_MIN, INT_MIN + 1, -1, 0, 1)

# A comparison that produced a bool, seen from the other side: `a OP b` is false.
# ('ne' is no Bril op: the fact of `not (a == b)`.)
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


class State:
    """Abstract state at a program point, as `FunctionTypes.block_in` gives it.

    types:  tags per variable
    bound:  variables definitely assigned
    ranges: (lo, hi) bounds of int variables (absent: the full 64-bit range)
    facts:  bool variable -> (op, a, b): the variable holds `a op b` (int compare;
            op is lt le gt ge eq, or ne for a negated eq)

    (The analysis works on a sparse form of this, see "Sparse states" below; a
    State is built from it when a block's entry is asked for, and has the
    variables live there.)
    """
    __slots__ = ("types", "bound", "ranges", "facts")

    def __init__(self, types, bound, ranges=None, facts=None):
        self.types = types
        self.bound = bound
        self.ranges = ranges if ranges is not None else {}
        self.facts = facts if facts is not None else {}

    def copy(self):
        return State(dict(self.types), set(self.bound), dict(self.ranges), dict(self.facts))

    def range(self, var):
        return self.ranges.get(var, FULL) if self.types.get(var) == {"int"} else FULL


# --- sparse states ----------------------------------------------------------------------
#
# The variables of a function are numbered 0..V-1.  A state gives each one a value
#
#     (tags, bound, rng, fact)      or None: unassigned on every path to here, or dead
#
# (rng: (lo, hi), None for the full range; fact: (op, a, b) with a, b variable
# numbers, or None).  It is a persistent radix tree of tuples: three levels
# (leaves and inner nodes of 32 slots under a root as wide as the function
# needs, 32 slots up to 32,768 variables, then four levels...), or one leaf of
# V slots for V <= 32.  (A fixed depth keeps the cost of a step from growing
# with the function.)  Values and leaves are interned per
# function (hash-consing), so equal leaves are the same object.  A block's state
# shares every node its code leaves alone with its predecessor's, an update
# copies one path, and a merge walks only the nodes where the two sides differ.
#
# A state holds only the variables live at its point (read before being
# assigned on some path on, counting the operands of a fact wherever the fact's
# variable is tested, and, at `speculate`, what the abort targets read): a
# variable's value at a use depends only on paths where it is live, so this
# changes no result for a live variable, and it keeps the states of an outer
# loop free of what its inner loops did to their own variables.
#
# A state is a pair (values, deps).  deps gives each variable a chain
# (c, (c', ...)) of the variables whose facts may mention it (a superset), so an
# assignment kills exactly the facts it must without looking at all of them; a
# merge keeps the target's deps (a merge only drops facts, so they still cover).

INT = intern(frozenset({"int"}))


def _node_get(root, i, shift):
    root = root[i >> shift]
    while shift:
        shift -= 5
        root = root[(i >> shift) & 31]
    return root


def _getter(shift):
    """A fast `get(root, i)` for trees whose root level is `shift`."""
    if shift == 0:
        return tuple.__getitem__
    if shift == 5:
        return lambda r, i: r[i >> 5][i & 31]
    if shift == 10:
        return lambda r, i: r[i >> 10][(i >> 5) & 31][i & 31]
    return lambda r, i: _node_get(r, i, shift)


def _leaves(node, shift):
    """Every slot of a tree, in order."""
    if shift == 0:
        yield from node
        return
    for child in node:
        yield from _leaves(child, shift - 5)


def _bits(x):
    """The positions of the 1 bits of x, ascending."""
    if x.bit_count() <= 8:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
    s = bin(x)[:1:-1]
    out = []
    i = s.find("1")
    while i >= 0:
        out.append(i)
        i = s.find("1", i + 1)
    return out


def _to_bits(ids, nbits):
    """The bit set of a collection of positions."""
    if len(ids) < 64:
        x = 0
        for i in ids:
            x |= 1 << i
        return x
    ba = bytearray((nbits >> 3) + 1)
    for i in ids:
        ba[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(ba, "little")


def _put_deep(node, items, shift, leaf, mask):
    """`_Analysis._put` for trees of four levels or more (mask: 31 below the root)."""
    out = list(node)
    if shift == 0:
        for i, v in items.items():
            out[i & mask] = v
        return leaf(out)
    groups = {}
    for i, v in items.items():
        k = (i >> shift) & mask
        g = groups.get(k)
        if g is None:
            groups[k] = {i: v}
        else:
            g[i] = v
    for k, g in groups.items():
        out[k] = _put_deep(out[k], g, shift - 5, leaf, 31)
    return tuple(out)


def _widen_lo(lo):
    return max(t for t in _LO_THRESHOLDS if t <= lo)


def _widen_hi(hi):
    return min(t for t in _HI_THRESHOLDS if t >= hi)


def _join_value(a, b, widen):
    """The value of a variable after a merge: `a` the target's, `b` the incoming
    side's (either None: unassigned on that side).  Returns `a` itself if the merge
    does not change it.  Kinds join; assigned only if on both sides; bounds join
    (a side where the variable is unassigned adds none: reading it there raises);
    with `widen`, a bound that grows jumps to the next threshold (so loops
    converge); a fact survives if both sides have it."""
    if a is None:
        return (b[0], False, b[2], None)
    if b is None:
        if a[1] or a[3] is not None:
            return (a[0], False, a[2], None)
        return a
    ta, bound, ra, fact = a
    tags = ta if ta is b[0] else join(ta, b[0])
    if bound and not b[1]:
        bound = False
    rb = b[2]
    if ra is None or ra is rb:
        rng = ra
    elif rb is None:
        rng = None                  # the other side has it at full range
    else:
        lo, hi = ra
        nlo = lo if lo <= rb[0] else rb[0]
        nhi = hi if hi >= rb[1] else rb[1]
        if widen:
            if nlo < lo:
                nlo = _widen_lo(nlo)
            if nhi > hi:
                nhi = _widen_hi(nhi)
        if nlo == lo and nhi == hi:
            rng = ra
        elif nlo == INT_MIN and nhi == INT_MAX:
            rng = None
        else:
            rng = (nlo, nhi)
    if fact is not None and fact != b[3]:
        fact = None
    if tags == ta and bound == a[1] and rng is ra and fact is a[3]:
        return a
    return (tags, bound, rng, fact)


def _materialize(names, shift, root):
    """The State of a value tree (numbers of variables -> names)."""
    types, bound, ranges, facts = {}, set(), {}, {}
    for i, v in zip(range(len(names)), _leaves(root, shift)):
        if v is None:
            continue
        k = names[i]
        types[k] = v[0]
        if v[1]:
            bound.add(k)
        if v[2] is not None:
            ranges[k] = v[2]
        if v[3] is not None:
            op, a, b = v[3]
            facts[k] = (op, names[a], names[b])
    return State(types, bound, ranges, facts)


class _LazyStates:
    """`FunctionTypes.block_in`: per block its entry State (None if unreachable),
    built from the sparse state when asked for (codegen's checking mode and the
    tracers read a few; building all would cost blocks x variables)."""

    def __init__(self, names, shift, roots):
        self._names, self._shift = names, shift
        self._roots = roots
        self._built = {}

    def __len__(self):
        return len(self._roots)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._roots)))]
        st = self._built.get(i)
        if st is None:
            root = self._roots[i]
            if root is None:
                return None
            st = self._built[i] = _materialize(self._names, self._shift, root[0])
        return st

    def __setitem__(self, i, st):
        self._built[i] = st
        self._roots[i] = st if st is None else (None, None)

    def __iter__(self):
        return (self[i] for i in range(len(self._roots)))


def _arith_range(op, a, b):
    """Exact (unwrapped) result bounds of add/sub/mul on operand bounds."""
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "sub":
        return a[0] - b[1], a[1] - b[0]
    ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(ps), max(ps)


def wrap_check(lo, hi):
    """Which overflow test an exact result within [lo, hi] needs."""
    over, under = hi > INT_MAX, lo < INT_MIN
    if over and under:
        return "both"
    return "upper" if over else "lower" if under else "none"


def _div_range(a, b):
    """Bounds of `div` (truncating).  The general bound |a / b| <= max|a| also
    holds for INT_MIN / -1, which wraps to INT_MIN."""
    if b[0] >= 1:           # positive divisor: monotone in a, shrinking towards 0
        lo = a[0] // b[1] if a[0] >= 0 else -((-a[0]) // b[0])
        hi = a[1] // b[0] if a[1] >= 0 else -((-a[1]) // b[1])
        return lo, hi
    m = max(abs(a[0]), abs(a[1]))
    return max(-m, INT_MIN), min(m, INT_MAX)


def _const_range(instr):
    """(n, n) for a `const` that assigns the integer n (converted as every tier
    converts it, `bril.ir.values.const_value`), else None."""
    if instr.get("type") == "float":
        return None
    try:
        v = const_value(instr)
    except BrilError:
        return None
    return (v, v) if type(v) is int else None


class FunctionTypes:
    """The result of inference for one function."""

    def __init__(self):
        self.arg_tags = {}          # id(instr) -> tuple of tags per argument
        self.arg_unbound = {}       # id(instr) -> per argument: may be unassigned here
        self.block_in = []          # per block: State at entry (None if unreachable)
        self.spec_bound = None      # vars definitely assigned at every `speculate` (set)
        self.spec_vars = set()      # every variable key assigned anywhere in the function
        # The keys a `speculate` snapshot must hold: those assigned in the function
        # and live at some guard's abort target (an abort restores nothing else: a
        # variable dead there is written before it is read again).
        self.snapshot_keys = set()
        self.live = None            # (keys, per block: bit set of the keys live at entry)
        self.returns = set()        # tags that `ret` can return, plus 'none'
        self.wrap_checks = {}       # id(add/sub/mul instr) -> 'none'|'upper'|'lower'|'both'
        self.nonneg = {}            # id(div instr) -> (operand 0 proven >= 0, operand 1 >= 1)
        self.precise = True         # False if the analysis gave up (nothing is assumed)
        # (source block, header block) -> ((variable, kind), ...): on that edge the
        # variables must be checked to hold what `infer`'s `headers` assume there
        self.edge_checks = {}
        self.edge_fails = set()     # (source, header, variable): a check that always fails
        self.has_spec = False

    def live_at(self, bi):
        """The keys (variables, and ("shadow", s)) live at the entry of block bi, or
        None if not known (then take every key as live)."""
        if self.live is None:
            return None
        keys, live_in = self.live
        return {keys[i] for i in _bits(live_in[bi])}


def result_tags(instr, args):
    """Abstract result of a value instruction given its operands' tags."""
    op = instr["op"]
    if op == "const":
        return const_tags(instr)
    info = OPS.get(op)
    if info is None:
        return TOP
    if op in ("id",):
        return args[0] if args else TOP
    if op == "phi":
        out = NONE
        for a in args:
            out = join(out, a)
        return out or TOP
    if op == "load":
        return load_tags(args[0]) if args else TOP
    if op == "ptradd":
        ptrs = frozenset(t for t in args[0] if t.startswith("ptr:")) if args else NONE
        if args and "?" in args[0]:
            return frozenset({"ptr:?"}) if not ptrs else ptrs | {"ptr:?"}
        return ptrs or frozenset({"ptr:?"})
    if op == "alloc":
        typ = instr.get("type")
        if isinstance(typ, dict) and "ptr" in typ:
            return frozenset({"ptr:" + elem_kind(typ["ptr"])})
        return TOP
    if op == "undef":
        return frozenset({"undef"})
    if op == "call":
        return checked_tags(instr.get("type"))
    if info.result in PRIMS:
        return frozenset({info.result})
    return TOP


NARROWING_PASSES = 1    # passes without widening after the fixpoint (regain bounds;
                        # the last one records the results)
VISITS_PER_BLOCK = 200  # worklist budget; beyond it the analysis assumes nothing

_COMPARES = ("lt", "le", "gt", "ge", "eq")
# Ops whose result's kinds depend on their operands' (the others': on the op alone).
_TAGS_FROM_ARGS = {"id", "phi", "load", "ptradd"}
# Kinds of results of the ops whose result has a single kind.
_FIXED_TAGS = {name: intern(frozenset({info.result})) for name, info in OPS.items()
               if info.result in PRIMS and name not in (
                   "const", "id", "phi", "load", "ptradd", "alloc", "undef", "call")}
# Instruction kinds for the transfer function, and how a result gets its range
# and fact: none, fixed by the instruction, `_result_range`, copied, negated.
# (_R_ARITH: add/sub/mul, as `_result_range` does them, inline)
_SET, _GET, _SPECULATE, _RET, _OTHER = range(5)
_R_NONE, _R_FIXED, _R_CALC, _R_COPY, _R_NOT, _R_ARITH = range(6)


class _Numbers(dict):
    """Variable -> number, numbering new variables as they are looked up."""

    def __missing__(self, key):
        n = self[key] = len(self)
        return n
_NO_DEPS = object()
_SPEC = -1              # the pseudo-block of the speculation state (see `_prune_list`)


def infer(func, blocks, assumed=None, headers=None):
    """Infer tags for a function split into `blocks` (objects with .instrs, .succs,
    .targets, .abort_succ: the guard's abort target or None, .falls_off: True if
    control can leave the function at the block's end).

    `assumed`: {parameter: tags} for parameters assumed to hold such values (a
    pointer parameter {"ptr:K"}: it points into a region of K; an `any` parameter
    a scalar kind the calls so far passed); the caller of the code must check it.

    `headers`: {block index: {variable: tags}}: at the entry of those blocks (loop
    headers) the variables are assumed to hold such values, whatever flows in; the
    code must check it on each edge where the analysis cannot prove it, listed in
    `FunctionTypes.edge_checks`.

    A worklist fixpoint in reverse postorder with widening at loop heads, then a
    few narrowing passes (plain joins from the fixpoint) that give back bounds
    widening threw away; the per-instruction results come from the last pass.
    States are sparse (see "Sparse states" above): the time is about linear in the
    size of the function."""
    ft = FunctionTypes()
    n = len(blocks)
    ft.block_in = [None] * n
    if n == 0:
        return ft
    # The analysis makes many small objects, and no cycle: without the cyclic
    # collector, which would only rescan them, ever more often as they grow.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Analysis(ft, func, blocks, assumed, headers).run()
    finally:
        if collecting:
            gc.enable()


class _Analysis:
    def __init__(self, ft, func, blocks, assumed, headers):
        self.ft = ft
        self.func = func
        self.blocks = blocks
        self.assumed = assumed
        ids = self.ids = _Numbers()
        params = func.get("args") or []
        for p in params:
            ids[p["name"]]
        for name in assumed or ():
            ids[name]
        # block index -> ((variable number, tags), ...) assumed at its entry
        self.headers = {b: tuple((ids[name], intern(frozenset(tags)))
                                 for name, tags in sorted(vs.items()))
                        for b, vs in (headers or {}).items()}
        seen = set()
        shared = False                      # an instruction object at two places
        recs = self.recs = []
        # id(instr) -> ((operand number, kind, narrow), ...): the operands an
        # instruction checks (raising the reference's error unless they hold a value
        # of that kind), which after it hold one unless it assigns them (narrow:
        # False; see `_checked`)
        self.checks = {}
        spec_vars = ft.spec_vars
        for b in blocks:
            brecs = []
            for instr in b.instrs:
                shared |= id(instr) in seen
                seen.add(id(instr))
                brecs.append(self._record(instr, ids, spec_vars))
            recs.append(brecs)
        self.shared = shared
        self.names = list(ids)
        nvars = len(self.names)
        self.vals = {}                      # interned values
        self.leaves = {}                    # interned leaves, by their slots' ids
        if nvars <= 32:
            self.shift = 0
            self.empty = self.leaf([None] * max(1, nvars))
        else:
            shift = 10
            while (32 << shift) < nvars:
                shift += 5
            self.shift = shift
            node = self.leaf([None] * 32)
            for _ in range(shift // 5 - 1):
                node = (node,) * 32
            self.empty = (node,) * -(-nvars >> shift)
        self.get = _getter(self.shift)
        self.succs = [b.all_succs() for b in blocks]
        if len(blocks) == 1 and not self.succs[0]:
            # (one block and no jump: no graph to look at)
            self.order = self.pos = [0]
            self.forest, self.widen_at, self.loop_end = None, {}, {}
        else:
            self.order = _reverse_postorder(blocks)
            forest = self.forest = LoopForest(Graph.of_succs(self.succs))
            self.widen_at = forest.latches  # (heads of the depth-first search's back edges)
            if forest.reducible:
                self.pos, self.loop_end = _loop_order(forest, self.order)
            else:
                self.pos, self.loop_end = self.order, {}
        self._liveness()
        ft.live = (self.names, self.live_in)
        if ft.has_spec:
            live, ids = self.spec_live, self.ids
            ft.snapshot_keys = {k for k in ft.spec_vars if live >> ids[k] & 1}
        self.prunes = {}
        self._end_copies = {}
        entry = {}
        for p in params:
            entry[ids[p["name"]]] = (intern(checked_tags(p.get("type"))), True, None, None)
        for name, tags in (assumed or {}).items():
            i = ids[name]
            old = entry.get(i)
            entry[i] = (intern(frozenset(tags)), bool(old and old[1]), None, None)
        live = self.live_in[0]
        entry = {i: v for i, v in entry.items() if live >> i & 1}
        self.entry = (self.put(self.empty, entry), self.empty)

    def _record(self, instr, ids, spec_vars):
        """What the transfer function needs of an instruction, computed once:
        (kind, op, instr, id, operand numbers, dest number or None, extra)."""
        op = instr["op"]
        names = instr.get("args") or ()
        d = instr.get("dest")
        if d is not None:
            spec_vars.add(d)
        if op == "set":
            key = None
            if names:
                key = ("shadow", names[0])
                spec_vars.add(key)
                key = ids[key]
            return (_SET, op, instr, id(instr), tuple([ids[a] for a in names[1:2]]), key, None)
        aids = tuple([ids[a] for a in names])
        info = OPS.get(op)
        did = None
        if d is not None and (info is None or info.result is not None or op == "call"):
            did = ids[d]
        if info is not None and info.args is not None:
            checks = tuple([(a, typ, a != did) for a, typ in zip(aids, info.args)
                            if typ in PRIMS or typ == "ptr"])
            if checks:
                self.checks[id(instr)] = checks
        if info is None or info.kind == "effect" or info.kind == "control":
            if op == "speculate":
                self.ft.has_spec = True
                return (_SPECULATE, op, instr, id(instr), aids, did, None)
            if op == "ret":
                return (_RET, op, instr, id(instr), aids, did, None)
            if op in ("commit", "guard"):
                self.ft.has_spec = True
        if op == "get":
            return (_GET, op, instr, id(instr), aids, did,
                    ids[("shadow", d)] if did is not None else None)
        if did is None:
            return (_OTHER, op, instr, id(instr), aids, None, None)
        tags = _FIXED_TAGS.get(op)
        if tags is None and op not in _TAGS_FROM_ARGS:
            tags = intern(result_tags(instr, ()))
        bound, rk, rc = True, _R_NONE, None
        n = len(aids)
        if op == "const":
            bound = isinstance(instr.get("value"), (bool, int, float, str))
            rk, rc = _R_FIXED, (_const_range(instr), None)
        elif n == 2 and op in _COMPARES:
            rk, rc = _R_FIXED, (None, (op, aids[0], aids[1]))
        elif n == 2 and op in ("add", "sub", "mul"):
            rk = _R_ARITH
        elif n == 2 and op == "div":
            rk = _R_CALC
        elif n == 1 and op == "id":
            rk = _R_COPY            # (tags, range and fact of the operand)
        elif n == 1 and op == "not":
            rk = _R_NOT
        elif op == "char2int":
            rk, rc = _R_FIXED, ((0, 0x10FFFF), None)
        return (_OTHER, op, instr, id(instr), aids, did, (tags, bound, rk, rc))

    # --- liveness --------------------------------------------------------------------

    def _liveness(self):
        """live_in[b]: bit set of the variables live at the entry of block b (see the
        notes on sparse states); spec_live: those the speculation state must keep."""
        blocks, order = self.blocks, self.order
        n = len(blocks)
        nvars = len(self.names)
        # Fact operands: a test of c reads the operands of every compare c may hold.
        direct, copies = {}, {}
        for recs in self.recs:
            for kind, op, _, _, aids, did, _ in recs:
                if kind == _OTHER and did is not None:
                    if op in _COMPARES and len(aids) == 2:
                        direct.setdefault(did, set()).update(aids)
                    elif op in ("id", "not") and len(aids) == 1:
                        copies.setdefault(did, set()).add(aids[0])
        operands = {c: set(s) for c, s in direct.items()}
        changed = bool(copies)
        while changed:
            changed = False
            for c, srcs in copies.items():
                mine = operands.get(c)
                for s in srcs:
                    theirs = operands.get(s)
                    if theirs and (mine is None or not theirs <= mine):
                        if mine is None:
                            mine = operands[c] = set()
                        mine |= theirs
                        changed = True
        gen, kill = [0] * n, [0] * n
        spec_kill = {}                      # block with `speculate`: defs before the first
        for bi, recs in enumerate(self.recs):
            if order[bi] >= n:
                continue                    # unreachable
            used, defined = set(), set()
            for kind, op, _, _, aids, did, extra in recs:
                reads = list(aids)
                if kind == _GET and extra is not None:
                    reads.append(extra)
                elif kind == _SPECULATE:
                    if bi not in spec_kill:
                        spec_kill[bi] = set(defined)
                elif op in ("br", "guard") and len(aids) == 1 and aids[0] in operands:
                    reads.extend(operands[aids[0]])
                for a in reads:
                    if a not in defined:
                        used.add(a)
                if did is not None:
                    defined.add(did)
            gen[bi] = _to_bits(used, nvars)
            kill[bi] = _to_bits(defined, nvars)
        self.defs = kill
        spec_kill = {b: ~_to_bits(s, nvars) for b, s in spec_kill.items()}
        aborts = sorted({b.abort_succ for i, b in enumerate(blocks)
                         if b.abort_succ is not None and order[i] < n}) if spec_kill else []
        succs = self.succs
        if self.forest is None:
            self.live_in, self.spec_live = gen, 0
            return
        if not aborts and self.forest.reducible:
            self.live_in, self.spec_live = _forest_liveness(self.forest, succs, gen, kill), 0
            return
        # An irreducible graph, or speculation (whose state reaches the abort targets
        # from every `speculate`): a worklist, within a budget (else all is live).
        preds = [[] for _ in range(n)]
        for bi in range(n):
            if order[bi] < n:
                for s in succs[bi]:
                    preds[s].append(bi)
        live = self.live_in = [0] * n
        spec_live = 0
        work = [(-order[bi], bi) for bi in range(n) if order[bi] < n]
        heapify(work)
        on_work = set(range(n))
        push, pop = heappush, heappop
        budget = 20 * (n + 5)
        while work:
            budget -= 1
            if budget < 0:
                everything = (1 << nvars) - 1
                self.live_in, self.spec_live = [everything] * n, everything
                return
            bi = pop(work)[1]
            on_work.discard(bi)
            out = 0
            for s in succs[bi]:
                out |= live[s]
            new = gen[bi] | (out & ~kill[bi])
            if bi in spec_kill:
                new |= spec_live & spec_kill[bi]
            if new == live[bi]:
                continue
            live[bi] = new
            for p in preds[bi]:
                if p not in on_work:
                    on_work.add(p)
                    push(work, (-order[p], p))
            if aborts and bi in aborts:
                sl = 0
                for t in aborts:
                    sl |= live[t]
                if sl != spec_live:
                    spec_live = sl
                    for p in spec_kill:
                        if p not in on_work:
                            on_work.add(p)
                            push(work, (-order[p], p))
        self.spec_live = spec_live

    def prune(self, st, src, dst):
        """st (leaving block src, or the speculation state if src is _SPEC) without
        the variables dead at the entry of block dst (or in the speculation state,
        if dst is _SPEC)."""
        key = (src, dst)
        rm = self.prunes.get(key)
        if rm is None:
            have = self.spec_live if src == _SPEC else self.live_in[src] | self.defs[src]
            keep = self.spec_live if dst == _SPEC else self.live_in[dst]
            rm = self.prunes[key] = _bits(have & ~keep)
        if not rm:
            return st
        get, root = self.get, st[0]
        items = {i: None for i in rm if get(root, i) is not None}
        if not items:
            return st
        return (self.put(root, items), st[1])

    # --- sparse states ---------------------------------------------------------------

    def leaf(self, slots):
        """The interned tuple of `slots` (interned values or None)."""
        t = tuple(slots)
        return self.leaves.setdefault(tuple(map(id, t)), t)

    def put(self, root, items):
        """The value tree root with the slots of `items` ({i: value}) replaced."""
        if not items:
            return root
        vals = self.vals
        if self.shift == 0:             # (one leaf: nothing to gain from interning it)
            out = list(root)
            for i, v in items.items():
                out[i] = v if v is None else vals.setdefault(v, v)
            return tuple(out)
        items = {i: (v if v is None else vals.setdefault(v, v)) for i, v in items.items()}
        return self._put(root, items, self.leaf)

    def put_deps(self, root, items):
        """The same for a deps tree (its nodes are not interned: never merged)."""
        return self._put(root, items, tuple) if items else root

    def _put(self, root, items, leaf):
        shift = self.shift
        if shift == 0:
            out = list(root)
            for i, v in items.items():
                out[i] = v
            return leaf(out)
        top = list(root)
        if shift == 5:
            leaves = {}
            for i, v in items.items():
                k = i >> 5
                lf = leaves.get(k)
                if lf is None:
                    lf = leaves[k] = list(top[k])
                lf[i & 31] = v
            for k, lf in leaves.items():
                top[k] = leaf(lf)
            return tuple(top)
        if shift == 10:
            mids, leaves = {}, {}
            for i, v in items.items():
                k = i >> 5
                lf = leaves.get(k)
                if lf is None:
                    m = mids.get(i >> 10)
                    if m is None:
                        m = mids[i >> 10] = list(top[i >> 10])
                    lf = leaves[k] = list(m[k & 31])
                lf[i & 31] = v
            for k, lf in leaves.items():
                mids[k >> 5][k & 31] = leaf(lf)
            for k, m in mids.items():
                top[k] = tuple(m)
            return tuple(top)
        return _put_deep(root, items, shift, leaf, -1)

    def merge(self, s, o, widen=False):
        """(join of states s and o, True if it differs from s); s's deps are kept."""
        if s[0] is o[0]:
            return s, False
        v = self._merge(s[0], o[0], self.shift, widen)
        if v is s[0]:
            return s, False
        return (v, s[1]), True

    def _merge(self, s, o, shift, widen):
        out = None
        if shift == 0:
            vals = self.vals
            for k in compress(range(len(s)), map(is_not, s, o)):
                a = s[k]
                m = _join_value(a, o[k], widen)
                if m is not a:
                    if out is None:
                        out = list(s)
                    out[k] = vals.setdefault(m, m)
            return s if out is None else self.leaf(out) if self.shift else tuple(out)
        sub = shift - 5
        for k in compress(range(len(s)), map(is_not, s, o)):
            a = s[k]
            m = self._merge(a, o[k], sub, widen)
            if m is not a:
                if out is None:
                    out = list(s)
                out[k] = m
        return s if out is None else tuple(out)

    # --- the fixpoint ----------------------------------------------------------------

    def run(self):
        """The fixpoint, in two phases: first the blocks that can run (an edge that
        a refinement shows is never taken carries nothing), then the others, from
        the unrefined states on those edges (their code is never run, but gets
        results as before: nothing flows from them into the blocks that can run).
        Then narrowing, whose last pass records the results."""
        ft, blocks = self.ft, self.blocks
        n = len(blocks)
        ins = [None] * n                    # per block: its entry state
        ins[0] = self.entry
        pos, loop_end = self.pos, self.loop_end
        work = [(0, 0)]
        on_work = {0}
        aborting = []                       # blocks with a guard (their abort edge uses spec)
        visits = [0] * n
        widen_at = self.widen_at
        # Blocks in a loop run several times: their results are recorded by a pass
        # over the final states instead.
        record = not widen_at
        spec = None                         # join of states at `speculate`
        spec_merges = 0
        widened = False
        live = None                         # phase 2: per block, True if it can run
        last = [()] * n                     # the edges of each block's last run
        merge, prune = self.merge, self.prune
        transfer = self.transfer
        push, pop = heappush, heappop
        budget = VISITS_PER_BLOCK * (n + 5)  # a safety net against slow convergence

        def flow(target, st, src=None):
            nonlocal widened
            cur = ins[target]
            if cur is None:
                ins[target] = st
            else:
                widen = visits[target] > WIDEN_AFTER and target in widen_at
                widened |= widen
                new, changed = merge(cur, st, widen)
                if not changed:
                    return
                ins[target] = new
            if target not in on_work:
                # In loop order; a head reached again by its own loop waits for the
                # rest of the loop (so a round sees the whole body).
                end = loop_end.get(target)
                if end is not None and src is not None and pos[src] >= pos[target]:
                    push(work, (2 * end + 1, target))
                else:
                    push(work, (2 * pos[target], target))
                on_work.add(target)

        def iterate():
            nonlocal spec, spec_merges, budget
            while work:
                budget -= 1
                if budget < 0:
                    return False
                bi = pop(work)[1]
                on_work.discard(bi)
                visits[bi] += 1
                edges, snaps = transfer(bi, ins[bi], record)
                t = blocks[bi].abort_succ
                last[bi] = edges
                if live is None:
                    for snap in snaps:
                        if spec is None:
                            spec, changed = snap, True
                        else:
                            spec_merges += 1
                            spec, changed = merge(spec, snap, spec_merges > WIDEN_AFTER)
                        if changed:
                            for g in aborting:
                                a = blocks[g].abort_succ
                                flow(a, prune(spec, _SPEC, a))
                    for target, st, taken in edges:
                        if taken:
                            flow(target, st, bi)
                    if t is not None and bi not in aborting:
                        aborting.append(bi)
                else:
                    for target, st, taken in edges:
                        if not live[target]:
                            flow(target, st, bi)
                if t is not None and spec is not None and (live is None or not live[t]):
                    flow(t, prune(spec, _SPEC, t))
            return True

        if not iterate():
            return _give_up(ft, blocks, self)
        live = [st is not None for st in ins]
        for bi in range(n):
            for target, st, taken in last[bi]:
                if not taken and not live[target]:
                    flow(target, st, bi)
        if not iterate():
            return _give_up(ft, blocks, self)

        # narrowing: recompute every entry state as the plain join of its inputs, in
        # loop order, from the inputs' new states where they come first (Gauss-Seidel)
        # and their fixpoint states on back edges (sound: each is a join of
        # transfers of sound states); this pass also records the results.  (Not
        # needed if nothing was widened: the fixpoint is then the least one and the
        # results recorded on the way are final.)
        spec_state = spec
        passes = NARROWING_PASSES if widened or spec_merges > WIDEN_AFTER else 0
        if not record:
            passes = max(passes, 1)         # (without widening: the same states)
        order = sorted((i for i in range(n) if ins[i] is not None), key=pos.__getitem__)
        for _ in range(passes):
            inbox = [None] * n

            def send(src, edges, later):
                runs = live[src]
                for target, st, taken in edges:
                    if (pos[target] > pos[src]) == later and (
                            not live[target] or (runs and taken)):
                        cur = inbox[target]
                        inbox[target] = st if cur is None else merge(cur, st)[0]
                t = blocks[src].abort_succ
                if spec_state is not None and t is not None and (
                        (pos[t] > pos[src]) == later and (runs or not live[t])):
                    st = prune(spec_state, _SPEC, t)
                    cur = inbox[t]
                    inbox[t] = st if cur is None else merge(cur, st)[0]

            for bi in order:
                send(bi, last[bi], False)
            for bi in order:
                st = inbox[bi]
                if bi == 0:
                    st = self.entry if st is None else merge(self.entry, st)[0]
                if st is not None:
                    ins[bi] = st
                last[bi] = edges = transfer(bi, ins[bi])[0]
                send(bi, edges, True)
        ft.spec_bound = self.spec_bound() if spec_state is not None else set()
        self.ins = ins
        self.vals = self.leaves = None      # (only needed while states are built)
        if self.shared:
            _record_shared(ft, self)
        ft.block_in = _LazyStates(self.names, self.shift, ins)
        return ft

    def spec_bound(self):
        """The variables (of all, live or not) definitely assigned at every
        `speculate`: a must-analysis on bit sets over the same edges as `run`."""
        blocks, order, names = self.blocks, self.order, self.names
        n, nvars = len(blocks), len(names)
        gen, kill, snaps = [0] * n, [0] * n, {}
        for bi, recs in enumerate(self.recs):
            last = {}                       # var -> assigned (True) or unset (False)
            for kind, op, _, _, aids, did, extra in recs:
                if kind == _SPECULATE:
                    snaps.setdefault(bi, []).append(
                        (_to_bits([v for v, b in last.items() if b], nvars),
                         _to_bits([v for v, b in last.items() if not b], nvars)))
                if did is not None:
                    last[did] = extra[1] if kind == _OTHER else True
            gen[bi] = _to_bits([v for v, b in last.items() if b], nvars)
            kill[bi] = _to_bits([v for v, b in last.items() if not b], nvars)
        params = self.func.get("args") or []
        entry = _to_bits([self.ids[p["name"]] for p in params], nvars)
        ins = [None] * n
        ins[0] = entry
        spec = None
        work = [(order[0], 0)]
        on_work = {0}
        aborting = []

        def flow(t, bits):
            cur = ins[t]
            new = bits if cur is None else cur & bits
            if new != cur:
                ins[t] = new
                if t not in on_work:
                    on_work.add(t)
                    heappush(work, (order[t], t))

        while work:
            bi = heappop(work)[1]
            on_work.discard(bi)
            b, st = blocks[bi], ins[bi]
            for g, k in snaps.get(bi, ()):
                new = (st & ~k) | g
                new = new if spec is None else spec & new
                if new != spec:
                    spec = new
                    for a in aborting:
                        flow(blocks[a].abort_succ, spec)
            out = (st & ~kill[bi]) | gen[bi]
            for s in b.succs:
                flow(s, out)
            if b.abort_succ is not None:
                if bi not in aborting:
                    aborting.append(bi)
                if spec is not None:
                    flow(b.abort_succ, spec)
        return {names[i] for i in _bits(spec)} if spec else set()

    # --- the transfer function -----------------------------------------------------

    def transfer(self, bi, state, record=True):
        """Run block bi on the abstract state, recording per-instruction results
        (unless `record` is False: a run whose results a later one replaces).
        Returns ([(successor, state on that edge, False if it is never taken)],
        [states at `speculate`])."""
        ft = self.ft
        get = self.get
        vroot, droot = state
        ov = {}                 # values assigned in the block (overlay on vroot)
        od = {}                 # deps changed in the block (overlay on droot)
        ovget, odget = ov.get, od.get
        snaps = []
        arg_tags, arg_unbound = ft.arg_tags, ft.arg_unbound
        checks = self.checks
        dead = False            # an instruction of the block certainly raises
        for kind, op, instr, iid, aids, did, extra in self.recs[bi]:
            if kind == _OTHER:
                if record:
                    # (ov holds no None: `ovget(a) or ...` reads a variable)
                    vals = [ovget(a) or get(vroot, a) for a in aids]
                    args = tuple([v[0] if v else TOP for v in vals])
                    arg_tags[iid] = args
                    arg_unbound[iid] = tuple([not (v and v[1]) for v in vals])
                else:
                    vals = args = None
                checked = checks.get(iid)
                if checked is not None:
                    # Past this instruction its checked operands hold values of the
                    # kinds it checked (else it raised): later uses need no check.
                    # One that certainly holds another kind raises: nothing after it
                    # runs (`fadd s x` on the int path of a loop assumed to keep s
                    # an int).
                    for a, typ, narrow in checked:
                        v = ovget(a) or get(vroot, a)
                        if v is not None and not dead and _never(v[0], typ):
                            dead = not self.ft.has_spec
                        if not narrow:
                            continue
                        tags = _checked(v[0] if v else TOP, typ)
                        if v is None or tags is not v[0] or not v[1]:
                            ov[a] = (tags, True, v[2] if v else None, v[3] if v else None)
                if did is None:
                    continue
                tags, bound, rk, rc = extra
                if rk == _R_FIXED:
                    value = (tags, bound, rc[0], rc[1])
                elif rk == _R_NONE:
                    if tags is None:
                        if args is None:
                            args = tuple([v[0] if v else TOP
                                          for v in [ovget(a) or get(vroot, a) for a in aids]])
                        tags = intern(result_tags(instr, args))
                    value = (tags, bound, None, None)
                else:
                    if vals is None:
                        vals = [ovget(a) or get(vroot, a) for a in aids]
                    if rk == _R_ARITH:
                        a, b = vals
                        lo, hi = _arith_range(op, a[2] or FULL if a and a[0] is INT else FULL,
                                              b[2] or FULL if b and b[0] is INT else FULL)
                        check = wrap_check(lo, hi)
                        ft.wrap_checks[iid] = check
                        value = (tags, bound, (lo, hi) if check == "none" and (
                            lo != INT_MIN or hi != INT_MAX) else None, None)
                    elif rk == _R_COPY:
                        v = vals[0]
                        value = (v[0], bound, v[2], v[3]) if v else (TOP, bound, None, None)
                    elif rk == _R_CALC:
                        rng, fact = _result_range(ft, instr, aids, vals)
                        value = (tags, bound, None if rng == FULL else rng, fact)
                    else:   # _R_NOT
                        f = vals[0][3] if vals[0] else None
                        value = (tags, bound, None,
                                 None if f is None else (_NEGATE[f[0]], f[1], f[2]))
            elif kind == _SET:
                vals = [ovget(a) or get(vroot, a) for a in aids]
                if record:
                    arg_tags[iid] = (TOP,) + tuple([v[0] if v else TOP for v in vals])
                    arg_unbound[iid] = (False,) + tuple([not (v and v[1]) for v in vals])
                if did is None:
                    continue
                value = (vals[0][0] if vals and vals[0] else TOP, True, None, None)
            else:
                vals = [ovget(a) or get(vroot, a) for a in aids]
                args = tuple([v[0] if v else TOP for v in vals])
                if record:
                    arg_tags[iid] = args
                    arg_unbound[iid] = tuple([not (v and v[1]) for v in vals])
                if kind == _GET:
                    if did is None:
                        continue
                    v = ovget(extra) or get(vroot, extra)
                    value = (v[0] if v else TOP, True, None, None)
                elif kind == _SPECULATE:
                    vroot, droot = self.put(vroot, ov), self.put_deps(droot, od)
                    ov, od = {}, {}
                    ovget, odget = ov.get, od.get
                    snaps.append(self.prune((vroot, droot), bi, _SPEC))
                    continue
                else:   # _RET
                    if aids:
                        ft.returns |= set(args[0]) if len(args) == 1 else set()
                    else:
                        ft.returns.add("none")
                    continue
            # Assign `value` to did: the facts that mention did die (as does its own),
            # and a new fact makes its operands name did in their deps.
            deps = odget(did, _NO_DEPS)
            if deps is _NO_DEPS:
                deps = get(droot, did)
            if deps is not None:
                while deps is not None:
                    c, deps = deps
                    if c != did:
                        cv = ovget(c) or get(vroot, c)
                        if cv is not None:
                            f = cv[3]
                            if f is not None and (f[1] == did or f[2] == did):
                                ov[c] = (cv[0], cv[1], cv[2], None)
                od[did] = None
            ov[did] = value
            fact = value[3]
            if fact is not None:
                for a in (fact[1], fact[2]) if fact[1] != fact[2] else (fact[1],):
                    deps = odget(a, _NO_DEPS)
                    od[a] = (did, get(droot, a) if deps is _NO_DEPS else deps)
        b = self.blocks[bi]
        if dead:
            edges, snaps = self._after_raise(b, vroot, droot, ov, od, bi)
            return edges, snaps
        if b.falls_off:
            ft.returns.add("none")
        if not b.succs:
            return [], snaps
        droot = self.put_deps(droot, od)
        fact = op = None
        recs = self.recs[bi]
        if recs:
            _, op, _, _, aids, _, _ = recs[-1]
        if op in ("br", "guard") and len(aids) == 1:
            v = ovget(aids[0]) or get(vroot, aids[0])
            fact = v[3] if v is not None else None
        edge = self.edge
        if fact is not None and op == "br" and len(b.succs) == 2:
            if ov and self.shift:
                vroot, ov = self.put(vroot, ov), {}
            t, f = b.targets
            copies = self.end_copies(bi)
            return [(t, *edge(vroot, droot, ov, bi, t, fact, True, copies)),
                    (f, *edge(vroot, droot, ov, bi, f, fact, False, copies))], snaps
        if len(b.succs) > 1 and ov and self.shift:
            vroot, ov = self.put(vroot, ov), {}
        holds = True if fact is not None and op == "guard" else None
        return [(s, *edge(vroot, droot, ov, bi, s, fact, holds)) for s in b.succs], snaps

    def _after_raise(self, b, vroot, droot, ov, od, bi):
        """The edges of block bi when one of its instructions certainly raises: none
        is taken (their states only matter to blocks nothing else reaches)."""
        droot = self.put_deps(droot, od)
        if ov and self.shift:
            vroot, ov = self.put(vroot, ov), {}
        return [(s, self.edge(vroot, droot, ov, bi, s, None, None, live=False)[0], False)
                for s in b.succs], []

    def end_copies(self, bi):
        """{variable: the variable it is a copy of (`id`)} for the copies made in
        block bi that still hold at its end: a branch's fact on one side of a copy
        bounds the other too (`k = id e; go = gt e zero; br go ...`, as loop
        rotation and copy propagation leave a loop's test, still proves k > 0)."""
        copies = self._end_copies.get(bi)
        if copies is None:
            copies = {}
            for _, op, _, _, aids, did, _ in self.recs[bi]:
                if did is None:
                    continue
                if copies:
                    copies.pop(did, None)
                    for k in [k for k, src in copies.items() if src == did]:
                        del copies[k]
                if op == "id" and len(aids) == 1 and aids[0] != did:
                    copies[did] = aids[0]
            self._end_copies[bi] = copies
        return copies

    def edge(self, vroot, droot, ov, src, dst, fact, holds, copies=None, live=True):
        """(state on the edge src -> dst, False if the edge is never taken): the
        block's assignments `ov` applied to vroot, refined by `fact` being `holds`
        (unless holds is None; not refined if the refinement shows the edge is
        never taken; `copies`: see `end_copies`), without the variables dead at dst."""
        get = self.get
        items = dict(ov) if ov else {}
        taken = holds is None or self.refine(items, vroot, fact, holds)
        if taken and copies:
            self.refine_copies(items, vroot, fact, copies)
        key = (src, dst)
        rm = self.prunes.get(key)
        if rm is None:
            rm = self.prunes[key] = _bits((self.live_in[src] | self.defs[src])
                                          & ~self.live_in[dst])
        for i in rm:
            if (items[i] if i in items else get(vroot, i)) is not None:
                items[i] = None
        assumed = self.headers.get(dst) if self.headers else None
        if assumed is not None:
            if taken and live:
                self.assume_at_header(items, vroot, src, dst, assumed)
            else:
                self.ft.edge_checks.pop((src, dst), None)   # (never taken: nothing to check)
        return (self.put(vroot, items), droot), taken

    def assume_at_header(self, items, vroot, src, dst, assumed):
        """On the edge src -> dst, the variables `assumed` at dst hold those tags;
        record which ones the edge must check (those not already known to)."""
        get, names = self.get, self.names
        checks = []
        for i, tags in assumed:
            v = items[i] if i in items else get(vroot, i)
            if v is None or v[0] is tags:
                continue
            if not v[0] <= tags or "?" in v[0]:
                kind = tag_kind(next(iter(tags)))
                checks.append((names[i], kind))
                if _never(v[0], kind):
                    self.ft.edge_fails.add((src, dst, names[i]))
            items[i] = (tags, v[1], None, v[3])
        if checks:
            self.ft.edge_checks[(src, dst)] = tuple(checks)
        else:
            self.ft.edge_checks.pop((src, dst), None)

    def refine(self, items, vroot, fact, holds):
        """Add to `items` (the changes on an edge, over vroot) what `a op b` being
        `holds` (True/False) says of a and b; False if it cannot hold."""
        op, a, b = fact
        if not holds:
            op = _NEGATE[op]
        get = self.get
        va = items[a] if a in items else get(vroot, a)
        vb = items[b] if b in items else get(vroot, b)
        if va is None or vb is None or va[0] != INT or vb[0] != INT:
            return True
        (alo, ahi), (blo, bhi) = va[2] or FULL, vb[2] or FULL
        if op == "ne":
            # Only a bound equal to the other side's single value moves.
            if a == b:
                return False    # x != x
            a_one, b_one = alo == ahi, blo == bhi
            if b_one:
                alo, ahi = alo + (alo == blo), ahi - (ahi == blo)
            if a_one:
                v = (va[2] or FULL)[0]
                blo, bhi = blo + (blo == v), bhi - (bhi == v)
        else:
            if op in ("gt", "ge"):
                op = "lt" if op == "gt" else "le"
                (a, va, alo, ahi), (b, vb, blo, bhi) = (b, vb, blo, bhi), (a, va, alo, ahi)
            if op == "lt":
                ahi, blo = min(ahi, bhi - 1), max(blo, alo + 1)
            elif op == "le":
                ahi, blo = min(ahi, bhi), max(blo, alo)
            else:   # eq
                alo = blo = max(alo, blo)
                ahi = bhi = min(ahi, bhi)
        if alo > ahi or blo > bhi:
            return False
        for v, val, lo, hi in ((a, va, alo, ahi), (b, vb, blo, bhi)):
            rng = None if lo == INT_MIN and hi == INT_MAX else (lo, hi)
            if rng != val[2]:
                items[v] = (val[0], val[1], rng, val[3])
            elif v in items:
                items[v] = val  # (a == b: the second write wins)
        return True

    def refine_copies(self, items, vroot, fact, copies):
        """Give the copies of a fact's operands (or the variables they copy) the
        operand's refined range, intersected with their own."""
        get = self.get
        for a in (fact[1], fact[2]):
            va = items[a] if a in items else get(vroot, a)
            if va is None or va[0] != INT or not va[2]:
                continue
            lo, hi = va[2]
            root = copies.get(a, a)
            for k in [root] + [k for k, src in copies.items() if src == root]:
                if k == a:
                    continue
                vk = items[k] if k in items else get(vroot, k)
                if vk is None or vk[0] != INT:
                    continue
                klo, khi = vk[2] or FULL
                rng = (max(lo, klo), min(hi, khi))
                if rng[0] <= rng[1] and rng != vk[2]:
                    items[k] = (vk[0], vk[1], rng, vk[3])


def _forest_liveness(forest, succs, gen, kill):
    """Per block a superset of the variables live at its entry (bit sets), in
    near-linear time, given the loop forest of a reducible graph.  Liveness on the graph
    without its back edges, in one pass in postorder, plus, in every loop, what
    is live at the loop's header: on a reducible graph a path that makes a
    variable live leaves a loop holding the block only through the loop's header
    (or by an exit the acyclic pass sees), so nothing live is missed.  (An
    iterative solution would need a sweep per level of a loop nest.)"""
    back = forest.back
    part = [0] * len(succs)
    for b in forest.postorder:
        out = 0
        for s in succs[b]:
            if (b, s) not in back:
                out |= part[s]
        part[b] = gen[b] | (out & ~kill[b])
    parent = forest.parent
    around = {}                         # header -> live at it or at an enclosing header
    for h in forest.headers:            # (outer loops first)
        p = parent.get(h)
        around[h] = part[h] | (around[p] if p is not None else 0)
    live = part
    for b in forest.order:
        h = b if b in around else parent.get(b)
        if h is not None:
            live[b] = part[b] | around[h]
    return live


def _loop_order(forest, rpo):
    """Positions of the reachable blocks in an order where every loop is contiguous,
    its header first (reverse postorder, each loop of a reducible graph taken as
    one node of the loop around it), and per header the position of its loop's
    last block."""
    parent, latches = forest.parent, forest.latches
    items = {}                          # header (None: outside loops) -> its items
    for b in forest.order:
        if b in latches:
            items.setdefault(b, []).append((rpo[b], b, False))
            items.setdefault(parent[b], []).append((rpo[b], b, True))
        else:
            items.setdefault(parent[b], []).append((rpo[b], b, False))
    for lst in items.values():
        lst.sort()
    pos, end = list(rpo), {}
    k = 0
    stack = [(None, iter(items.get(None, ())))]
    while stack:
        h, it = stack[-1]
        for _, b, is_loop in it:
            if is_loop:
                stack.append((b, iter(items[b])))
                break
            pos[b] = k
            k += 1
        else:
            stack.pop()
            if h is not None:
                end[h] = k - 1
    return pos, end


def _reverse_postorder(blocks):
    """Each reachable block's position in a reverse postorder of the graph (normal
    and abort edges), a depth-first search taking later blocks first, so a loop's
    body comes before the code after the loop."""
    n = len(blocks)
    graph = Graph.of_succs([sorted(b.all_succs(), reverse=True) for b in blocks])
    post = graph.postorder()
    order = [n] * n
    for pos, b in enumerate(reversed(post)):
        order[b] = pos
    return order


def _record_shared(ft, analysis):
    """Per-instruction results (keyed by `id(instr)`) that hold at every place of
    an instruction object found at several places (a program built in Python
    may reuse one dict): each place's results from the final entry states,
    joined.  (Otherwise the last place analysed would decide for all: an `add`
    proven not to wrap at one place would not be tested at the other.)"""
    for table, fn in _JOIN_RESULT.items():
        setattr(ft, table, _Joining(fn))
    for bi, st in enumerate(analysis.ins):
        if st is not None:
            analysis.transfer(bi, st)
    for table in _JOIN_RESULT:
        setattr(ft, table, dict(getattr(ft, table)))


class _Joining(dict):
    """A table of per-instruction results whose entries join instead of replacing."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __setitem__(self, key, value):
        old = self.get(key)
        super().__setitem__(key, value if old is None else self.fn(old, value))


_WRAP_SIDES = {"none": (False, False), "upper": (True, False), "lower": (False, True),
               "both": (True, True)}
_WRAP_OF_SIDES = {v: k for k, v in _WRAP_SIDES.items()}
_JOIN_RESULT = {
    "arg_tags": lambda a, b: tuple(join(x, y) for x, y in zip(a, b)),
    "arg_unbound": lambda a, b: tuple(x or y for x, y in zip(a, b)),
    "wrap_checks": lambda a, b: _WRAP_OF_SIDES[tuple(
        x or y for x, y in zip(_WRAP_SIDES[a], _WRAP_SIDES[b]))],
    "nonneg": lambda a, b: tuple(x and y for x, y in zip(a, b)),
}


def _give_up(ft, blocks, analysis):
    """Results that assume nothing (every operand checked at run time, every
    variable maybe unassigned, every int unbounded)."""
    ft.precise = False
    ft.arg_tags.clear()
    ft.wrap_checks.clear()
    ft.nonneg.clear()
    ft.arg_unbound = {id(i): (True,) * len(i.get("args") or ()) for b in blocks
                      for i in b.instrs}
    names = set(ft.spec_vars).union(p["name"] for p in analysis.func.get("args") or [])
    names.update(analysis.assumed or ())
    ft.block_in = [State(dict.fromkeys(names, TOP), set()) for _ in blocks]
    ft.returns = {"?", "none"}
    ft.spec_bound = set()
    return ft




def _arg_range(v):
    """The bounds an operand with value v is known to lie in."""
    if v is None or v[0] != INT or v[2] is None:
        return FULL
    return v[2]


def _result_range(ft, instr, aids, vals):
    """(range of the int result or None, fact for a bool result or None), given the
    operands' numbers and values; records the op's wrap_checks / nonneg."""
    op = instr["op"]
    if op == "const":
        return _const_range(instr), None
    if op in ("add", "sub", "mul") and len(aids) == 2:
        lo, hi = _arith_range(op, _arg_range(vals[0]), _arg_range(vals[1]))
        check = wrap_check(lo, hi)
        ft.wrap_checks[id(instr)] = check
        return ((lo, hi) if check == "none" else None), None
    if op == "div" and len(aids) == 2:
        a, b = _arg_range(vals[0]), _arg_range(vals[1])
        ft.nonneg[id(instr)] = (a[0] >= 0, b[0] >= 1)
        return _div_range(a, b), None
    if op == "id" and len(aids) == 1:
        v = vals[0]
        return (None, None) if v is None else (v[2], v[3])
    if op == "char2int":
        return (0, 0x10FFFF), None
    if op in _COMPARES and len(aids) == 2:
        return None, (op, aids[0], aids[1])
    if op == "not" and len(aids) == 1:
        v = vals[0]
        f = v[3] if v is not None else None
        if f is not None:
            return None, (_NEGATE[f[0]], f[1], f[2])
        return None, None
    return None, None
