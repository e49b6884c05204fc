"""Control-flow clean-up: fewer blocks and fewer executed jumps.

Repeated until nothing changes:
- unreachable blocks are deleted;
- a `br` whose two labels are equal becomes a jump (when its condition is a
  trusted, assigned boolean, so the type check it did cannot have failed);
- jump threading: an edge into an empty block that only jumps on goes straight
  to that block's target;
- a block reached only by a jump (or fall-through) from one block that has no
  other successor is merged into it;
- tail duplication: a jump to a small block that ends in `br` or `ret` is
  replaced by a copy of that block (this rotates `while` loops: the loop test is
  repeated at the bottom, saving one `jmp` per iteration).  Blocks with `get`
  are never copied (each shadow variable has one `get`), nor a loop header into
  one of several blocks that enter its loop (that would leave a loop with two
  entries).
Finally the blocks are laid out so that as many jumps as possible become
fall-throughs; fall-throughs of the input layout are kept, so no path executes
more jumps than before.

Functions with `phi` are left alone (its labels name predecessor blocks, which
these rewrites change), as are functions with speculation.
"""

from bril.analysis.cfg import CFG, natural_loops
from .safety import map_functions, SPEC_OPS, trusted_kinds, FunctionFacts

DUPLICATE_LIMIT = 6     # instructions (terminator included) a block may have to be copied


def _normalize(cfg):
    """Turn explicit `jmp` terminators into fall edges: the layout decides jumps."""
    for b in cfg.blocks.values():
        term = b.terminator
        if term is not None and term["op"] == "jmp" and len(term.get("labels", ())) == 1:
            target = term["labels"][0]
            if target in cfg.blocks:
                b.instrs.pop()
                b.fall = target
    cfg.recompute_edges()


def _next_in_layout(cfg):
    order = list(cfg.blocks)
    return dict(zip(order, order[1:]))


def _fold_same_target_branches(cfg, func):
    kinds = trusted_kinds({"args": func.get("args", []),
                           "instrs": [i for b in cfg.blocks.values() for i in b.instrs]})
    facts = None
    changed = False
    for b in cfg.blocks.values():
        term = b.terminator
        if (term is None or term["op"] != "br" or len(set(term.get("labels", ()))) != 1
                or len(term.get("args", ())) != 1 or kinds.get(term["args"][0]) != "bool"):
            continue
        facts = facts or FunctionFacts({"args": func.get("args", []), "instrs": []}, cfg)
        if term["args"][0] in facts.defined_before(b)[-1]:
            b.instrs.pop()
            b.fall = term["labels"][0]
            changed = True
    if changed:
        cfg.recompute_edges()
    return changed


def _thread_jumps(cfg):
    """Send every edge into an empty forwarding block straight to where the chain
    of forwarders ends (a cycle of empty blocks is an infinite loop: kept)."""
    def forwards(n):
        b = cfg.blocks[n]
        return not b.instrs and b.fall is not None and n != cfg.entry

    final = {}
    for start in cfg.blocks:
        path, seen, cur = [], set(), start
        while forwards(cur) and cur not in seen and cur not in final:
            seen.add(cur)
            path.append(cur)
            cur = cfg.blocks[cur].fall
        cur = final.get(cur, cur)
        for n in path:
            final[n] = cur
    changed = False
    for name in list(cfg.blocks):
        for s in list(cfg.succs[name]):
            target = final.get(s, s)
            if target != s and not (name == s):
                cfg.retarget(name, s, target)
                changed = True
    return changed


def _merge_blocks(cfg):
    changed = False
    for name in list(cfg.blocks):
        b = cfg.blocks.get(name)
        if b is None:
            continue
        while b.terminator is None and b.fall is not None:
            nxt = b.fall
            if nxt == name or nxt == cfg.entry or cfg.preds[nxt] != [name]:
                break
            cfg.merge_into(name, nxt)
            changed = True
    return changed


