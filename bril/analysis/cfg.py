"""Basic blocks and control-flow graphs of Bril functions.

A `CFG` holds a function's basic blocks in layout order.  Its edges do not
depend on the layout: a block that does not end in `jmp`/`br`/`ret` records
the block it falls into (`Block.fall`, None for falling off the end of the
function), so passes may add, drop and reorder blocks freely; `to_instrs`
writes the jumps the final layout needs (and leaves out jumps to the next
block).

Also here: reachability, orders, back edges and natural loops.
"""

from ..ir.record import Record

# Instructions that end a basic block.  `guard` ends one too: it either
# falls through or leaves (aborting speculation) to its label.
JUMPS = {"jmp", "br", "ret"}
BLOCK_ENDERS = JUMPS | {"guard"}


def fresh_name(base, used):
    """A name `base.N` not in `used` (a set, which gets the new name added)."""
    n = 1
    while f"{base}.{n}" in used:
        n += 1
    name = f"{base}.{n}"
    used.add(name)
    return name


class NameSupply:
    """Fresh names `base.N` avoiding a set of taken names, in constant time per
    name however many are made from one base (the set gets every new name)."""

    def __init__(self, used):
        self.used = used
        self.next = {}

    def fresh(self, base):
        n = self.next.get(base, 1)
        while f"{base}.{n}" in self.used:
            n += 1
        self.next[base] = n + 1
        name = f"{base}.{n}"
        self.used.add(name)
        return name


def variable_names(func):
    """Every variable name a function mentions (arguments, destinations, operands)."""
    names = {a["name"] for a in func.get("args", ())}
    for instr in func.get("instrs", ()):
        if "dest" in instr:
            names.add(instr["dest"])
        names.update(instr.get("args", ()))
    return names


def label_names(instrs):
    """Every label defined or referred to in an instruction list."""
    names = set()
    for i in instrs:
        if "op" not in i:
            names.add(i["label"])
        else:
            names.update(i.get("labels", ()))
    return names


def instr_labels(instr):
    """The labels an instruction refers to (jump targets, guard targets, phi labels)."""
    return instr.get("labels", ()) if "op" in instr else ()


class Block(Record):
    # name: str
    # instrs: list  # body and terminator; no label
    # label: dict | None = None  # the original label instruction (kept with its fields)
    # fall: str | None = None  # block reached by falling off the end (no jmp/br/ret)
    fields = ('name', 'instrs', 'label', 'fall')
    defaults = {'label': None, 'fall': None}

    @property
    def terminator(self):
        """The last instruction if it is a jmp/br/ret/guard, else None."""
        if self.instrs and self.instrs[-1].get("op") in BLOCK_ENDERS:
            return self.instrs[-1]
        return None

    @property
    def body(self):
        """The instructions before the terminator."""
        return self.instrs[:-1] if self.terminator is not None else self.instrs

    def successors(self):
        term = self.terminator
        op = term["op"] if term else None
        if op in ("jmp", "br"):
            targets = list(term.get("labels", ()))
        elif op == "ret":
            targets = []
        else:
            targets = [self.fall] if self.fall is not None else []
            if op == "guard":
                targets += list(term.get("labels", ()))
        # A `br` with both labels equal has one successor.
        return list(dict.fromkeys(targets))

    @property
    def returns(self):
        """True if control can leave the function from this block."""
        term = self.terminator
        if term is not None and term["op"] == "ret":
            return True
        return self.fall is None and (term is None or term["op"] == "guard")


def form_blocks(instrs):
    """Split instructions into lists: each starts at a label or after a block ender.

    Labels stay in the lists (as their first element)."""
    blocks, cur = [], []
    for instr in instrs:
        if "op" not in instr:               # a label starts a new block
            if cur:
                blocks.append(cur)
            cur = [instr]
        else:
            cur.append(instr)
            if instr["op"] in BLOCK_ENDERS:
                blocks.append(cur)
                cur = []
    if cur:
        blocks.append(cur)
    return blocks


