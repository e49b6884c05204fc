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

import math

from .ops import OPS

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


INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
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
    """Abstract state at a program point.

    types:  tags per variable
    bound:  variables definitely assigned
    ranges: (lo, hi) bounds of int variables (absent: the full 64-bit range)
    facts:  bool variable -> (op, a, b): the variable holds `a op b` (int compare;
            op is lt le gt ge eq, or ne for a negated eq)
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

    def assign(self, var, tags, rng=None):
        self.types[var] = tags
        if rng is None or rng == FULL:
            self.ranges.pop(var, None)
        else:
            self.ranges[var] = rng
        if self.facts:
            self.facts = {c: f for c, f in self.facts.items()
                          if c != var and f[1] != var and f[2] != var}

    def merge(self, other, widen=False):
        """Join other into self; True if self changed.  With `widen`, a bound that
        grows jumps to the next threshold (so loops converge)."""
        changed = False
        types = self.types
        added = []                      # variables other assigns and self does not
        for k, v in other.types.items():
            old = types.get(k)
            if old is v:
                continue
            if old is None:
                added.append(k)
                types[k] = v
                changed = True
            else:
                new = join(old, v)
                if new != old:
                    types[k] = new
                    changed = True
        if not (self.bound <= other.bound):
            self.bound &= other.bound
            changed = True
        if self.ranges != other.ranges:
            changed |= self._merge_ranges(other, widen, added)
        if self.facts and self.facts != other.facts:
            facts = {c: f for c, f in self.facts.items() if other.facts.get(c) == f}
            if len(facts) != len(self.facts):
                self.facts = facts
                changed = True
        return changed

    def _merge_ranges(self, other, widen, new_keys):
        """Join of the int bounds (`new_keys`: variables other added to self)."""
        changed = False
        ranges = {}
        for k, (lo, hi) in self.ranges.items():
            o = other.ranges.get(k)
            if o is None:
                if k in other.types:
                    changed = True      # other has it at full range
                    continue
                ranges[k] = (lo, hi)    # unassigned in other: reading it raises anyway
                continue
            nlo, nhi = min(lo, o[0]), max(hi, o[1])
            if widen:
                if nlo < lo:
                    nlo = max(t for t in _LO_THRESHOLDS if t <= nlo)
                if nhi > hi:
                    nhi = min(t for t in _HI_THRESHOLDS if t >= nhi)
            if (nlo, nhi) != (lo, hi):
                changed = True
            if (nlo, nhi) != FULL:
                ranges[k] = (nlo, nhi)
        for k in new_keys:
            r = other.ranges.get(k)
            if r is not None:
                ranges[k] = r           # unassigned here: the other side's range
        self.ranges = ranges
        return changed

    def refine(self, fact, holds):
        """The state on the edge where `a op b` is `holds` (True/False)."""
        op, a, b = fact
        if not holds:
            op = _NEGATE[op]
        if self.types.get(a) != {"int"} or self.types.get(b) != {"int"}:
            return self
        (alo, ahi), (blo, bhi) = self.range(a), self.range(b)
        if op == "ne":
            # Only a bound equal to the other side's single value moves.
            if a == b:
                return self     # x != x: never taken
            a_one, b_one = alo == ahi, blo == bhi
            if b_one:
                alo, ahi = alo + (alo == blo), ahi - (ahi == blo)
            if a_one:
                v = self.range(a)[0]
                blo, bhi = blo + (blo == v), bhi - (bhi == v)
        else:
            if op in ("gt", "ge"):
                op = "lt" if op == "gt" else "le"
                (a, alo, ahi), (b, blo, bhi) = (b, blo, bhi), (a, alo, ahi)
            if op == "lt":
                ahi, blo = min(ahi, bhi - 1), max(blo, alo + 1)
            elif op == "le":
                ahi, blo = min(ahi, bhi), max(blo, alo)
            else:   # eq
                alo = blo = max(alo, blo)
                ahi = bhi = min(ahi, bhi)
        if alo > ahi or blo > bhi:
            return self         # an edge never taken: any state will do
        new = self.copy()
        for v, lo, hi in ((a, alo, ahi), (b, blo, bhi)):
            if (lo, hi) == FULL:
                new.ranges.pop(v, None)
            else:
                new.ranges[v] = (lo, hi)
        return new


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
    v = instr.get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or instr.get("type") == "float":
        return None
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    n = math.floor(v)
    n = ((n - INT_MIN) & ((1 << 64) - 1)) + INT_MIN
    return (n, n)


class FunctionTypes:
    """The result of inference for one function."""

    def __init__(self):
        self.arg_tags = {}          # id(instr) -> tuple of tags per argument
        self.arg_unbound = {}       # id(instr) -> per argument: may be unassigned here
        self.block_in = []          # per block: State at entry (None if unreachable)
        self.spec_bound = None      # vars definitely assigned at every `speculate` (set)
        self.spec_vars = set()      # every variable key assigned anywhere in the function
        self.returns = set()        # tags that `ret` can return, plus 'none'
        self.wrap_checks = {}       # id(add/sub/mul instr) -> 'none'|'upper'|'lower'|'both'
        self.nonneg = {}            # id(div instr) -> (operand 0 proven >= 0, operand 1 >= 1)
        self.precise = True         # False if the analysis gave up (nothing is assumed)
        self.has_spec = False


def _result_tags(instr, args):
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


NARROWING_PASSES = 1    # passes without widening after the fixpoint (regain bounds)
VISITS_PER_BLOCK = 200  # worklist budget; beyond it the analysis assumes nothing


def infer(func, blocks, assumed=None):
    """Infer tags for a function split into `blocks` (objects with .instrs, .succs,
    .targets, .abort_succ: the guard's abort target or None, .falls_off: True if
    control can leave the function at the block's end).

    `assumed`: {parameter: element kind} for pointer parameters assumed to point
    into regions of that kind (the caller of the code must check it).

    A worklist fixpoint with widening at loop heads, then a few narrowing passes
    (plain joins from the fixpoint) that give back bounds widening threw away; the
    per-instruction results come from the last pass."""
    ft = FunctionTypes()
    n = len(blocks)
    ft.block_in = [None] * n
    if n == 0:
        return ft
    params = func.get("args") or []
    entry = State({}, set())
    for p in params:
        entry.types[p["name"]] = intern(checked_tags(p.get("type")))
        entry.bound.add(p["name"])
    for name, kind in (assumed or {}).items():
        entry.types[name] = intern(frozenset({"ptr:" + kind}))

    seen = set()
    shared = False                      # an instruction object at two places
    for b in blocks:
        for instr in b.instrs:
            shared |= id(instr) in seen
            seen.add(id(instr))
            d = instr.get("dest")
            if d is not None:
                ft.spec_vars.add(d)
            if instr["op"] == "set" and instr.get("args"):
                ft.spec_vars.add(("shadow", instr["args"][0]))
            if instr["op"] in ("speculate", "commit", "guard"):
                ft.has_spec = True

    # 1. fixpoint with widening
    ft.block_in[0] = entry.copy()
    work = [0]
    on_work = {0}
    aborting = set()                    # blocks with a guard (their abort edge uses spec)
    visits = [0] * n
    widen_at = _loop_heads(blocks)
    spec = [None, 0]                    # join of states at `speculate`, merges so far

    widened = [False]

    def flow(target, st):
        cur = ft.block_in[target]
        if cur is None:
            ft.block_in[target] = st.copy()
            changed = True
        else:
            visits[target] += 1
            widen = target in widen_at and visits[target] > WIDEN_AFTER
            widened[0] |= widen
            changed = cur.merge(st, widen=widen)
        if changed and target not in on_work:
            work.append(target)
            on_work.add(target)

    budget = VISITS_PER_BLOCK * (n + 5)      # a safety net against slow convergence
    while work:
        budget -= 1
        if budget < 0:
            return _give_up(ft, blocks)
        work.sort(reverse=True)         # lowest block first: roughly program order
        bi = work.pop()
        on_work.discard(bi)
        edges, snaps = _transfer_block(ft, blocks[bi], ft.block_in[bi])
        for snap in snaps:
            if spec[0] is None:
                spec[0] = snap
                changed = True
            else:
                spec[1] += 1
                changed = spec[0].merge(snap, widen=spec[1] > WIDEN_AFTER)
            if changed:
                for g in aborting:
                    flow(blocks[g].abort_succ, spec[0])
        for target, st in edges:
            flow(target, st)
        if blocks[bi].abort_succ is not None:
            aborting.add(bi)
            if spec[0] is not None:
                flow(blocks[bi].abort_succ, spec[0])

    # 2. narrowing: recompute every entry state as the plain join of its inputs
    # (not needed if nothing was widened: the fixpoint is then the least one and the
    # results recorded on the way are final)
    reachable = [i for i in range(n) if ft.block_in[i] is not None]
    spec_state = spec[0]
    for npass in range(NARROWING_PASSES + 1 if widened[0] or spec[1] > WIDEN_AFTER else 0):
        new_in = [None] * n
        new_in[0] = entry.copy()
        new_spec = None
        outputs = []
        for bi in reachable:
            edges, snaps = _transfer_block(ft, blocks[bi], ft.block_in[bi])
            outputs.extend(edges)
            if spec_state is not None and blocks[bi].abort_succ is not None:
                outputs.append((blocks[bi].abort_succ, spec_state))
            for snap in snaps:
                if new_spec is None:
                    new_spec = snap.copy()
                else:
                    new_spec.merge(snap)
        if npass == NARROWING_PASSES:
            break                       # the last pass only records results
        for target, st in outputs:
            if new_in[target] is None:
                new_in[target] = st.copy()
            else:
                new_in[target].merge(st)
        for i in reachable:
            if new_in[i] is not None:
                ft.block_in[i] = new_in[i]
        spec_state = new_spec
    ft.spec_bound = spec_state.bound if spec_state is not None else set()
    if shared:
        _record_shared(ft, blocks)
    return ft


def _record_shared(ft, blocks):
    """Per-instruction results (keyed by `id(instr)`) that hold at every place of
    an instruction object found at several places (a program built in Python
    may reuse one dict): each place's results from the final entry states,
    joined.  (Otherwise the last place analysed would decide for all: an `add`
    proven not to wrap at one place would not be tested at the other.)"""
    for table, fn in _JOIN_RESULT.items():
        setattr(ft, table, _Joining(fn))
    for bi, st in enumerate(ft.block_in):
        if st is not None:
            _transfer_block(ft, blocks[bi], st)
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


def _give_up(ft, blocks):
    """Results that assume nothing (every operand checked at run time, every
    variable maybe unassigned, every int unbounded)."""
    ft.precise = False
    ft.arg_tags.clear()
    ft.wrap_checks.clear()
    ft.nonneg.clear()
    ft.arg_unbound = {id(i): (True,) * len(i.get("args") or ()) for b in blocks
                      for i in b.instrs}
    names = set(ft.spec_vars).union(*(st.types for st in ft.block_in if st is not None))
    ft.block_in = [State(dict.fromkeys(names, TOP), set()) for _ in blocks]
    ft.returns = {"?", "none"}
    ft.spec_bound = set()
    return ft


def _transfer_block(ft, b, st_in):
    """Run block b on the abstract state st_in, recording per-instruction results.
    Returns ([(successor, state on that edge)], [states at `speculate`])."""
    st = st_in.copy()
    snaps = []
    for instr in b.instrs:
        op = instr["op"]
        arg_names = instr.get("args") or []
        if op == "set":
            args = tuple(st.types.get(a, TOP) for a in arg_names[1:2])
            ft.arg_tags[id(instr)] = (TOP,) + args
            ft.arg_unbound[id(instr)] = (False,) + tuple(a not in st.bound
                                                        for a in arg_names[1:2])
            if arg_names:
                key = ("shadow", arg_names[0])
                st.assign(key, args[0] if args else TOP)
                st.bound.add(key)
            continue
        args = tuple(st.types.get(a, TOP) for a in arg_names)
        ft.arg_tags[id(instr)] = args
        ft.arg_unbound[id(instr)] = tuple(a not in st.bound for a in arg_names)
        if op == "speculate":
            snaps.append(st.copy())
        elif op == "ret":
            if arg_names:
                ft.returns |= set(args[0]) if len(args) == 1 else set()
            else:
                ft.returns.add("none")
        dest = instr.get("dest")
        if dest is not None and (OPS.get(op) is None or OPS[op].result is not None
                                 or op == "call"):
            if op == "get":
                val = st.types.get(("shadow", dest), TOP)
            else:
                val = intern(_result_tags(instr, args))
            rng, fact = _result_range(ft, instr, st, arg_names)
            st.assign(dest, val, rng)
            if fact is not None:
                st.facts[dest] = fact
            if op == "const" and not isinstance(instr.get("value"), (bool, int, float, str)):
                st.bound.discard(dest)      # no value: the variable becomes unset
            else:
                st.bound.add(dest)
    if b.falls_off:
        ft.returns.add("none")
    term = b.instrs[-1] if b.instrs else None
    cond = term.get("args") if term is not None and term["op"] in ("br", "guard") else None
    fact = st.facts.get(cond[0]) if cond and len(cond) == 1 else None
    if fact is not None and term["op"] == "br" and len(b.succs) == 2:
        t, f = b.targets
        edges = [(t, st.refine(fact, True)), (f, st.refine(fact, False))]
    elif fact is not None and term["op"] == "guard":
        edges = [(s, st.refine(fact, True)) for s in b.succs]
    else:
        edges = [(s, st) for s in b.succs]
    return edges, snaps


def _loop_heads(blocks):
    """Blocks entered by a retreating edge of a depth-first search: every cycle of
    the graph passes through one, so widening there makes the analysis converge
    (and elsewhere it would only lose precision)."""
    heads = set()
    state = [0] * len(blocks)          # 0 new, 1 on the stack, 2 done
    stack = [(0, iter(_succs_of(blocks[0])))]
    state[0] = 1
    while stack:
        node, it = stack[-1]
        for s in it:
            if state[s] == 0:
                state[s] = 1
                stack.append((s, iter(_succs_of(blocks[s]))))
                break
            if state[s] == 1:
                heads.add(s)
        else:
            state[node] = 2
            stack.pop()
    return heads


def _succs_of(b):
    return list(b.succs) + ([b.abort_succ] if b.abort_succ is not None else [])


_COMPARES = ("lt", "le", "gt", "ge", "eq")


def _result_range(ft, instr, st, args):
    """(range of the int result or None, fact for a bool result or None)."""
    op = instr["op"]
    if op == "const":
        return _const_range(instr), None
    if op in ("add", "sub", "mul") and len(args) == 2:
        lo, hi = _arith_range(op, st.range(args[0]), st.range(args[1]))
        check = wrap_check(lo, hi)
        ft.wrap_checks[id(instr)] = check
        return ((lo, hi) if check == "none" else None), None
    if op == "div" and len(args) == 2:
        a, b = st.range(args[0]), st.range(args[1])
        ft.nonneg[id(instr)] = (a[0] >= 0, b[0] >= 1)
        return _div_range(a, b), None
    if op == "id" and len(args) == 1:
        r = st.ranges.get(args[0])
        return r, st.facts.get(args[0])
    if op == "char2int":
        return (0, 0x10FFFF), None
    if op in _COMPARES and len(args) == 2:
        return None, (op, args[0], args[1])
    if op == "not" and len(args) == 1:
        f = st.facts.get(args[0])
        if f is not None:
            return None, (_NEGATE[f[0]], f[1], f[2])
        return None, None
    return None, None
