"""Optimizing a straight-line trace and placing its speculative regions.

Works on the `Item` list from `trace_build`:

1. `number_values`: value numbering over the whole line (copy propagation,
   constant folding through `bril.analysis.folding`, common subexpressions), using
   what guards make known (after `guard c`, c is true); a variable the line
   sets to several constants reads them from one variable per constant.  A guard on the
   branch's false direction becomes a guard on the inverse comparison (or on
   the operand of a `not`) instead of adding a `not`.
2. `hoist_guards`: each guard moves up to just after the definition of its
   condition.  Aborting earlier is always sound: the rollback restores the
   region's starting state and the original code redoes the work.
3. `place_regions`: a rollback cannot undo a heap write or a `print`, so every
   effect must follow the last guard of its region.  An effect in the traced
   function itself with guards after it closes the region (`commit`) and opens
   a new one after it, resuming on abort at a label inserted after the effect.
   An effect inside an inlined callee cannot resume mid-callee: the trace is cut
   before the call and jumps back into the original code there.
4. `eliminate_dead`: drops pure instructions whose results nobody reads, where
   "reads" includes the original code at every exit (the region starts, whose
   variables must be right for a resume, and the end of the trace).
"""


from ..analysis.folding import exact_at_least, exact_at_most, exact_in_double, fold_values
from ..analysis.numbering import ValueNumbers, const_key
from ..ir.ops import FOLDABLE, INT_MAX, INT_MIN, OPS
from .trace_build import EFFECT_OPS, Item, NotTraceable

# Comparisons whose negation is another comparison (the op table's `negated`;
# none for floats, because of NaN).
INVERSE = {name: op.negated for name, op in OPS.items() if op.negated is not None}


_BRIL_TYPE = {int: "int", bool: "bool", float: "float", str: "char"}


class _TraceNumbers(ValueNumbers):
    """Value numbers over a trace, plus the defining instruction of each pure
    value (to turn a guard on `not c` or on a negated comparison into a guard on
    what it was computed from)."""

    __slots__ = ("defn",)

    def __init__(self):
        super().__init__()
        self.defn = {}          # value number -> defining instruction (pure ones)

    def canon(self, var):
        """The variable to read var's value from (its value's home)."""
        return self.home(self.number(var)) or var