def named_blocks(instrs):
    """[(name, label instruction or None, body, index of the first instruction)] of
    the blocks of an instruction list, named as `CFG.from_instrs` names them:
    a block by its label (a later copy of a duplicate label gets a fresh name),
    an unlabeled one `_b.N`."""
    lists = form_blocks(instrs)
    supply = NameSupply({l[0]["label"] for l in lists if "op" not in l[0]})
    seen = set()
    out = []
    first = 0
    for lst in lists:
        if "op" not in lst[0]:
            name, label, body = lst[0]["label"], lst[0], lst[1:]
            if name in seen:        # duplicate label: later copies are unreachable
                name = supply.fresh(name)
                label = None
        else:
            name, label, body = supply.fresh("_b"), None, lst
        seen.add(name)
        out.append((name, label, body, first))
        first += len(lst)
    return out


def block_names(instrs):
    """{index of a block's first instruction (its label if any): its CFG name}, as
    `CFG.from_instrs` names the blocks, without building the graph (the trace
    recorder's block names, in every engine tier)."""
    out = {}
    for name, label, body, first in named_blocks(instrs):
        if label is None and "op" not in instrs[first]:
            # A duplicate label's copy: known by its first instruction, if any.
            if not body:
                continue
            first += 1
        out[first] = name
    return out


def block_sizes(func):
    """{CFG block name: its instructions} of a function (what a run counts for the
    block, labels not counted), as `block_names` names the blocks."""
    instrs = func.get("instrs") or []
    return {name: sum(1 for i in body if "op" in i)
            for name, label, body, first in named_blocks(instrs)}


class Graph:
    """Nodes and edges only: what orders, dominance (`bril.analysis.dominance`) and loops
    need.  `CFG` is one; the engines' indexed blocks (`bril.analysis.blocks`) make one
    with `Graph.of_succs`."""

    def __init__(self, entry, succs):
        self.entry = entry
        self.succs = succs              # node -> successor nodes
        self.preds = {n: [] for n in succs}
        for n, ss in succs.items():
            for s in ss:
                self.preds[s].append(n)

    @classmethod
    def of_succs(cls, succs):
        """The graph of nodes 0..n-1 with successor lists `succs`, entry 0."""
        return cls(0, dict(enumerate(succs)))

    def nodes(self):
        """Every node, in order (a CFG's: its layout)."""
        return list(self.succs)

    def reachable(self):
        seen, stack = {self.entry}, [self.entry]
        while stack:
            for s in self.succs[stack.pop()]:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    def postorder(self):
        """Reachable nodes in depth-first postorder from the entry."""
        seen, order = {self.entry}, []
        stack = [(self.entry, iter(self.succs[self.entry]))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(self.succs[s])))
                    break
            else:
                stack.pop()
                order.append(node)
        return order

    def reverse_postorder(self):
        return self.postorder()[::-1]


