"""Every pass by name, with a one-line description, and the `-O` pipeline.

A pass is a function from a program (dict) to a new program (dict); it never
mutates its input.
"""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable
    description: str


def _passes():
    from . import tdce, lvn, constprop, cfgclean, licm, inline, ssa
    return [
        Pass("tdce", tdce.tdce, "dead-code elimination (global liveness; keeps anything that can fail)"),
        Pass("lvn", lvn.lvn, "local value numbering: CSE, copy propagation, constant folding"),
        Pass("constprop", constprop.constprop,
             "global constant propagation and folding; branches on constants become jumps"),
        Pass("inline", inline.inline, "inline small non-recursive functions"),
        Pass("to-ssa", ssa.to_ssa, "convert into SSA form (ssa2 set/get), pruned by liveness"),
        Pass("from-ssa", ssa.from_ssa, "convert ssa2 set/get back to ordinary copies, coalescing"),
        Pass("licm", licm.licm, "loop-invariant code motion into loop preheaders"),
        Pass("cfgclean", cfgclean.cfgclean,
             "unreachable blocks, jump threading, block merging, loop rotation, jump-saving layout"),
    ]


PASSES = {p.name: p for p in _passes()}

# The default optimization pipeline (`bril-opt -O`).  Callees are cleaned up
# before inlining (more of them then pass its cost test); loops are rotated by
# cfgclean before licm (so loop bodies run at least once per entry).
O_PIPELINE = ["lvn", "constprop", "tdce", "cfgclean",
              "inline", "lvn", "constprop", "tdce", "cfgclean",
              "licm", "lvn", "constprop", "tdce", "cfgclean"]


def unknown(names):
    """The names that are not passes."""
    return [n for n in names if n not in PASSES]


def run_pipeline(prog, names):
    for name in names:
        prog = PASSES[name].run(prog)
    return prog


def optimize(prog):
    """Run the `-O` pipeline."""
    return run_pipeline(prog, O_PIPELINE)