def number_values(items, fresh_name, known=None):
    """Value numbering over the line; returns a new item list.  `known` maps
    variables defined before the trace to constants they surely hold."""
    n = _TraceNumbers()
    writes = {}
    for it in items:
        d = it.instr.get("dest")
        if d is not None:
            writes[d] = writes.get(d, 0) + 1
    for var, value in (known or {}).items():
        # Share the value number of a `const` of the same value, so that
        # `div a two` and `div a two_again` are the same expression.
        v = n.of_const(const_key(_BRIL_TYPE[type(value)], value), value)
        # Not a holder: other variables are never replaced by it, since the
        # trace may run where the original has not assigned it yet.
        n.num_of[var] = v
    out = []
    for it in items:
        ins = dict(it.instr)
        op = ins["op"]
        if it.barrier:
            ins["args"] = [n.canon(a) for a in ins.get("args") or []]
            out.append(Item(ins, it.site, it.frame, True))
            if "dest" in ins:
                n.assign(ins["dest"], n.new())
            continue
        if op == "guard":
            negate = ins.pop("negate", False)
            v = n.number(ins["args"][0])
            if negate:
                if v in n.consts:
                    if n.consts[v]:
                        raise NotTraceable("a guard that always fails")
                    continue
                d = n.defn.get(v)
                if d is not None and d["op"] == "not" and n.holders.get(n.number(d["args"][0])):
                    ins["args"] = [n.canon(d["args"][0])]
                elif d is not None and d["op"] in INVERSE and all(
                        n.holders.get(n.number(a)) for a in d["args"]):
                    g = fresh_name()
                    inv = {"op": INVERSE[d["op"]], "dest": g, "type": "bool",
                           "args": [n.canon(a) for a in d["args"]]}
                    out.append(Item(inv, it.site, it.frame))
                    n.assign(g, n.new())
                    ins["args"] = [g]
                else:
                    g = fresh_name()
                    out.append(Item({"op": "not", "dest": g, "type": "bool",
                                     "args": [n.canon(ins["args"][0])]}, it.site, it.frame))
                    n.assign(g, n.new())
                    ins["args"] = [g]
                n.consts[v] = False
            else:
                ins["args"] = [n.canon(ins["args"][0])]
            gv = n.number(ins["args"][0])
            if gv in n.consts:
                if not n.consts[gv]:
                    raise NotTraceable("a guard that always fails")
                continue                    # known true: the guard is redundant
            n.consts[gv] = True
            out.append(Item(ins, it.site, it.frame, origin=it.origin))
            continue
        if "args" in ins:
            ins["args"] = [n.canon(a) for a in ins["args"]]
        dest = ins.get("dest")
        if dest is None:
            out.append(Item(ins, it.site, it.frame))
            continue
        if op == "const":
            v = n.of_const(const_key(ins.get("type"), ins["value"]), ins["value"])
        elif op == "id":
            v = n.number(ins["args"][0])
        elif op in FOLDABLE and op != "id":
            avs = [n.number(a) for a in ins["args"]]
            v = None
            if all(a in n.consts for a in avs):
                # (None where it would fail at run time: left to fail there)
                value = fold_values(op, [n.consts[a] for a in avs])
                if value is not None and isinstance(ins.get("type"), str) and (
                        ins["type"] != "any") and (
                        ins["type"] != "int" or exact_in_double(value)):
                    ins = {"op": "const", "dest": dest, "type": ins["type"], "value": value}
                    v = n.of_const(const_key(ins["type"], value), value)
            if v is None:
                v, seen = n.of_expr(op, avs, str(ins.get("type")))
                if seen and n.home(v) is not None:
                    ins = {"op": "id", "dest": dest, "type": ins.get("type"),
                           "args": [n.home(v)]}
                else:
                    n.defn[v] = ins
        else:
            v = n.new()           # loads, allocs, calls: a new value each time
        if n.num_of.get(dest) == v and dest in n.holders.get(v, ()):
            continue            # the variable already holds this value (it ran before)
        if ins["op"] == "const" and writes.get(dest, 0) > 1 and isinstance(ins.get("type"), str):
            # A variable the line sets to several values: keep each constant in
            # a variable of its own (a loop invariant, computed once) and make
            # this a copy, which dies if nothing reads it.
            hs = n.holders.get(v)
            if not hs:
                g = fresh_name()
                out.append(Item(dict(ins, dest=g), it.site, it.frame))
                n.assign(g, v)
                hs = n.holders[v]
            ins = {"op": "id", "dest": dest, "type": ins["type"], "args": [hs[0]]}
        n.assign(dest, v)
        out.append(Item(ins, it.site, it.frame))
    return out


def _defines(item, names):
    d = item.instr.get("dest")
    return d is not None and d in names


def hoist_guards(items):
    """Move each guard up to just after the definition of its condition."""
    items = list(items)
    for i in range(len(items)):
        if items[i].instr["op"] != "guard":
            continue
        args = set(items[i].instr["args"])
        j = i
        while j > 0 and not _defines(items[j - 1], args):
            j -= 1
        if j < i:
            items.insert(j, items.pop(i))
    return items


def is_effect(item):
    return item.barrier or item.instr["op"] in EFFECT_OPS


def find_cut(items):
    """Index to truncate at and the frame-0 site to resume at, if an effect inside
    an inlined callee has a guard after it; else None."""
    last_guard = max((i for i, it in enumerate(items) if it.instr["op"] == "guard"), default=-1)
    for i, it in enumerate(items[:last_guard]):
        if it.frame > 0 and is_effect(it):
            j = i
            while j > 0 and items[j - 1].site == it.site and items[j - 1].frame > 0:
                j -= 1
            return j, it.site
    return None