class CFG(Graph):
    """The basic blocks of one function and the edges between them."""

    def __init__(self, blocks, entry):
        self.blocks = blocks            # name -> Block, in layout order
        self.entry = entry
        self.preds = {}
        self.succs = {}
        self.recompute_edges()

    # --- building -------------------------------------------------------------------

    @classmethod
    def from_instrs(cls, instrs):
        blocks = {}
        for name, label, body, _ in named_blocks(instrs):
            blocks[name] = Block(name, list(body), label)
        if not blocks:
            name = fresh_name("_b", set())
            blocks[name] = Block(name, [], None)
        names = list(blocks)
        for i, name in enumerate(names):
            b = blocks[name]
            term = b.terminator
            if term is None or term["op"] == "guard":
                b.fall = names[i + 1] if i + 1 < len(names) else None
        return cls(blocks, names[0])

    @classmethod
    def from_function(cls, func):
        return cls.from_instrs(func.get("instrs", []))

    def recompute_edges(self):
        """Recompute preds/succs after blocks or terminators changed."""
        self.succs = {n: [s for s in b.successors() if s in self.blocks]
                      for n, b in self.blocks.items()}
        self.preds = {n: [] for n in self.blocks}
        for n, ss in self.succs.items():
            for s in ss:
                self.preds[s].append(n)

    # --- editing --------------------------------------------------------------------

    def names(self):
        """All block names and labels in use (for making fresh ones)."""
        return set(self.blocks)

    def add_block(self, block, before=None):
        """Insert a block in the layout (at the end, or before block `before`);
        its outgoing edges are added."""
        items = list(self.blocks.items())
        pos = len(items) if before is None else [n for n, _ in items].index(before)
        items.insert(pos, (block.name, block))
        self.blocks = dict(items)
        self.preds.setdefault(block.name, [])
        self.succs[block.name] = []
        self.refresh_edges(block.name)

    def remove_block(self, name):
        del self.blocks[name]

    def remove_unreachable(self):
        """Delete the blocks no path from the entry reaches; True if any was."""
        live = self.reachable()
        dead = [n for n in self.blocks if n not in live]
        for n in dead:
            self.remove_block(n)
        if dead:
            self.recompute_edges()
        return bool(dead)

    def set_order(self, names):
        assert set(names) == set(self.blocks)
        self.blocks = {n: self.blocks[n] for n in names}

    def refresh_edges(self, name):
        """Recompute the edges out of one block after its terminator or fall changed."""
        for s in self.succs.get(name, ()):
            self.preds[s].remove(name)
        self.succs[name] = [s for s in self.blocks[name].successors() if s in self.blocks]
        for s in self.succs[name]:
            self.preds[s].append(name)

    def retarget(self, name, old, new):
        """Make block `name` go to `new` wherever it went to `old` (edges updated)."""
        b = self.blocks[name]
        if b.fall == old:
            b.fall = new
        term = b.terminator
        if term is not None and old in term.get("labels", ()):
            term = dict(term)
            term["labels"] = [new if l == old else l for l in term["labels"]]
            b.instrs[-1] = term
        self.refresh_edges(name)

    def merge_into(self, name, nxt):
        """Append block `nxt` to block `name` (which must fall into it, with no
        terminator) and delete `nxt`; edges are updated."""
        b, succ = self.blocks[name], self.blocks[nxt]
        b.instrs = b.instrs + succ.instrs
        b.fall = succ.fall
        for s in self.succs[nxt]:
            self.preds[s].remove(nxt)
        self.preds[nxt].remove(name)
        del self.succs[nxt], self.preds[nxt], self.blocks[nxt]
        self.succs[name] = []
        self.refresh_edges(name)

    # --- writing back ---------------------------------------------------------------

    def to_instrs(self):
        """The function's instruction list for the current layout.

        Labels are written for original labels and for generated names that some
        instruction refers to; a fall-through to a block that is not next becomes
        a `jmp`, and one off the end of the function that is not last a `ret`."""
        order = list(self.blocks)
        assert order[0] == self.entry, "the entry block must come first"
        jumped_to = {l for b in self.blocks.values() for i in b.instrs for l in instr_labels(i)}
        falls_in = {}
        for b in self.blocks.values():
            if b.fall is not None:
                falls_in.setdefault(b.fall, []).append(b.name)
        out = []
        for i, name in enumerate(order):
            b = self.blocks[name]
            nxt = order[i + 1] if i + 1 < len(order) else None
            if b.label is not None:
                out.append(b.label)
            elif name in jumped_to or any(
                    src != (order[i - 1] if i else None) for src in falls_in.get(name, ())):
                out.append({"label": name})
            out.extend(b.instrs)
            term = b.terminator
            if term is None or term["op"] == "guard":
                if b.fall is not None and b.fall != nxt:
                    out.append({"op": "jmp", "labels": [b.fall]})
                elif b.fall is None and nxt is not None:
                    out.append({"op": "ret"})
        return out

    # --- queries ------------------------------------------------------------------

    def nodes(self):
        return list(self.blocks)

    def exits(self):
        """Blocks from which control can leave the function."""
        return [n for n, b in self.blocks.items() if b.returns]


def _dominance(cfg, dom):
    if dom is None:
        from .dominance import Dominance
        dom = Dominance(cfg)
    return dom


