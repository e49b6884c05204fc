"""Side exits: leaving a trace at a failed guard straight into the original code.

A guard of a region without rollback resumes, when it fails, where its region
started, so the original code redoes the work the trace already did; in a
speculative region the rollback throws that work away too.  When the trace's
state at a guard is exactly the original program's state at the branch the
guard came from, the guard can instead jump to the other side of that branch:
an *exit* (PyPy's and LuaJIT's side exits, with the resume data proven rather
than recorded).  Values the trace keeps in its own temporaries are copied back
by a small stub before the jump.

Whether the states agree is decided by evaluating both straight lines
symbolically from the loop header: the replayed original path up to the
branch, and the emitted trace up to the guard.  Every variable live at the
exit's target must have the same symbolic value in some variable of the
trace, both lines must have done the same effects in the same order, and
every branch the original took before this one must already be checked by
the trace (guards move up, so a later branch's guard can run before an
earlier one's: exiting there would skip the earlier test).  What is not
proven gets no exit: the guard keeps its region's resume.
"""

import itertools

from ..analysis.folding import fold_values
from ..analysis.numbering import const_key
from ..ir.ops import FOLDABLE, OPS, wrap64
from .trace_build import EFFECT_OPS

_opaque = itertools.count()


class Symbols:
    """Hash-consed symbolic values (small ints), shared by the lines compared:
    a value numbering over two straight lines, with constants keyed as in
    `bril.analysis.numbering` and linear forms (base + offset) of its own."""

    def __init__(self):
        self.ids = {}
        self.consts = {}        # id -> Python value
        self.lins = {}          # id -> (base id, int offset): base + offset
        self.inputs = {}        # id -> variable whose value at the header it is

    def intern(self, key):
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.ids)
        return i

    def const(self, typ, value):
        i = self.intern(const_key(typ, value))
        self.consts[i] = value
        return i

    def initial(self, var):
        i = self.intern(("in", var))
        self.inputs[i] = var
        return i

    def linear(self, base, off):
        off = wrap64(off)
        if off == 0:
            return base
        i = self.intern(("lin", base, off))
        self.lins[i] = (base, off)
        return i


_KNOWN_TYPE = {bool: "bool", int: "int", str: "char"}


class SymbolicState:
    """Symbolic values of the variables after a straight line of instructions,
    and the chain of effects (stores, prints, calls, ...) it performed."""

    def __init__(self, syms, known):
        self.syms = syms
        self.known = known          # variables surely holding a constant (as the optimizer assumes)
        self.val = {}
        self.chain = syms.intern(("fx",))
        self.checked = set()        # origins of the original guards known to hold

    def copy(self):
        s = SymbolicState(self.syms, self.known)
        s.val = dict(self.val)
        s.chain = self.chain
        s.checked = set(self.checked)
        return s

    def passed(self, item):
        """The guard `item` held: so do the original guards it stands for."""
        if item.origin >= 0:
            self.checked.add(item.origin)
        self.checked.update(item.covers)

    def get(self, var):
        v = self.val.get(var)
        if v is None:
            if var in self.known:
                c = self.known[var]
                v = self.syms.const(_KNOWN_TYPE[type(c)], c)
            else:
                v = self.syms.initial(var)
        return v

    def run(self, ins):
        op = ins.get("op")
        if op is None:
            return
        dest = ins.get("dest")
        syms = self.syms
        if op in EFFECT_OPS or op == "call":
            args = tuple(self.get(a) for a in ins.get("args") or ())
            self.chain = syms.intern(("fx", self.chain, op, args, tuple(ins.get("funcs") or ())))
            if dest is not None:
                self.val[dest] = syms.intern(("fxv", self.chain))
            return
        if dest is None:
            return                  # guard, br, jmp, nop, speculate, commit
        if op == "const":
            self.val[dest] = syms.const(ins.get("type"), ins["value"])
        elif op == "id":
            self.val[dest] = self.get(ins["args"][0])
        elif op == "load":
            self.val[dest] = syms.intern(("load", self.get(ins["args"][0]), self.chain))
        elif op in FOLDABLE or op == "ptradd":
            self.val[dest] = self._pure(op, ins.get("type"), [self.get(a) for a in ins["args"]])
        else:
            self.val[dest] = syms.intern(("opaque", next(_opaque)))

    def _pure(self, op, typ, args):
        syms = self.syms
        if op in FOLDABLE and all(a in syms.consts for a in args):
            value = fold_values(op, [syms.consts[a] for a in args])
            if value is not None:
                return syms.const(typ, value)
        if op in ("add", "sub") and typ == "int":
            a, b = args
            cb = syms.consts.get(b)
            if type(cb) is int:
                base, off = syms.lins.get(a, (a, 0))
                return syms.linear(base, off + cb if op == "add" else off - cb)
            ca = syms.consts.get(a)
            if op == "add" and type(ca) is int:
                base, off = syms.lins.get(b, (b, 0))
                return syms.linear(base, off + ca)
        if op in OPS and OPS[op].commutative:
            args = sorted(args)
        return syms.intern(("op", op, str(typ), tuple(args)))


