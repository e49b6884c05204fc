"""Loop-invariant code motion.

For each natural loop (innermost first) an instruction `d = op args` moves to
the loop's preheader when:
- it cannot fail (`safety.cannot_fail`, with its operands assigned on every path
  to the preheader), so computing it earlier is invisible;
- its operands are not assigned inside the loop (or only by instructions that
  were hoisted already);
- `d` has no other assignment in the loop and is not live at the loop header
  (no use in the loop sees an older value);
- its block dominates every block that leaves the loop (by an edge out or a
  `ret`): it runs at least once per entry into the loop, so the number of
  executed instructions never goes up, and `d` has its value when the loop ends.

The preheader is the loop's single outside predecessor when that block leads
only to the header; otherwise a new block placed just before the header.  A
loop whose header is entered by a fall-through from inside the loop gets no new
block (it would need an extra jump per iteration).  Functions with irreducible
control flow, `phi` or speculation are left alone.
"""

from bril.analysis.cfg import CFG, Block, LoopForest, natural_loops, is_reducible, fresh_name
from bril.analysis.dataflow import liveness, defined_vars, uses
from bril.analysis.dominance import Dominance
from .safety import map_functions, SPEC_OPS, FunctionFacts


def _preheader(cfg, loop):
    """The name of a block that runs just before entering the loop (made if needed),
    or None if the loop gets none."""
    header = loop.header
    outside = [p for p in cfg.preds[header] if p not in loop.body]
    if len(outside) == 1 and cfg.succs[outside[0]] == [header] and header != cfg.entry:
        return outside[0]
    order = list(cfg.blocks)
    i = order.index(header)
    if i > 0:
        before = cfg.blocks[order[i - 1]]
        if before.name in loop.body and before.terminator is None and before.fall == header:
            return None
    name = fresh_name(header + ".preheader", set(cfg.blocks))
    cfg.add_block(Block(name, [], None, header), before=header)
    for p in outside:
        cfg.retarget(p, header, name)
    if header == cfg.entry:
        cfg.entry = name
    return name


def _hoistable_blocks(cfg, loop, dom):
    """The loop's blocks that run on every pass from its header to any way out
    (an edge out or a `ret`); none for a loop that never ends."""
    leaving = [b for b in loop.body
               if cfg.blocks[b].returns or any(s not in loop.body for s in cfg.succs[b])]
    if not leaving:
        return []
    return [b for b in loop.body if all(dom.dominates(b, x) for x in leaving)]


def _hoist(cfg, loop, ph, blocks, facts, live_in, def_out, rpo_index):
    """Move invariant instructions of `blocks` (in one loop) to the end of `ph`."""
    defined = set(def_out[ph])
    term = cfg.blocks[ph].terminator
    read_at_end = set(uses(term)) if term is not None else set()   # must not change
    assigned = {}
    for b in loop.body:
        for instr in cfg.blocks[b].instrs:
            if "dest" in instr:
                assigned[instr["dest"]] = assigned.get(instr["dest"], 0) + 1
    order = sorted(blocks, key=rpo_index.__getitem__)
    moved = []
    progress = True
    while progress:
        progress = False
        for name in order:
            block = cfg.blocks[name]
            keep = []
            for instr in block.instrs:
                d = instr.get("dest")
                if (d is not None and assigned.get(d) == 1 and d not in live_in[loop.header]
                        and d not in read_at_end
                        and all(assigned.get(a, 0) == 0 for a in instr.get("args", ()))
                        and instr.get("op") not in ("get", "set")
                        and facts.cannot_fail(instr, defined)):
                    moved.append(instr)
                    assigned[d] = 0
                    defined.add(d)
                    progress = True
                else:
                    keep.append(instr)
            block.instrs = keep
    if moved:
        pre = cfg.blocks[ph]
        term = pre.terminator
        pre.instrs = (pre.body + moved + [term]) if term is not None else pre.instrs + moved
    return bool(moved)


def licm_cfg(cfg, func):
    """Hoist invariant code out of every loop, innermost loops first.

    Each round takes the innermost loops not yet done (they are disjoint), gives
    them preheaders, computes the analyses once and hoists in all of them:
    hoisting in one loop changes no fact the others rely on."""
    done = set()
    args = [a["name"] for a in func.get("args", ())]
    stale = True
    analyses = None         # (facts, live_in, def_out, rpo_index) while nothing changed
    while True:
        if stale:
            # The loops and dominators change only when a round adds a block or
            # moves an instruction; rounds that do neither reuse them (a nest of
            # n loops takes n rounds: recomputing each time was quadratic).
            dom = Dominance(cfg)
            if not is_reducible(cfg, dom):
                return cfg
            nest = LoopForest(cfg)
            all_loops = natural_loops(cfg, dom, forest=nest)
            stale = False
        loops = [l for l in all_loops if l.header not in done]
        if not loops:
            return cfg
        # Innermost remaining loops: no remaining loop nested in them.
        outer = {nest.parent.get(l.header) for l in loops}
        innermost = [l for l in loops if l.header not in outer]
        plans = []
        for loop in innermost:
            done.add(loop.header)
            blocks = _hoistable_blocks(cfg, loop, dom)
            if blocks:
                n_blocks = len(cfg.blocks)
                ph = _preheader(cfg, loop)
                if len(cfg.blocks) != n_blocks:
                    stale = True
                    analyses = None
                if ph is not None:
                    plans.append((loop, ph, blocks))
        if not plans:
            continue
        if stale or analyses is None:
            instrs = [i for b in cfg.blocks.values() for i in b.instrs]
            facts = FunctionFacts({"args": func.get("args", []), "instrs": instrs}, cfg)
            live_in, _ = liveness(cfg)
            _, def_out = defined_vars(cfg, args)
            rpo_index = {n: i for i, n in enumerate(cfg.reverse_postorder())}
            analyses = (facts, live_in, def_out, rpo_index)
        facts, live_in, def_out, rpo_index = analyses
        for loop, ph, blocks in plans:
            if _hoist(cfg, loop, ph, blocks, facts, live_in, def_out, rpo_index):
                stale = True
        if stale:
            analyses = None


def licm_instrs(func):
    return licm_cfg(CFG.from_function(func), func).to_instrs()


def licm(prog):
    """Pass: loop-invariant code motion."""
    return map_functions(prog, licm_instrs, avoid=SPEC_OPS | {"phi"})
