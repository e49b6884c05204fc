"""Global constant propagation with branch folding (sparse conditional constant
propagation, Wegman and Zadeck).

The analysis maps each variable to a constant where every path reaching that
point assigns it that constant.  Only edges that can run are followed: a `br`
on a known condition sends control down the taken edge alone, so constants
that meet only on dead paths stay constants.  At the function's start nothing
is constant, so a variable that some path leaves unassigned is never treated
as a constant.

The facts are sparse: each assignment (and each merge of a variable where
control paths join and it is live, placed as in SSA construction at iterated
dominance frontiers) holds one value, and a change is sent to the instructions that read
it.  A dense analysis carrying every variable's fact through every block costs
blocks x variables; on a nest of a thousand loops that was most of `-O`.

Rewrites: an op (or copy) whose result is known becomes `const` (when its
declared type can hold the value in JSON); a `br` on a known condition becomes
a `jmp`.  Blocks that become unreachable are left for `cfgclean`.
"""

from bril.ir import ops
from bril.analysis.cfg import CFG
from bril.analysis.dataflow import liveness_bits
from bril.analysis.dominance import immediate_dominators, dominance_frontier, dominator_tree
from .safety import map_functions
from bril.analysis.folding import const_of, fold, as_const_instr

# The lattice of a value: None (no run reaches it yet), a Const, or VARIES.
VARIES = "varies"
UNSET = 0                   # the value of a variable before any assignment


def _meet(a, b):
    if a is None or a is b:
        return b
    if b is None:
        return a
    if a is VARIES or b is VARIES or a != b:
        return VARIES
    return a


class _Function:
    """One function in sparse form.  Every assignment and every merge of a
    variable gets a value id; for each reachable block, `merges` lists the
    merges at its start ([(value id, {predecessor: value id})]) and `code` its
    instructions with the value ids they read and the one they write;
    `users()` says where each value is read."""

    def __init__(self, cfg):
        self.cfg = cfg
        idom = immediate_dominators(cfg)
        frontier = dominance_frontier(cfg, idom)
        merged = {n: [] for n in idom}      # block -> variables merged at its start
        if any(frontier.values()):
            self._place_merges(cfg, idom, frontier, merged)
        self.nvalues = 1                    # id 0 is UNSET
        self.merges = {}
        for n, vs in merged.items():
            self.merges[n] = [(self.nvalues + k, {}) for k in range(len(vs))]
            self.nvalues += len(vs)
        self.code = {}
        self._rename(dominator_tree(cfg, idom), merged)

    def users(self):
        """{value id: where it is read}: (block, index), or (block, -1-k) for
        the block's k-th merge.  Built only once a value changes after its first
        evaluation (a merge that varies): straight-line code never needs it."""
        users = {}
        for n, code in self.code.items():
            for i, (_, reads, _) in enumerate(code):
                for vid in reads:
                    users.setdefault(vid, []).append((n, i))
        for n, merges in self.merges.items():
            for k, (_, incoming) in enumerate(merges):
                for vid in incoming.values():
                    users.setdefault(vid, []).append((n, -1 - k))
        return users

    @staticmethod
    def _place_merges(cfg, idom, frontier, merged):
        # Merges only where the variable is live (pruned SSA): a nest of n loops
        # would otherwise merge each inner counter at every outer header.
        sites = {}
        for n in idom:
            for instr in cfg.blocks[n].instrs:
                d = instr.get("dest")
                if d is not None:
                    sites.setdefault(d, {})[n] = None
        index, live_in, _ = liveness_bits(cfg)
        for v, where in sites.items():
            bit = index.bit.get(v)
            if bit is None:
                continue                    # never read
            work, placed = list(where), set()
            while work:
                for f in frontier[work.pop()]:
                    if f not in placed and live_in[f] >> bit & 1:
                        placed.add(f)
                        merged[f].append(v)
                        work.append(f)

    def _rename(self, tree, merged):
        """Resolve every read to the value id that reaches it, walking the
        dominator tree (iteratively) with a stack of ids per variable."""
        cfg, merges = self.cfg, self.merges
        stacks, pushed = {}, {}
        nvalues = self.nvalues
        todo = [(cfg.entry, False)]
        while todo:
            n, leaving = todo.pop()
            if leaving:
                for v in pushed.pop(n):
                    stacks[v].pop()
                continue
            mine = list(merged[n])
            for v, (vid, _) in zip(mine, merges[n]):
                stacks.setdefault(v, []).append(vid)
            code = []
            for instr in cfg.blocks[n].instrs:
                reads = [stacks[a][-1] if stacks.get(a) else UNSET
                         for a in instr.get("args", ())]
                d = instr.get("dest")
                wid = None
                if d is not None:
                    wid = nvalues
                    nvalues += 1
                    if d in stacks:
                        stacks[d].append(wid)
                    else:
                        stacks[d] = [wid]
                    mine.append(d)
                code.append((instr, reads, wid))
            self.code[n] = code
            for s in cfg.succs[n]:
                for k, v in enumerate(merged.get(s, ())):
                    st = stacks.get(v)
                    vid = st[-1] if st else UNSET
                    merges[s][k][1][n] = vid
            pushed[n] = mine
            todo.append((n, True))
            todo.extend((c, False) for c in reversed(tree[n]))
        self.nvalues = nvalues


