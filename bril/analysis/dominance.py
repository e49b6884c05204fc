"""Dominators, the dominator tree and dominance frontiers of a CFG.

Only blocks reachable from the entry take part (unreachable blocks have no
dominators).  Immediate dominators come from the Cooper-Harvey-Kennedy
iteration over reverse postorder; everything else derives from them.
`dominators` gives explicit sets (simple, quadratic in size on long chains);
`Dominance` answers "does a dominate b" in constant time for large functions.
"""


def immediate_dominators(cfg):
    """Map each reachable block to its immediate dominator (the entry to None)."""
    rpo = cfg.reverse_postorder()
    index = {n: i for i, n in enumerate(rpo)}
    idom = {cfg.entry: cfg.entry}

    def intersect(a, b):
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for n in rpo[1:]:
            new = None
            for p in cfg.preds[n]:
                if p in idom:
                    new = p if new is None else intersect(p, new)
            if idom.get(n) != new:
                idom[n] = new
                changed = True
    idom[cfg.entry] = None
    return idom


def dominators(cfg, idom=None):
    """Map each reachable block to the set of blocks that dominate it (itself included)."""
    idom = idom or immediate_dominators(cfg)
    dom = {}
    for n in cfg.reverse_postorder():      # a block's idom comes before it in RPO
        parent = idom[n]
        dom[n] = (dom[parent] if parent is not None else set()) | {n}
    return dom


def dominator_tree(cfg, idom=None):
    """Map each reachable block to its children in the dominator tree (in RPO)."""
    idom = idom or immediate_dominators(cfg)
    tree = {n: [] for n in idom}
    for n in cfg.reverse_postorder():
        if idom[n] is not None:
            tree[idom[n]].append(n)
    return tree


def dominance_frontier(cfg, idom=None):
    """Map each reachable block B to the blocks where B's dominance ends: the
    blocks with a predecessor dominated by B that B does not strictly dominate."""
    idom = idom or immediate_dominators(cfg)
    df = {n: set() for n in idom}
    for n in idom:
        preds = [p for p in cfg.preds[n] if p in idom]
        if len(preds) < 2 and not (n == cfg.entry and preds):
            continue
        for p in preds:
            runner = p
            # Walk up from each predecessor until reaching n's idom.
            while runner is not None and runner != idom[n]:
                df[runner].add(n)
                runner = idom[runner]
    return df


class Dominance:
    """Dominance of one CFG with constant-time queries (dominator-tree intervals),
    for large functions where the sets of `dominators` would grow quadratically."""

    def __init__(self, cfg):
        self.idom = immediate_dominators(cfg)
        self.tree = dominator_tree(cfg, self.idom)
        self.pre, self.post = {}, {}
        clock = 0
        stack = [(cfg.entry, iter(self.tree[cfg.entry]))]
        self.pre[cfg.entry] = clock
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            clock += 1
            if child is None:
                self.post[node] = clock
                stack.pop()
            else:
                self.pre[child] = clock
                stack.append((child, iter(self.tree[child])))

    def reachable(self, n):
        return n in self.idom

    def dominates(self, a, b):
        """True if a dominates b (both reachable)."""
        pa, pb = self.pre.get(a), self.pre.get(b)
        return (pa is not None and pb is not None
                and pa <= pb and self.post[b] <= self.post[a])