def back_edges(cfg, dom=None):
    """Edges (tail, head) whose head dominates their tail (reachable blocks only).

    dom: a `bril.analysis.dominance.Dominance` of the CFG (made if not given)."""
    dom = _dominance(cfg, dom)
    return [(t, h) for t in cfg.nodes() if dom.reachable(t)
            for h in cfg.succs[t] if dom.dominates(h, t)]


def is_reducible(cfg, dom=None):
    """True if every retreating edge of a depth-first search is a back edge."""
    dom = _dominance(cfg, dom)
    rpo = {n: i for i, n in enumerate(cfg.reverse_postorder())}
    for t in rpo:
        for h in cfg.succs[t]:
            if rpo[h] <= rpo[t] and not dom.dominates(h, t):
                return False
    return True


class Loop(Record):
    # header: str
    # body: object  # block names, header included (a set or a LoopBody)
    # latches: list = []  # tails of the back edges
    # parent: object = None  # header of the innermost loop around this one
    fields = ('header', 'body', 'latches', 'parent')
    defaults = {'latches': list, 'parent': None}

    def exits(self, cfg):
        """Edges (inside, outside) that leave the loop."""
        return [(b, s) for b in self.body for s in cfg.succs[b] if s not in self.body]


class LoopBody:
    """The blocks of one loop of a reducible graph, answered from its loop forest:
    membership in constant time, the blocks listed only when iterated.  (In a nest
    of n loops the bodies hold O(n^2) blocks in all; listing them would make every
    user of the loops quadratic.)"""

    __slots__ = ("_forest", "_tree", "_members", "_children", "header", "_lo", "_hi", "_size")

    def __init__(self, forest, tree, members, children, header, size):
        self._forest, self._tree, self.header, self._size = forest, tree, header, size
        self._members, self._children = members, children
        self._lo, self._hi = tree[header]

    def __contains__(self, block):
        h = self._forest.loop_of(block)
        return h is not None and self._lo <= self._tree[h][0] <= self._hi

    def __iter__(self):
        """The blocks, loop by loop (deterministic; time in the body's size)."""
        stack = [self.header]
        while stack:
            h = stack.pop()
            yield from self._members[h]
            stack.extend(reversed(self._children[h]))

    def __len__(self):
        return self._size

    def __eq__(self, other):
        if isinstance(other, (set, frozenset, LoopBody)):
            return len(other) == self._size and all(b in other for b in self)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"LoopBody({self.header!r}, {self._size} blocks)"


def natural_loops(cfg, dom=None, forest=None):
    """Natural loops, one per header (back edges to one header share a loop).

    Sorted innermost first (by body size), so passes can work inside out; ties
    in the order of the back edges (tails in layout order).  On a reducible graph
    the bodies come from the loop forest (near-linear in all), else each is
    listed by a backward walk from its latches.  `forest`: the CFG's LoopForest,
    if the caller has one (else it is made)."""
    forest = forest or LoopForest(cfg)
    if not forest.reducible:
        return _listed_loops(cfg, dom)
    # Preorder intervals of the loop tree: h's loop holds g's iff h's interval holds g's.
    children = {h: [] for h in forest.headers}
    roots = []
    for h in forest.headers:
        p = forest.parent.get(h)
        (children[p] if p is not None else roots).append(h)
    tree, clock = {}, 0
    for root in roots:
        clock += 1
        stack = [(root, iter(children[root]))]
        tree[root] = [clock, clock]
        while stack:
            h, it = stack[-1]
            g = next(it, None)
            if g is None:
                tree[h][1] = clock
                stack.pop()
            else:
                clock += 1
                tree[g] = [clock, clock]
                stack.append((g, iter(children[g])))
    members = {h: [] for h in forest.headers}       # blocks whose innermost loop is h
    for b in forest.order:
        h = forest.loop_of(b)
        if h is not None:
            members[h].append(b)
    size = {h: len(m) for h, m in members.items()}
    for h in reversed(forest.headers):          # inner loops first
        p = forest.parent.get(h)
        if p is not None:
            size[p] += size[h]
    loops = {}
    for t in cfg.nodes():
        for h in cfg.succs[t]:
            if (t, h) in forest.back:
                loop = loops.get(h)
                if loop is None:
                    body = LoopBody(forest, tree, members, children, h, size[h])
                    loop = loops[h] = Loop(h, body, parent=forest.parent.get(h))
                loop.latches.append(t)
    return sorted(loops.values(), key=lambda l: len(l.body))