class Exits:
    """Finds the exits of one candidate's guards.

    `items` is the replayed original line (before optimization); `func` the
    traced function; `live_in` its variables live at each block; `known` the
    constants the optimizer assumed; `types` the function's variable types."""

    def __init__(self, items, func, live_in, known, types, implied=()):
        self.items = items
        # Guards the optimizer dropped as implied by earlier ones (or always true).
        self.implied = set(implied)
        self.guard_origins = [i for i, it in enumerate(items) if it.instr.get("op") == "guard"]
        self.instrs = func.get("instrs", [])
        self.live_in = live_in
        self.types = types
        self.syms = Symbols()
        self.known = known
        self.seed = ()
        self._snapshots = {}

    def start(self, seed=()):
        """A fresh symbolic state at the loop header, for an emitted line.
        `seed`: items that ran before every pass of that line (a loop part's
        invariants, computed by the first pass and assigned nowhere else in
        the trace): they hold at the header for the original line too."""
        self.seed = tuple(seed)
        st = SymbolicState(self.syms, self.known)
        self._run_seed(st)
        return st

    def _run_seed(self, st):
        for it in self.seed:
            if it.instr.get("op") == "guard":
                st.passed(it)
            else:
                st.run(it.instr)

    def _snapshot(self, origin):
        key = tuple(id(it) for it in self.seed)
        snaps = self._snapshots.get(key)
        if snaps is None:
            snaps = self._snapshots[key] = {}
            st = SymbolicState(self.syms, self.known)
            self._run_seed(st)
            for i, it in enumerate(self.items):
                if it.instr.get("op") == "guard":
                    snaps[i] = st.copy()
                else:
                    st.run(it.instr)
        return snaps.get(origin)

    def target(self, item):
        """The label the original branch of a guard goes to when the guard fails."""
        if item.origin < 0:
            return None
        src = self.items[item.origin]       # the guard as replayed, at its branch
        if src.frame != 0:
            return None
        g = src.instr
        br = self.instrs[src.site] if 0 <= src.site < len(self.instrs) else None
        if br is None or br.get("op") != "br" or br["labels"][0] == br["labels"][1]:
            return None
        return br["labels"][0 if g.get("negate") else 1]

    def find(self, item, state):
        """(target label, [(var, type, source)]) if the guard `item`, reached with
        the emitted line's `state`, can exit to the original code; else None."""
        target = self.target(item)
        if target is None or target not in self.live_in:
            return None
        orig = self._snapshot(item.origin)
        if orig is None or orig.chain != state.chain:
            return None
        for g in self.guard_origins:
            if g >= item.origin:
                break
            if g not in state.checked and g not in self.implied:
                return None
        holders = None
        copies = []
        for v in sorted(self.live_in[target]):
            want = orig.get(v)
            if state.get(v) == want:
                continue
            if holders is None:
                holders = {}
                for u, x in state.val.items():
                    holders.setdefault(x, u)
            src = holders.get(want)
            if src is None:
                u = self.syms.inputs.get(want)
                if u is not None and state.get(u) == want:
                    src = u
            if src is None or v not in self.types:
                return None
            copies.append((v, self.types[v], src))
        targets = {c[0] for c in copies}
        if any(c[2] in targets for c in copies):
            return None             # a source overwritten by another copy
        return target, copies


def variable_types(func):
    """Declared type of each variable of a function (arguments and destinations)."""
    types = {a["name"]: a["type"] for a in func.get("args") or []}
    for ins in func.get("instrs", []):
        if "dest" in ins and "type" in ins:
            types.setdefault(ins["dest"], ins["type"])
    return types