def _evaluate(instr, vals):
    """The value an instruction assigns, given the values it reads."""
    op = instr["op"]
    if op == "const":
        return const_of(instr) or VARIES
    if op == "id":
        return vals[0] if len(vals) == 1 else VARIES
    if op in ops.FOLDABLE:
        unknown = False
        for v in vals:
            if v is VARIES:
                return VARIES
            if v is None:
                unknown = True
        return None if unknown else fold(op, vals) or VARIES
    return VARIES


def _taken(instr, cond):
    """The only label a `br` can take, if its condition is a known boolean."""
    if (instr.get("op") == "br" and len(instr.get("args", ())) == 1
            and len(instr.get("labels", ())) == 2
            and cond is not None and cond is not VARIES and cond.type == "bool"):
        return instr["labels"][0 if cond.value else 1]
    return None


def analyze(cfg):
    """(function in sparse form, value of each id, reached blocks)."""
    fn = _Function(cfg)
    code, merges = fn.code, fn.merges
    users = None
    blocks, succs, entry = cfg.blocks, cfg.succs, cfg.entry
    val = [None] * fn.nvalues
    val[UNSET] = VARIES                     # unassigned: never a constant
    reached, edges = set(), set()
    flow, changed = [(None, entry)], []

    def lower(vid, new):
        old = val[vid]
        new = _meet(old, new)
        if new is not old:
            val[vid] = new
            changed.append(vid)

    def merge(n, k):
        vid, incoming = merges[n][k]
        v = VARIES if n == entry else None  # the start: nothing is assigned
        for p, pid in incoming.items():
            if (p, n) in edges:
                v = _meet(v, val[pid])
        lower(vid, v)

    def leave(n):
        """Send control on from reached block n (again, if its `br` changed)."""
        last = code[n][-1] if code[n] else None
        if last is not None and last[0].get("op") == "br" and len(last[1]) == 1:
            cond = val[last[1][0]]
            if cond is None:
                return                      # no run decided the condition yet
            taken = _taken(last[0], cond)
            targets = [taken] if taken is not None else succs[n]
        else:
            targets = succs[n]
        flow.extend((n, s) for s in targets if s in blocks)

    def run(n, i):
        instr, reads, wid = code[n][i]
        if wid is not None:
            lower(wid, _evaluate(instr, [val[r] for r in reads]))
        elif i == len(code[n]) - 1 and instr.get("op") == "br":
            leave(n)

    while flow or changed:
        while flow:
            edge = flow.pop()
            if edge in edges:
                continue
            edges.add(edge)
            n = edge[1]
            for k in range(len(merges[n])):
                merge(n, k)
            if n not in reached:
                reached.add(n)
                # The first visit: values read here come from blocks that
                # dominate it (reached before) or from this block, in order.
                for instr, reads, wid in code[n]:
                    if wid is not None:
                        val[wid] = _evaluate(instr, [val[r] for r in reads])
                leave(n)
        if changed and users is None:
            users = fn.users()
        while changed and not flow:
            for n, i in users.get(changed.pop(), ()):
                if n in reached:
                    if i < 0:
                        merge(n, -1 - i)
                    else:
                        run(n, i)
    return fn, val, reached


def constprop_cfg(cfg):
    fn, val, reached = analyze(cfg)
    for n in reached:
        new = []
        for instr, reads, wid in fn.code[n]:
            if wid is not None:
                c = val[wid]
                if instr["op"] != "const" and c is not None and c is not VARIES:
                    instr = as_const_instr(instr, c) or instr
            elif len(reads) == 1:
                taken = _taken(instr, val[reads[0]])
                if taken is not None:
                    instr = {k: v for k, v in instr.items() if k != "args"}
                    instr["op"], instr["labels"] = "jmp", [taken]
            new.append(instr)
        cfg.blocks[n].instrs = new
    cfg.recompute_edges()
    return cfg


def constprop_instrs(func):
    return constprop_cfg(CFG.from_function(func)).to_instrs()


def constprop(prog):
    """Pass: global constant propagation and folding, with branch folding."""
    return map_functions(prog, constprop_instrs)
