"""Basic blocks of a Bril function, as every engine tier runs them.

Blocks start at labels and after `jmp`/`br`/`ret`/`guard`; each knows its
successors by index in source order, and a label that cannot be resolved is
kept as the reference's error text (raised when, and only if, the jump runs).
The cold tier (`bril.interpreter.cold`), the generated code (`bril.interpreter.codegen`), the range
analysis (`bril.analysis.typecheck`) and the LLVM lowering share these blocks, so a
block index names the same block in all of them (on-stack replacement moves
an activation between tiers by it).
"""

from ..ir.ops import BLOCK_ENDERS  # noqa: F401 (also read from here)


class IndexedBlock:
    """A basic block.  `index` is its position in source order, `lid` its layout id."""

    __slots__ = ("index", "lid", "label", "instrs", "first_index", "targets", "succs",
                 "abort_succ", "falls_off", "size", "loop")

    def __init__(self, index, label, first_index):
        self.index = index
        self.lid = None
        self.label = label
        self.instrs = []
        self.first_index = first_index
        self.targets = []       # per terminator label: block index or an error message
        self.succs = []         # successor block indices (normal edges)
        self.abort_succ = None  # guard's abort target block index
        self.falls_off = False  # control can leave the function at the end
        self.size = 0
        self.loop = None        # innermost LayoutLoop (bril.analysis.layout) holding the block

    def all_succs(self):
        """Successor indices, the guard's abort target included (once each)."""
        succs = dict.fromkeys(self.succs)           # (`br c .a .a` lists .a twice)
        if self.abort_succ is not None:
            succs[self.abort_succ] = None
        return list(succs)

    @property
    def term(self):
        if self.instrs and self.instrs[-1]["op"] in BLOCK_ENDERS:
            return self.instrs[-1]
        return None


def _label_target(instr, i, label_index):
    """The block index the i-th label of instr names, or an error message (reference order)."""
    labels = instr.get("labels")
    if not labels:
        if labels is None:
            return f"missing labels; expected at least {i + 1}"
        return f"expecting {i + 1} labels; found {len(labels)}"
    if len(labels) <= i:
        return f"expecting {i + 1} labels; found {len(labels)}"
    t = label_index.get(labels[i])
    return t if t is not None else f"label {labels[i]} not found"


def build_blocks(func):
    instrs = func.get("instrs") or []
    blocks = []
    body = None                 # the current block's instruction list
    ended = True                # no current block, or it ends with a terminator
    for idx, ins in enumerate(instrs):
        if type(ins) is not dict:
            continue
        op = ins.get("op")
        if "label" in ins:
            cur = IndexedBlock(len(blocks), ins["label"], idx)
            blocks.append(cur)
            body, ended = cur.instrs, False
            if op is None and "op" not in ins:
                continue
        elif op is None and "op" not in ins:
            continue
        if ended:
            cur = IndexedBlock(len(blocks), None, idx)
            blocks.append(cur)
            body = cur.instrs
        body.append(ins)
        ended = op in BLOCK_ENDERS
    if not blocks:
        blocks.append(IndexedBlock(0, None, 0))
    label_index = {}
    for b in blocks:
        if b.label is not None and b.label not in label_index:
            label_index[b.label] = b.index
        b.size = len(b.instrs)
    for b in blocks:
        nxt = b.index + 1 if b.index + 1 < len(blocks) else None
        term = b.term
        op = term["op"] if term else None
        if op == "jmp":
            b.targets = [_label_target(term, 0, label_index)]
        elif op == "br":
            b.targets = [_label_target(term, 0, label_index),
                         _label_target(term, 1, label_index)]
        elif op == "guard":
            b.targets = [_label_target(term, 0, label_index)]
            if isinstance(b.targets[0], int):
                b.abort_succ = b.targets[0]
        if op in ("jmp", "br"):
            b.succs = [t for t in dict.fromkeys(b.targets) if isinstance(t, int)]
        elif op != "ret":
            if nxt is None:
                b.falls_off = True
            else:
                b.succs = [nxt]
    return blocks




def block_graph(blocks):
    """The `bril.analysis.cfg.Graph` of indexed blocks (abort edges included), entry 0."""
    from .cfg import Graph
    return Graph.of_succs([b.all_succs() for b in blocks])
