"""Loops and the layout of a function's blocks, without its type analysis: what the
generated code (`bril.interpreter.codegen`) lays out (each loop's blocks contiguous,
its header first, nested at most MAX_LOOP_DEPTH deep), what the cold tier asks of a
function's loops before any code exists (`CompiledProgram.loop_blocks`), and what
the JIT's region selection reads (`FunctionShape`: a run whose generated code came
from the code cache never analyses the function's types to ask for native code).
"""

from .blocks import IndexedBlock, block_graph, build_blocks
from .cfg import natural_loops

# Deepest loop nesting given its own `while` (CPython allows 20 nested blocks;
# loops deeper than this are dispatched by their enclosing loop instead).
MAX_LOOP_DEPTH = 12


class LayoutLoop:
    __slots__ = ("header", "body", "parent", "children", "depth", "lo", "hi", "items")

    def __init__(self, header, body):
        self.header = header        # block index
        self.body = body            # set of block indices
        self.parent = None
        self.children = []
        self.depth = 0
        self.lo = self.hi = None    # layout id range
        self.items = []             # Blocks and Loops in layout order


def find_loops(blocks, graph):
    """Natural loops of the blocks (`bril.analysis.cfg`), innermost first, nested at most
    MAX_LOOP_DEPTH deep; each block's `loop` is set to its innermost kept loop."""
    found = natural_loops(graph)
    loops = [LayoutLoop(l.header, l.body) for l in found]
    by_header = {l.header: l for l in loops}
    for l, n in zip(loops, found):
        l.parent = by_header.get(n.parent)
    # Depth; loops nested too deeply are dissolved into their (shallower) parents.
    for l in sorted(loops, key=lambda l: -len(l.body)):
        l.depth = l.parent.depth + 1 if l.parent else 1
    kept = [l for l in loops if l.depth <= MAX_LOOP_DEPTH]
    for l in kept:
        if l.parent is not None:
            l.parent.children.append(l)
    # innermost kept loop of each block
    for l in sorted(kept, key=lambda l: -len(l.body)):
        for bi in l.body:
            blocks[bi].loop = l
    return kept


def layout(blocks):
    """Order reachable blocks (loops contiguous, header first); set `lid`; return
    (ordered blocks, root items, loops)."""
    graph = block_graph(blocks)
    rpo = graph.reverse_postorder()
    pos = {b: i for i, b in enumerate(rpo)}
    loops = find_loops(blocks, graph)
    root = LayoutLoop(None, set(rpo))
    units = {id(root): []}
    for l in loops:
        units[id(l)] = []
    for bi in rpo:
        l = blocks[bi].loop
        units[id(l) if l else id(root)].append((pos[bi], blocks[bi]))
    for l in loops:
        parent = l.parent or root
        units[id(parent)].append((pos[l.header], l))
    order = []

    def place(region):
        items = sorted(units[id(region)], key=lambda t: (t[0], isinstance(t[1], IndexedBlock)))
        region.items = [it for _, it in items]
        lo = len(order)
        for it in region.items:
            if isinstance(it, IndexedBlock):
                it.lid = len(order)
                order.append(it)
            else:
                place(it)
        region.lo, region.hi = lo, len(order) - 1

    place(root)
    return order, root, loops


class FunctionShape:
    """A function's blocks (`blocks_by_index`, source order) and their layout:
    `blocks` (layout order, each with its `lid`), `root` and `loops` (`layout`).
    `bril.interpreter.codegen.FunctionCode` is built on the one its program keeps
    (`CompiledProgram.function_shape`), so the indices and layout ids agree."""

    __slots__ = ("blocks_by_index", "blocks", "root", "loops")

    def __init__(self, func):
        self.blocks_by_index = build_blocks(func)
        self.blocks, self.root, self.loops = layout(self.blocks_by_index)