def place_regions(items):
    """Split the line into segments: returns a list of ("spec", resume_site) /
    ("commit", None) markers interleaved with items."""
    last_guard = max((i for i, it in enumerate(items) if it.instr["op"] == "guard"), default=-1)
    out = [("spec", None)]
    open_ = True
    for i, it in enumerate(items):
        if is_effect(it) and open_:
            out.append(("commit", None))
            open_ = False
            out.append(it)
            if i < last_guard:
                # guards follow: a new region, resuming after this effect on abort
                assert it.frame == 0, "find_cut removes inlined effects before guards"
                out.append(("spec", it.site + 1))
                open_ = True
            continue
        if it.instr["op"] == "guard" and not open_:
            raise AssertionError("guard outside a region")
        out.append(it)
    if open_:
        out.append(("commit", None))
    return out


def eliminate_dead(seq, live_at, end_live):
    """Drop pure instructions whose results are not read before being overwritten,
    by the rest of the trace or by the original code at an exit."""
    live = set(end_live)
    keep = []
    for entry in reversed(seq):
        if isinstance(entry, tuple):
            if entry[0] == "spec" and entry[1] is not None:
                live |= live_at(entry[1])
            keep.append(entry)
            continue
        ins = entry.instr
        d = ins.get("dest")
        op = ins["op"]
        removable = (op in ("const", "id") or (op in FOLDABLE and not OPS[op].may_trap)
                     or op == "ptradd")
        if d is not None and removable and not entry.barrier and (
                d not in live or (op == "id" and ins["args"] == [d])):
            continue
        if d is not None:
            live.discard(d)
        live.update(ins.get("args") or [])
        keep.append(entry)
    keep.reverse()
    return keep


# --- induction-variable guards ---------------------------------------------------------

_BOUND = {"lt": ("upper", 1), "le": ("upper", 0), "gt": ("lower", 1), "ge": ("lower", 0)}
_SWAP = {name: OPS[name].swapped for name in _BOUND}


