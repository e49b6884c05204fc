"""Replaying a recorded block path into one straight line of Bril instructions.

A trace is described by the blocks taken from a loop header back to it: Bril
calls are static, so the block path (with the callee blocks nested at each
call) says everything.  Replaying it over the original code gives a straight
line: `jmp`s vanish, each `br` becomes a `guard` on the direction taken, and
calls to small functions are inlined with renamed variables (`ret v` becomes
an `id`).  Several iterations can be concatenated (unrolling).

Events are (function name, block name) pairs, block names as `bril.analysis.cfg.CFG`
gives them.  Every `Item` remembers its *site*: the index, in the traced
function's instruction list, of the frame-0 instruction it came from (for an
inlined callee, the call), so later stages know where the original code can
resume.
"""

from ..ir.record import Record

from ..ir import ops
from ..analysis.cfg import CFG


# Calls nested deeper than this on a recorded path make it untraceable (the
# replay recurses once per frame: bounded by this, never by the program).
MAX_REPLAY_DEPTH = 64

class NotTraceable(Exception):
    """The path cannot become a trace (it returns from the traced function, ...)."""


# Ops that touch the heap or the outside world: a rollback cannot take them back.
EFFECT_OPS = ops.EFFECT_OPS
# Ops whose meaning depends on control-flow history or speculation state (an
# ssa2 `undef` does not: it only makes a variable undefined).
FORBIDDEN_OPS = ops.STATEFUL_OPS - {"undef"}


class Item(Record):
    """One instruction of the straight-line trace, with where it came from."""
    # instr: dict
    # site: int  # index in the traced function's instrs of the frame-0 instruction
    # frame: int  # 0: the traced function; >0: an inlined callee (nesting depth)
    # barrier: bool = False  # a call left as a call: separates speculative regions
    # origin: int = -1  # a guard: its index in the replayed line (side exits look it up)
    # covers: tuple = ()  # a guard: origins of the original guards it implies
    fields = ('instr', 'site', 'frame', 'barrier', 'origin', 'covers')
    defaults = {'barrier': False, 'origin': -1, 'covers': ()}


class Line(Record):
    # items: list
    # cut_site: int | None  # trace ends early: resume the original at this frame-0 index
    # orig_instrs: int  # dynamic instructions of the original that the line replaces
    # orig_before: dict  # frame-0 site -> original instructions replayed before it (first visit)
    # blocks: int
    # inlined: int
    # branch_origin: dict  # index in the events of a branch's target -> its guard's origin
    # orig_at: dict  # guard origin -> original instructions replayed up to its branch
    fields = ('items', 'cut_site', 'orig_instrs', 'orig_before', 'blocks', 'inlined',
              'branch_origin', 'orig_at')


class FunctionInfo:
    """A function's CFG plus the index of each of its instructions."""

    def __init__(self, func):
        self.func = func
        self.cfg = CFG.from_function(func)
        self.index = {id(ins): i for i, ins in enumerate(func.get("instrs", []))}


def is_plain(func):
    """No ops whose meaning depends on speculation state or control history."""
    return not any(i.get("op") in FORBIDDEN_OPS for i in func.get("instrs", []))


