"""Into SSA form (the ssa2 `set`/`get` extension) and out of it.

`to_ssa`: the classic construction.  Every assignment but the first one met
(in dominator-tree order) gets a fresh name (`x.1`, `x.2`, ...; arguments keep
theirs), so a program that assigns each variable once keeps its names (and
error messages that name variables stay the same).  Where definitions meet
(iterated dominance frontiers, pruned to variables live there) the block starts
with `x.3: T = get` and every predecessor ends (before its jump) with
`set x.3 v` for the version v it has.  A variable that some path brings to such
a merge unassigned is left as an ordinary variable (not renamed, not merged):
an `undef` there would turn the program's "undefined variable" error into a
different error, or into none.  Unreachable blocks are dropped; if the first
block is a jump target a new empty entry block is added.  Functions that
already use `set`/`get`/`phi`, that use speculation, or where a merged variable
has two different types are left unchanged.

`from_ssa`: each shadow variable s becomes an ordinary variable s' (`set s v`
becomes `s': T = id v`, `s: T = get` becomes `s: T = id s'`), which is exactly
the extension's semantics, so it is right for any ssa2 input (even the "swap
problem").  Then s' is merged into s wherever the two never hold different
values at the same time (a liveness check), which deletes the `get` copies.
"""

from bril.analysis.cfg import CFG, Block, NameSupply, fresh_name, variable_names
from bril.analysis.dataflow import liveness, live_after_each
from bril.analysis.dominance import immediate_dominators, dominator_tree, dominance_frontier
from .safety import map_functions, SPEC_OPS, arg_names


# --- Into SSA -------------------------------------------------------------------------

def _declared_types(func):
    types = {}
    for a in func.get("args", ()):
        types.setdefault(a["name"], []).append(a.get("type"))
    for i in func.get("instrs", ()):
        if "dest" in i:
            types.setdefault(i["dest"], []).append(i.get("type"))
    return types


def to_ssa_instrs(func):
    instrs, unassigned = _convert(func, frozenset())
    if unassigned:
        instrs, _ = _convert(func, unassigned)
    return instrs


def maybe_unassigned_variables(func):
    """The variables `to_ssa` keeps as ordinary, possibly reassigned variables:
    those that some path reaches a merge point without assigning."""
    return _convert(func, frozenset())[1]


def _convert(func, keep):
    """(instructions in SSA form, variables found unassigned on some path into a
    merge).  Variables in `keep` are left as they are: not renamed, not merged."""
    instrs = func.get("instrs", [])
    cfg = CFG.from_function(func)
    live = cfg.reachable()
    for n in [n for n in cfg.blocks if n not in live]:
        cfg.remove_block(n)
    cfg.recompute_edges()
    if cfg.preds[cfg.entry]:
        name = fresh_name("entry", cfg.names())
        cfg.add_block(Block(name, [], None, cfg.entry), before=cfg.entry)
        cfg.entry = name
        cfg.recompute_edges()
    types = _declared_types(func)
    args = arg_names(func)
    live_in, _ = liveness(cfg)
    idom = immediate_dominators(cfg)
    frontier = dominance_frontier(cfg, idom)
    tree = dominator_tree(cfg, idom)

    # Where each variable needs a merge (pruned: only where it is live).
    defsites = {}
    for a in args:
        defsites.setdefault(a, set()).add(cfg.entry)
    for n, b in cfg.blocks.items():
        for i in b.instrs:
            if "dest" in i and i["dest"] not in keep:
                defsites.setdefault(i["dest"], set()).add(n)
    merges = {n: [] for n in cfg.blocks}       # block -> variables merged at its start
    for v, sites in defsites.items():
        work, placed = list(sites), set()
        while work:
            for f in frontier[work.pop()]:
                if f not in placed and v in live_in[f]:
                    placed.add(f)
                    merges[f].append(v)
                    if f not in sites:
                        work.append(f)
    for n, vs in merges.items():
        for v in vs:
            if len({repr(t) for t in types.get(v, [])}) != 1:
                return instrs, set()        # merging values of different types
        vs.sort()

    names = NameSupply(variable_names(func))
    unclaimed = set(defsites) - set(args)
    stacks = {a: [a] for a in args}
    merge_name = {}                         # (block, var) -> name of its get
    incoming = {}                           # (pred, block, var) -> version or None
    new_instrs = {}

    def enter(n):
        """Rename block n's instructions; the variables it pushed versions of."""
        pushed = []
        for v in merges[n]:
            name = names.fresh(v)
            merge_name[(n, v)] = name
            stacks.setdefault(v, []).append(name)
            pushed.append(v)
        out = []
        for instr in cfg.blocks[n].instrs:
            instr = dict(instr)
            if "args" in instr:
                instr["args"] = [stacks[a][-1] if stacks.get(a) else a for a in instr["args"]]
            v = instr.get("dest")
            if v is not None and v not in keep:
                if v in unclaimed:          # the first definition keeps the name
                    unclaimed.discard(v)
                else:
                    instr["dest"] = names.fresh(v)
                stacks.setdefault(v, []).append(instr["dest"])
                pushed.append(v)
            out.append(instr)
        new_instrs[n] = out
        for s in cfg.succs[n]:
            for v in merges[s]:
                incoming[(n, s, v)] = stacks[v][-1] if stacks.get(v) else None
        return pushed

    # A preorder walk of the dominator tree with an explicit stack (a chain of
    # thousands of blocks is as deep a tree): each block's versions are popped
    # after all its children are done.
    walk = [(cfg.entry, enter(cfg.entry), iter(tree[cfg.entry]))]
    while walk:
        n, pushed, children = walk[-1]
        child = next(children, None)
        if child is not None:
            walk.append((child, enter(child), iter(tree[child])))
            continue
        walk.pop()
        for v in pushed:
            stacks[v].pop()
    unassigned = {v for (_, _, v), value in incoming.items() if value is None}
    if unassigned:
        return None, unassigned

    for n, b in cfg.blocks.items():
        gets = [{"op": "get", "dest": merge_name[(n, v)], "type": types[v][0]}
                for v in merges[n]]
        body = new_instrs[n]
        sets = [{"op": "set", "args": [merge_name[(s, v)], incoming[(n, s, v)]]}
                for s in cfg.succs[n] for v in merges[s]]
        term = b.terminator
        if term is not None:
            b.instrs = gets + body[:-1] + sets + body[-1:]
        else:
            b.instrs = gets + body + sets
    return cfg.to_instrs(), set()


