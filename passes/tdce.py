"""Dead-code elimination.

Deletes an instruction when nothing can observe it: its result is not live
afterwards (global liveness) and it cannot fail at run time (see
`safety.cannot_fail`; divisions, loads, calls and ops on untrusted values stay).
Also deletes `nop`s and `set`s of shadow variables that no `get` in the
function reads.  Repeats until nothing changes.

`dce_instrs` works on one function's instruction list and is what other passes
(and the tracer, on straight-line code) reuse.
"""

from bril.analysis.cfg import CFG
from bril.analysis.dataflow import liveness_bits, dest, uses
from .safety import FunctionFacts, map_functions


def _sweep_block(block, out_bits, bit, facts, shadow_reads):
    """Remove dead instructions from one block, walking backwards; True if any went.

    out_bits: the variables live at the block's end, as bits (`bit`: name ->
    position); the walk keeps only what the block changes in two small sets."""
    defined = facts.defined_before(block)
    killed, added = set(), set()    # live = (live-out - killed) | added

    def live(v):
        if v in added:
            return True
        if v in killed:
            return False
        i = bit.get(v)
        return i is not None and (out_bits >> i) & 1 == 1

    kept = []
    for i in range(len(block.instrs) - 1, -1, -1):
        instr = block.instrs[i]
        op = instr.get("op")
        d = dest(instr)
        dead = (op == "nop" or d is not None and not live(d))
        if dead and facts.cannot_fail(instr, defined[i]):
            continue
        if (op == "set" and len(instr.get("args", ())) == 2
                and instr["args"][0] not in shadow_reads and instr["args"][1] in defined[i]):
            continue
        kept.append(instr)
        if d is not None:
            added.discard(d)
            killed.add(d)
        added.update(uses(instr))
    kept.reverse()
    changed = len(kept) != len(block.instrs)
    block.instrs = kept
    return changed


def dce_cfg(cfg, func):
    """Delete dead instructions from the blocks of `cfg` (func gives argument names)."""
    shadow_reads = {i["dest"] for b in cfg.blocks.values() for i in b.instrs
                    if i.get("op") == "get"}
    changed = True
    while changed:
        changed = False
        body = {"args": func.get("args", []),
                "instrs": [i for b in cfg.blocks.values() for i in b.instrs]}
        facts = FunctionFacts(body, cfg)
        index, _, live_out = liveness_bits(cfg)
        for name, block in cfg.blocks.items():
            if _sweep_block(block, live_out[name], index.bit, facts, shadow_reads):
                changed = True
    return cfg


def dce_instrs(func):
    """The function's instructions with dead code removed."""
    cfg = CFG.from_function(func)
    return dce_cfg(cfg, func).to_instrs()


def tdce(prog):
    """Pass: dead-code elimination on every function."""
    return map_functions(prog, dce_instrs)
