"""Strength reduction: cheaper ops for multiplications and divisions by constants.

An example pass (see README, "Writing a pass") over `bril.analysis.cfg`'s basic blocks:
within a block, it knows which variables hold int constants and rewrites

    mul x 0 -> const 0      mul x 1 -> id x      mul x 2 -> add x x
    div x 1 -> id x         (and the same with the constant first, for mul)

    bril2json < prog.bril | bril-opt --load examples/strength.py strength | brili
"""

import copy

from bril.analysis.cfg import CFG


def reduce_instr(instr, consts):
    """The cheaper form of one instruction, given the block's known constants."""
    op, args = instr.get("op"), instr.get("args") or []
    if op not in ("mul", "div") or len(args) != 2 or instr.get("type") != "int":
        return instr
    a, b = args
    k = consts.get(b)
    if op == "mul" and k is None and a in consts:
        a, b, k = b, a, consts[a]               # mul is commutative
    out = {key: v for key, v in instr.items() if key not in ("op", "args")}
    if op == "mul" and k == 0:
        return dict(out, op="const", value=0)
    if k == 1:
        return dict(out, op="id", args=[a])
    if op == "mul" and k == 2:
        return dict(out, op="add", args=[a, a])
    return instr


def strength(prog):
    """Replace multiplications and divisions by small constants with cheaper ops."""
    prog = copy.deepcopy(prog)          # a pass never changes its input
    for func in prog["functions"]:
        cfg = CFG.from_function(func)
        for block in cfg.blocks.values():
            consts = {}                 # variable -> int constant, in this block so far
            for i, instr in enumerate(block.instrs):
                instr = block.instrs[i] = reduce_instr(instr, consts)
                dest = instr.get("dest")
                if instr.get("op") == "const" and instr.get("type") == "int":
                    consts[dest] = instr["value"]
                elif dest is not None:
                    consts.pop(dest, None)
        func["instrs"] = cfg.to_instrs()
    return prog