def to_ssa(prog):
    """Pass: convert every function into ssa2 (set/get) SSA form."""
    return map_functions(prog, to_ssa_instrs, avoid=SPEC_OPS | {"set", "get", "phi"})


# --- Out of SSA -----------------------------------------------------------------------

def from_ssa_instrs(func):
    instrs = func.get("instrs", [])
    used = variable_names(func)
    get_type = {i["dest"]: i.get("type") for i in instrs if i.get("op") == "get"}
    declared = {}
    for i in instrs:
        if "dest" in i:
            declared.setdefault(i["dest"], i.get("type"))
    for a in func.get("args", ()):
        declared.setdefault(a["name"], a.get("type"))
    shadows = {i["args"][0] for i in instrs if i.get("op") == "set" and i.get("args")}
    shadows = sorted((shadows | set(get_type)) - _read_before_set(instrs))
    shadow_var = {s: fresh_name(s + ".shadow", used) for s in shadows}
    out = []
    for i in instrs:
        op = i.get("op")
        if op == "set" and len(i.get("args", ())) == 2 and i["args"][0] in shadow_var:
            s, v = i["args"]
            typ = get_type.get(s) or declared.get(v) or "any"
            new = {k: x for k, x in i.items() if k != "args"}
            new.update(op="id", dest=shadow_var[s], type=typ, args=[v])
            out.append(new)
        elif op == "get" and not i.get("args") and i["dest"] in shadow_var:
            out.append(dict(i, op="id", args=[shadow_var[i["dest"]]]))
        else:
            out.append(i)
    return _coalesce(out, {shadow_var[s]: s for s in shadows if s in get_type})


def _read_before_set(instrs):
    """Shadow variables some `get` may read before any `set` wrote them.  They keep
    their set/get, so the program still fails with `get without corresponding set`."""
    shadow_of = lambda s: ("shadow", s)     # noqa: E731  (a name no variable can have)
    as_vars = []
    for i in instrs:
        if i.get("op") == "set" and len(i.get("args", ())) == 2:
            i = {"op": "id", "dest": shadow_of(i["args"][0]), "args": [i["args"][1]]}
        elif i.get("op") == "get":
            i = {"op": "id", "dest": i["dest"], "args": [shadow_of(i["dest"])]}
        as_vars.append(i)
    cfg = CFG.from_instrs(as_vars)
    live_in, _ = liveness(cfg)
    return {v[1] for v in live_in[cfg.entry] if isinstance(v, tuple)}


def _coalesce(instrs, pairs):
    """Rename each shadow variable s' to its variable s (pairs: {s': s}) where the
    two never hold different values at once; the `s = id s'` copies then go.

    One liveness computation serves every pair: the pairs share no variable,
    and a variable's liveness depends only on its own uses and definitions."""
    cfg = CFG.from_instrs(instrs)
    live_in, live_out = liveness(cfg)
    partner = {}
    for shadow, var in pairs.items():
        partner[shadow], partner[var] = var, shadow
    # A `get` that may run before any `set` keeps its failure: no merging.
    good = {shadow for shadow in pairs if shadow not in live_in[cfg.entry]}
    for block in cfg.blocks.values():
        after = live_after_each(block, live_out[block.name])
        for instr, live in zip(block.instrs, after):
            d = instr.get("dest")
            other = partner.get(d)
            if other is None or other not in live:
                continue
            if instr.get("op") == "id" and instr.get("args") == [other]:
                continue            # a copy between the two: same value
            good.discard(d if d in pairs else other)
    rename = {shadow: pairs[shadow] for shadow in good}
    out = []
    for i in instrs:
        if "op" in i:
            src = (i.get("args") or [None])[0]
            if i["op"] == "id" and src in rename and i.get("dest") == rename[src]:
                continue            # the former `get`: would be `s = id s`
            i = dict(i)
            if i.get("dest") in rename:
                i["dest"] = rename[i["dest"]]
            if "args" in i:
                i["args"] = [rename.get(a, a) for a in i["args"]]
        out.append(i)
    return out


def from_ssa(prog):
    """Pass: convert ssa2 set/get back into ordinary copies."""
    return map_functions(prog, from_ssa_instrs, avoid=SPEC_OPS | {"phi"})