class Replayer:
    def __init__(self, funcs, infos, max_depth=4, max_callee_instrs=300, max_len=4000):
        self.funcs = funcs          # name -> function
        self.infos = infos          # name -> FunctionInfo (shared cache)
        self.max_depth = max_depth
        self.max_callee_instrs = max_callee_instrs
        self.max_len = max_len
        self.fresh = 0
        self.stack = []             # ids of the call instructions being inlined
        self.prefixes = {}          # call chain -> renaming prefix

    def info(self, name):
        inf = self.infos.get(name)
        if inf is None:
            inf = self.infos[name] = FunctionInfo(self.funcs[name])
        return inf

    def inlinable(self, name, depth):
        f = self.funcs.get(name)
        return (f is not None and depth < self.max_depth
                and len(f.get("instrs", [])) <= self.max_callee_instrs and is_plain(f))

    def replay(self, fname, events):
        """Replay `events` into a `Line`.  They start at a loop header of `fname`
        and cover whole iterations: the last event is the header again."""
        self.used = _variables(self.funcs[fname])
        self.out, self.orig, self.nblocks, self.inlined = [], 0, 0, 0
        self.orig_before = {}
        self.branch_origin = {}
        self.orig_at = {}
        self.events, self.pos = list(events), 1
        first = self.events[0] if self.events else None
        if first is None or first[0] != fname:
            raise NotTraceable("path does not start in the traced function")
        cut = None
        try:
            self._run(fname, first[1], None, "", 0, None, emit=True)
        except _Cut as c:
            cut = c.site
            del self.out[c.mark:]
        return Line(self.out, cut, self.orig, self.orig_before, self.nblocks, self.inlined,
                    self.branch_origin, self.orig_at)

    # --- replay ------------------------------------------------------------------------

    def _next(self):
        if self.pos >= len(self.events):
            return None
        self.pos += 1
        return self.events[self.pos - 1]

    def _run(self, fname, bname, ren, pref, depth, site, emit):
        """Follow blocks of `fname` from `bname`.  Returns None when the path ends
        (frame 0) or ('ret', value name or None) when a callee returns."""
        info = self.info(fname)
        blocks = info.cfg.blocks

        def rn(v):
            if ren is None:
                return v
            r = ren.get(v)
            if r is None:
                r = ren[v] = pref + v
            return r

        while True:
            if depth == 0 and self.pos >= len(self.events):
                return None         # the path's last event: back at the header
            blk = blocks[bname]
            if emit:
                self.nblocks += 1
            nxt = None
            for ins in blk.instrs:
                s = info.index[id(ins)] if depth == 0 else site
                op = ins["op"]
                if emit:
                    if depth == 0:
                        self.orig_before.setdefault(s, self.orig)
                    self.orig += 1
                if op in FORBIDDEN_OPS:
                    raise NotTraceable(f"`{op}` on the path")
                if op in ("jmp", "br"):
                    ev = self._next()
                    if ev is None:
                        return None
                    if ev[0] != fname or ev[1] not in ins["labels"]:
                        raise NotTraceable("path does not follow the jump")
                    nxt = ev[1]
                    labels = ins["labels"]
                    if emit and op == "br" and labels[0] != labels[1]:
                        g = {"op": "guard", "args": [rn(ins["args"][0])]}
                        self.branch_origin[self.pos - 1] = len(self.out)
                        self.orig_at[len(self.out)] = self.orig
                        self.out.append(Item(g, s, depth, origin=len(self.out)))
                        if nxt == labels[1]:
                            g["negate"] = True          # resolved by the optimizer
                    break
                if op == "ret":
                    if depth == 0:
                        raise NotTraceable("the path returns from the traced function")
                    args = ins.get("args") or []
                    return ("ret", rn(args[0]) if args else None)
                if op == "call":
                    self._call(ins, rn, depth, s, emit)
                    continue
                if emit:
                    new = dict(ins)
                    if "args" in ins:
                        new["args"] = [rn(a) for a in ins["args"]]
                    if "dest" in ins:
                        new["dest"] = rn(ins["dest"])
                    self.out.append(Item(new, s, depth))
                    if len(self.out) > self.max_len:
                        raise NotTraceable("trace too long")
            else:
                if blk.fall is None:
                    if depth == 0:
                        raise NotTraceable("the path falls off the traced function")
                    return ("ret", None)
                ev = self._next()
                if ev is None:
                    return None
                if ev != (fname, blk.fall):
                    raise NotTraceable("path does not follow the fall-through")
                nxt = blk.fall
            bname = nxt

    def _call(self, ins, rn, depth, site, emit):
        if depth + 1 > MAX_REPLAY_DEPTH:
            # Replaying follows calls by recursion; a path through calls nested
            # this deep is no trace worth making, and must not exhaust the stack.
            raise NotTraceable("calls nest too deep on the path")
        callee = ins["funcs"][0]
        ev = self._next()
        if ev is None:
            raise NotTraceable("path ends in a call")
        if callee not in self.funcs or ev != (callee, self.info(callee).cfg.entry):
            raise NotTraceable("path does not enter the callee")
        if emit and self.inlinable(callee, depth):
            self._inline(ins, callee, rn, depth, site)
        elif emit and depth == 0:
            # Left as a real call (calls are not allowed while speculating):
            # a barrier between speculative regions.
            self.out.append(Item(dict(ins), site, 0, barrier=True))
            self._run(callee, ev[1], {}, "", depth + 1, site, emit=False)
        elif emit:
            # A call we cannot inline inside an inlined callee: the trace must
            # end before the frame-0 call that led here.
            raise _Cut(site, self._mark(site))
        else:
            self._run(callee, ev[1], {}, "", depth + 1, site, emit=False)

    def _mark(self, site):
        """Index in `out` where the items of the frame-0 instruction at `site` begin."""
        i = len(self.out)
        while i > 0 and self.out[i - 1].site == site and self.out[i - 1].frame > 0:
            i -= 1
        return i

    def _inline(self, call, callee, rn, depth, site):
        f = self.funcs[callee]
        ren = {}
        self.stack.append(id(call))
        pref = self._prefix(callee)
        for p, a in zip(f.get("args") or [], call.get("args") or []):
            ren[p["name"]] = pref + p["name"]
            self.out.append(Item({"op": "id", "dest": pref + p["name"], "type": p["type"],
                                  "args": [rn(a)]}, site, depth + 1))
        self.inlined += 1
        res = self._run(callee, self.info(callee).cfg.entry, ren, pref, depth + 1, site, emit=True)
        self.stack.pop()
        if res is None:
            raise NotTraceable("path ends in a callee")
        val = res[1]
        if "dest" in call:
            if val is None:
                raise NotTraceable("callee returned no value")
            self.out.append(Item({"op": "id", "dest": rn(call["dest"]), "type": call["type"],
                                  "args": [val]}, site, depth))

    def _prefix(self, fname):
        """The renaming prefix of an inlined frame.  It depends only on the chain
        of call instructions that led to it, so unrolled iterations reuse the
        same names (one copy's variables are dead when the next copy starts):
        fewer variables for the speculation snapshots."""
        key = tuple(self.stack)
        p = self.prefixes.get(key)
        if p is not None:
            return p
        while True:
            self.fresh += 1
            p = f"_t{self.fresh}.{fname}."
            if not any(v.startswith(p) for v in self.used):
                self.prefixes[key] = p
                return p


class _Cut(Exception):
    def __init__(self, site, mark):
        super().__init__(site)
        self.site = site
        self.mark = mark


def _variables(func):
    names = {a["name"] for a in func.get("args") or []}
    for ins in func.get("instrs", []):
        if "dest" in ins:
            names.add(ins["dest"])
        names.update(ins.get("args") or [])
    return names