def _listed_loops(cfg, dom=None):
    dom = _dominance(cfg, dom)
    loops = {}
    for tail, head in back_edges(cfg, dom):
        loop = loops.setdefault(head, Loop(head, {head}))
        loop.latches.append(tail)
        stack = [tail]
        while stack:
            n = stack.pop()
            if n not in loop.body:
                loop.body.add(n)
                stack.extend(p for p in cfg.preds[n] if dom.reachable(p))
    loops = sorted(loops.values(), key=lambda l: len(l.body))
    for i, l in enumerate(loops):
        for m in loops[i + 1:]:
            if l.header in m.body:
                l.parent = m.header
                break
    return loops


class LoopForest:
    """The loop-nesting forest of a CFG's reachable blocks, in near-linear time
    (Havlak's construction: headers innermost first, inner loops collapsed with
    union-find, so no loop body is ever listed block by block; a nest of n loops
    costs O(n), where natural loop bodies add up to O(n^2)).

    Attributes:
      order       reachable blocks in depth-first preorder from the entry
      postorder   the same blocks in postorder
      back        set of edges (tail, head) that go back to a block on the DFS stack
      headers     loop headers, in preorder (outer loops before the loops they hold)
      parent      block -> header of the innermost loop holding it, not counting
                  the loop it heads (None outside every loop)
      latches     header -> tails of its back edges
      reducible   False if some loop has a second entry (then `parent`/`headers`
                  describe no natural loops and users should fall back)
    """

    def __init__(self, cfg):
        succs, preds = cfg.succs, cfg.preds
        entry = cfg.entry
        pre, order, postorder = {entry: 0}, [entry], []
        tree_parent = {}
        on_stack = {entry}
        back, back_list = set(), []
        stack = [(entry, iter(succs[entry]))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in pre:
                    pre[s] = len(order)
                    order.append(s)
                    tree_parent[s] = node
                    on_stack.add(s)
                    stack.append((s, iter(succs[s])))
                    break
                if s in on_stack and (node, s) not in back:
                    back.add((node, s))
                    back_list.append((node, s))
            else:
                stack.pop()
                on_stack.discard(node)
                postorder.append(node)
        # A block's DFS subtree spans preorder numbers pre[n] .. last[n].
        last = dict(pre)
        for n in postorder:             # children finish before their parents
            p = tree_parent.get(n)
            if p is not None and last[n] > last[p]:
                last[p] = last[n]
        self.order, self.postorder, self.back = order, postorder, back
        self.pre = pre
        latches = {}
        for t, h in back_list:
            latches.setdefault(h, []).append(t)
        self.latches = latches
        # Union-find: each block points towards the header of the loop it was
        # collapsed into.
        rep = {n: n for n in order}

        def find(x):
            root = x
            while rep[root] != root:
                root = rep[root]
            while rep[x] != root:
                rep[x], x = root, rep[x]
            return root

        parent = dict.fromkeys(order)
        reducible = True
        headers = []
        for h in reversed(order):              # inner headers come later in preorder
            if h not in latches:
                continue
            headers.append(h)
            body = set()
            work = [find(t) for t in latches[h] if t != h]
            while work:
                x = work.pop()
                if x == h or x in body:
                    continue
                if not pre[h] <= pre[x] <= last[h]:
                    reducible = False           # a second way into the loop
                    continue
                body.add(x)
                for p in preds[x]:
                    if p in pre and (p, x) not in back:
                        y = find(p)
                        if y != h and y not in body:
                            work.append(y)
            for x in body:
                parent[x] = h
                rep[x] = h
        headers.reverse()
        self.headers = headers
        self.parent = parent
        self.reducible = reducible

    def loop_of(self, block):
        """The header of the innermost loop holding block (itself if it is a header)."""
        return block if block in self.latches else self.parent.get(block)