def _duplicate_tails(cfg):
    changed = False
    nxt = _next_in_layout(cfg)
    entered = None
    for name in list(cfg.blocks):
        b = cfg.blocks[name]
        if b.terminator is not None or b.fall is None or nxt.get(name) == b.fall:
            continue                    # no jump to save
        target = cfg.blocks[b.fall]
        term = target.terminator
        if (target.name == name or term is None or term["op"] not in ("br", "ret")
                or len(target.instrs) > DUPLICATE_LIMIT
                or any(i.get("op") == "get" for i in target.instrs)):
            continue
        if entered is None:
            entered = _entered_headers(cfg)
        if name in entered.get(target.name, ()):
            continue
        b.instrs = b.instrs + [dict(i) for i in target.instrs]
        b.fall = None
        changed = True
    if changed:
        cfg.recompute_edges()
    return changed


def _entered_headers(cfg):
    """{loop header: the blocks outside its loop that jump to it}, for the headers
    entered from more than one such block.  Copying such a header into one of
    them would enter the loop's body from outside while the header is entered
    too: a cycle with two entries, no natural loop left, which the tiers and
    LLVM compile far worse (rotating a loop with one entry is what they like)."""
    out = {}
    for loop in natural_loops(cfg):
        outside = [p for p in cfg.preds[loop.header] if p not in loop.body]
        if len(outside) > 1:
            out[loop.header] = set(outside)
    return out


def _layout(cfg):
    """Order blocks in chains along fall edges; keep the input's fall-throughs."""
    order = list(cfg.blocks)
    nxt = {}
    head_of = {n: n for n in order}     # for a chain's last block: its first
    tail_of = {n: n for n in order}     # for a chain's first block: its last

    def link(a, b):
        """Append b's chain (b first) to a's chain (a last), unless that closes a cycle."""
        h = head_of[a]
        if h == b:
            return
        t = tail_of[b]
        nxt[a] = b
        head_of[t], tail_of[h] = h, t
        del tail_of[b]

    # First the fall-throughs that need no jump now, then every other fall edge.
    for i, a in enumerate(order[:-1]):
        b = cfg.blocks[a]
        if b.terminator is None and b.fall == order[i + 1]:
            link(a, b.fall)
    for a in order:
        b = cfg.blocks[a]
        f = b.fall
        if (b.terminator is None and f is not None and a not in nxt and f in tail_of
                and f != cfg.entry):
            link(a, f)

    def chain(h):
        out = [h]
        while out[-1] in nxt:
            out.append(nxt[out[-1]])
        return out

    # The entry's chain first; a chain that falls off the end of the function last.
    heads = [n for n in order if n in tail_of]
    first = [h for h in heads if h == cfg.entry]
    ends = [h for h in heads if h != cfg.entry and _falls_off(cfg, tail_of[h])]
    ending = set(ends)
    middle = [h for h in heads if h != cfg.entry and h not in ending]
    new = [n for h in first + middle + ends for n in chain(h)]
    cfg.set_order(new)


def _falls_off(cfg, name):
    b = cfg.blocks[name]
    return b.terminator is None and b.fall is None


def clean_cfg(cfg, func, max_rounds=20):
    _normalize(cfg)
    for _ in range(max_rounds):
        changed = cfg.remove_unreachable()
        changed |= _fold_same_target_branches(cfg, func)
        changed |= _thread_jumps(cfg)
        changed |= cfg.remove_unreachable()
        changed |= _merge_blocks(cfg)
        changed |= _duplicate_tails(cfg)
        changed |= cfg.remove_unreachable()
        changed |= _merge_blocks(cfg)
        _layout(cfg)
        if not changed:
            break
    return cfg


def cfgclean_instrs(func):
    return clean_cfg(CFG.from_function(func), func).to_instrs()


def cfgclean(prog):
    """Pass: remove unreachable blocks, thread jumps, merge blocks, lay out to save jumps."""
    return map_functions(prog, cfgclean_instrs, avoid=SPEC_OPS | {"phi"})