def strengthen_guards(items, fresh_name, known=None, int_min=INT_MIN, int_max=INT_MAX):
    """Replace groups of guards on one induction variable by the strongest one.

    In an unrolled counted loop the guards `i < n`, `i+1 < n`, ... all follow
    from the last; `i >= s`, `i+1 >= s`, ... from the first.  Values are
    tracked as (base, offset): a variable's value at trace entry plus a
    constant.  Each group of guards comparing one base against one unchanged
    bound keeps only its strongest member.  When the group's offsets lie
    between 0 and the strongest one's, D, it becomes `base REL bound - D` at
    the start of the trace (aborting earlier is always sound; done for lone
    guards too, e.g. the test at the bottom of a rotated loop), with one check
    that `bound - D` does not wrap (an invariant: loop passes skip it);
    that bounds every offset away from the 64-bit limits.  Otherwise it is
    computed at the place of the group's first guard, so aborts happen no
    later than before and no trapping instruction runs where the original
    would have left the loop; the implication needs exact arithmetic, so the
    trace first checks, once, that no offset of the base can wrap around.
    """
    assigned = {it.instr.get("dest") for it in items}
    form = {}                   # var -> (base var or None, offset)
    defn = {}                   # var -> its current defining instruction
    offsets = {}                # base -> [lo, hi] offsets computed
    groups = {}                 # (base, bound, kind) -> list of (index, normalized offset, var, raw off)

    known = known or {}

    def form_of(v):
        if v in form:
            return form[v]              # assigned in the trace (None: not affine)
        k = known.get(v)
        return (None, k) if type(k) is int else (v, 0)

    for idx, it in enumerate(items):
        ins = it.instr
        op = ins["op"]
        if op == "guard":
            c = ins["args"][0]
            d = defn.get(c)
            if d is None or d[0]["op"] not in _BOUND:
                continue
            (x, y), rel = d[0]["args"], d[0]["op"]
            fx, fy = d[1]
            if fx is None or fy is None or form_of(x) != fx or form_of(y) != fy:
                continue        # an operand changed between the comparison and the guard
            if fx[0] is None and fy[0] is not None:     # bound on the left: swap sides
                x, y, fx, fy, rel = y, x, fy, fx, _SWAP[rel]
            if fx[0] is None or (fy[0] is not None and (fy[0] in assigned or fy[1] != 0)):
                continue
            if fy[0] is not None and fx[0] == fy[0]:
                continue
            bound = ("const", fy[1]) if fy[0] is None else ("var", fy[0])
            kind, strict = _BOUND[rel]
            norm = fx[1] + strict if kind == "upper" else fx[1] - strict
            groups.setdefault((fx[0], bound, kind), []).append((idx, norm, x, fx[1]))
            continue
        dest = ins.get("dest")
        if dest is None:
            continue
        defn[dest] = (ins, [form_of(a) for a in ins.get("args") or []])
        f = None
        if ins.get("type") == "int":
            if op == "const" and type(ins.get("value")) is int:
                f = (None, ins["value"])
            elif op == "id":
                f = form_of(ins["args"][0])
            elif op in ("add", "sub"):
                fa, fb = form_of(ins["args"][0]), form_of(ins["args"][1])
                if fa is not None and fb is not None:
                    if fb[0] is None:
                        f = (fa[0], fa[1] + fb[1] if op == "add" else fa[1] - fb[1])
                    elif fa[0] is None and op == "add":
                        f = (fb[0], fb[1] + fa[1])
        if f is not None and f[0] is not None:
            lohi = offsets.setdefault(f[0], [0, 0])
            lohi[0] = min(lohi[0], f[1])
            lohi[1] = max(lohi[1], f[1])
        form[dest] = f

    drop = set()
    insert = {}                 # index -> items to insert before it
    checked = set()
    top = []                    # items for the start of the trace
    shifted = {}                # base -> all its groups were shifted to the bound
    for (base, bound, kind), gs in groups.items():
        pick = max if kind == "upper" else min
        strongest = pick(gs, key=lambda g: g[1])
        first = gs[0]
        cond = items[strongest[0]].instr["args"][0]
        cmp = dict(defn_of(items, strongest[0], cond))
        # The strongest guard, at the start of the trace, on the base's entry
        # value: `base + D REL bound` as `base REL bound - D`.  With no
        # wrap-around in `bound - D` (checked once: an invariant) this is
        # exact, and it bounds base + d for every offset d between 0 and D
        # away from the 64-bit limits, so the group's other guards (offsets
        # in that range) follow from it.
        big = strongest[3]
        if not (exact_in_double(big) and exact_in_double(strongest[3] - first[3])):
            continue        # (a literal the reference tools would misread: leave them)
        offs = [g[3] for g in gs]
        ok = (min(offs) >= 0 if kind == "upper" else max(offs) <= 0) and (
            max(offs) <= big if kind == "upper" else min(offs) >= big)
        x_is_left = cmp["args"][0] == strongest[2]
        site, frame = items[0].site, 0
        if len(gs) < 2 and not (ok and (bound[0] == "var" or int_min <= bound[1] - big <= int_max)):
            continue        # a lone guard that cannot move to the start: leave it
        for g in gs:
            drop.add(g[0])
        new = []
        if ok and bound[0] == "const":
            bm = bound[1] - big
            if int_min <= bm <= int_max and exact_in_double(bm):
                bv = fresh_name()
                new.append(Item({"op": "const", "dest": bv, "type": "int", "value": bm},
                                site, frame))
            else:
                ok = False
        elif ok and big == 0:
            bv = bound[1]
        elif ok:
            dv, bv, cv = fresh_name(), fresh_name(), fresh_name()
            # bound - D did not wrap iff it is below bound (D > 0), above it (D < 0)
            new.append(Item({"op": "const", "dest": dv, "type": "int", "value": big}, site, 0))
            new.append(Item({"op": "sub", "dest": bv, "type": "int", "args": [bound[1], dv]},
                            site, 0))
            new.append(Item({"op": "lt" if big > 0 else "gt", "dest": cv, "type": "bool",
                             "args": [bv, bound[1]]}, site, 0))
            new.append(Item({"op": "guard", "args": [cv]}, site, 0))
        covers = tuple(items[g[0]].origin for g in gs)
        if ok:
            gv = fresh_name()
            args = [base, bv] if x_is_left else [bv, base]
            new.append(Item({"op": cmp["op"], "dest": gv, "type": "bool", "args": args},
                            site, frame))
            # A lone guard moved to the start tests exactly what it tested (the
            # wrap-around check aside): it keeps its origin, so it can exit.
            origin = items[first[0]].origin if len(gs) == 1 else -1
            new.append(Item({"op": "guard", "args": [gv]}, site, frame, origin=origin,
                            covers=covers))
            top.extend(new)
            shifted.setdefault(base, True)
            continue
        shifted[base] = False
        site, frame = items[first[0]].site, items[first[0]].frame
        if strongest is first:
            it = items[first[0]]
            new.append(Item(it.instr, it.site, it.frame, it.barrier, it.origin, covers))
        else:
            # At the first guard, `first[2]` holds base + first[3]: step it to
            # the strongest guard's value and test that instead.
            delta = strongest[3] - first[3]
            dv, tv, gv = fresh_name(), fresh_name(), fresh_name()
            new.append(Item({"op": "const", "dest": dv, "type": "int", "value": delta}, site, frame))
            new.append(Item({"op": "add", "dest": tv, "type": "int", "args": [first[2], dv]},
                            site, frame))
            args = [tv if a == strongest[2] else a for a in cmp["args"]]
            if bound[0] == "const":
                bv = fresh_name()
                new.append(Item({"op": "const", "dest": bv, "type": "int", "value": bound[1]},
                                site, frame))
                args = [a if a == tv else bv for a in args]
            new.append(Item({"op": cmp["op"], "dest": gv, "type": "bool", "args": args},
                            site, frame))
            new.append(Item({"op": "guard", "args": [gv]}, site, frame, covers=covers))
        insert.setdefault(first[0], []).extend(new)
    for base, all_shifted in shifted.items():
        if all_shifted or base in checked:
            continue
        checked.add(base)
        lo, hi = offsets.get(base, (0, 0))
        pre = insert.setdefault(0, [])
        # (each limit moved inward to a value a double holds, for the reference
        # tools: a stronger test, never a wrong one)
        for limit, op, needed in ((exact_at_most(int_max - hi), "le", hi > 0),
                                  (exact_at_least(int_min - lo), "ge", lo < 0)):
            if needed:
                lv, cv = fresh_name(), fresh_name()
                pre.insert(0, Item({"op": "guard", "args": [cv]}, items[0].site, 0))
                pre.insert(0, Item({"op": op, "dest": cv, "type": "bool",
                                    "args": [base, lv]}, items[0].site, 0))
                pre.insert(0, Item({"op": "const", "dest": lv, "type": "int",
                                    "value": limit}, items[0].site, 0))
    if top:
        insert[0] = top + insert.get(0, [])
    if not drop:
        return items
    out = []
    for idx, it in enumerate(items):
        out.extend(insert.get(idx, ()))
        if idx not in drop:
            out.append(it)
    return out


def defn_of(items, index, var):
    """The instruction that defines `var` most recently before `items[index]`."""
    for j in range(index - 1, -1, -1):
        if items[j].instr.get("dest") == var:
            return items[j].instr
    raise KeyError(var)
