"""Dead-store elimination: drop assignments nobody reads (global liveness).

An example pass (see README, "Writing a pass"): a function from a program to a
program, built on `bril.analysis.cfg` (basic blocks) and `bril.analysis.dataflow` (liveness).

    bril2json < prog.bril | bril-opt --load examples/dead_stores.py dead_stores | brili
"""

import copy

from bril.analysis.cfg import CFG
from bril.analysis.dataflow import live_after_each, liveness
from bril.ir.ops import OPS


def removable(instr):
    """An assignment with no other effect: pure, and it cannot fail."""
    op = OPS.get(instr.get("op"))
    return (op is not None and op.pure and not op.may_trap
            and instr.get("dest") is not None)


def dead_stores_function(func):
    """One function's instructions without its dead stores (until none is left)."""
    cfg = CFG.from_function(func)
    changed = True
    while changed:
        changed = False
        _, live_out = liveness(cfg)
        for name, block in cfg.blocks.items():
            live = live_after_each(block, live_out[name])
            kept = [instr for instr, after in zip(block.instrs, live)
                    if not (removable(instr) and instr["dest"] not in after)]
            if len(kept) != len(block.instrs):
                block.instrs = kept
                changed = True
    return cfg.to_instrs()


def dead_stores(prog):
    """Remove assignments whose value is never read (dead stores)."""
    prog = copy.deepcopy(prog)          # a pass never changes its input
    for func in prog["functions"]:
        func["instrs"] = dead_stores_function(func)
    return prog
