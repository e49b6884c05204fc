"""Into SSA form (the ssa2 `set`/`get` extension) and out of it.

`to_ssa`: the classic construction.  Every assignment but the first one met
(in dominator-tree order) gets a fresh name (`x.1`, `x.2`, ...; arguments keep
theirs), so a program that assigns each variable once keeps its names (and
error messages that name variables stay the same).  Where definitions meet (iterated
dominance frontiers, pruned to variables live there) the block starts with
`x.3: T = get` and every predecessor ends (before its jump) with `set x.3 v`
for the version v it has.  When some path into the block has no definition,
that predecessor sets a fresh `undef` instead: a program that read an
unassigned variable there then fails on an undefined value rather than an
unassigned variable.  Unreachable blocks are dropped; if the first block is a
jump target a new empty entry block is added.  Functions that already use
`set`/`get`/`phi`, that use speculation, or where a merged variable has two
different types are left unchanged.

`from_ssa`: each shadow variable s becomes an ordinary variable s' (`set s v`
becomes `s': T = id v`, `s: T = get` becomes `s: T = id s'`), which is exactly
the extension's semantics, so it is right for any ssa2 input (even the "swap
problem").  Then s' is merged into s wherever the two never hold different
values at the same time (a liveness check), which deletes the `get` copies.
"""

from bril.cfg import CFG, Block, NameSupply, fresh_name, variable_names
from bril.dataflow import liveness, live_after_each
from bril.dominance import immediate_dominators, dominator_tree, dominance_frontier
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
            if "dest" in i:
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
                return instrs               # merging values of different types
        vs.sort()

    names = NameSupply(variable_names(func))
    unclaimed = set(defsites) - set(args)
    stacks = {a: [a] for a in args}
    merge_name = {}                         # (block, var) -> name of its get
    incoming = {}                           # (pred, block, var) -> version or None
    new_instrs = {}

    def rename(n):
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
            if "dest" in instr:
                v = instr["dest"]
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
        for child in tree[n]:
            rename(child)
        for v in pushed:
            stacks[v].pop()

    _with_recursion_limit(len(cfg.blocks), rename, cfg.entry)

    for n, b in cfg.blocks.items():
        gets = [{"op": "get", "dest": merge_name[(n, v)], "type": types[v][0]}
                for v in merges[n]]
        body = new_instrs[n]
        sets = []
        for s in cfg.succs[n]:
            for v in merges[s]:
                value = incoming[(n, s, v)]
                if value is None:
                    value = names.fresh(v + ".undef")
                    sets.append({"op": "undef", "dest": value, "type": types[v][0]})
                sets.append({"op": "set", "args": [merge_name[(s, v)], value]})
        term = b.terminator
        if term is not None:
            b.instrs = gets + body[:-1] + sets + body[-1:]
        else:
            b.instrs = gets + body + sets
    return cfg.to_instrs()


def _with_recursion_limit(depth, fn, *args):
    import sys
    old = sys.getrecursionlimit()
    if depth + 100 > old:
        sys.setrecursionlimit(depth + 100)
    try:
        return fn(*args)
    finally:
        sys.setrecursionlimit(old)


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
    for s in shadows:
        if s in get_type:
            out = _coalesce(func, out, s, shadow_var[s])
    return out


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


def _coalesce(func, instrs, var, shadow):
    """Rename `shadow` to `var` if they never hold different values at once."""
    cfg = CFG.from_instrs(instrs)
    live_in, live_out = liveness(cfg)
    if shadow in live_in[cfg.entry]:
        return instrs           # a `get` may run before any `set`: keep its failure
    for block in cfg.blocks.values():
        after = live_after_each(block, live_out[block.name])
        for instr, live in zip(block.instrs, after):
            d = instr.get("dest")
            copy_between = instr.get("op") == "id" and instr.get("args") in ([var], [shadow])
            if d == shadow and var in live and not copy_between:
                return instrs
            if d == var and shadow in live and not copy_between:
                return instrs
    out = []
    for i in instrs:
        if "op" in i:
            if i["op"] == "id" and i.get("dest") == var and i.get("args") == [shadow]:
                continue        # the former `get`: now `var = id var`
            i = dict(i)
            if i.get("dest") == shadow:
                i["dest"] = var
            if "args" in i:
                i["args"] = [var if a == shadow else a for a in i["args"]]
        out.append(i)
    return out


def from_ssa(prog):
    """Pass: convert ssa2 set/get back into ordinary copies."""
    return map_functions(prog, from_ssa_instrs, avoid=SPEC_OPS | {"phi"})
