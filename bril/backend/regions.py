"""Which blocks of a function a JIT region holds: what native code can run, reachable
from a hot loop's header, and the loop headers where it may be entered.  Read by the
running JIT (`bril.backend.jit`) and by its compile server (`bril.backend.jit_server`),
which selects regions for hot code a run never asked for."""

_SKIP_OPS = {"phi"}             # (phi state stays interpreted; ssa2 shadows are slots)


def _block_ok(b):
    term = b.term
    if b.falls_off or (term is not None and term["op"] == "ret"):
        return False
    return not any(i.get("op") in _SKIP_OPS for i in b.instrs)


def _spec_depths(blocks, region, header):
    """{block: speculation depth at its entry} for the region entered at header, or
    None if a speculation could be open where control leaves the region (native
    code cannot hand an open speculation to the interpreter) or depths disagree."""
    depth = {header: 0}
    todo = [header]
    while todo:
        bi = todo.pop()
        d = depth[bi]
        b = blocks[bi]
        for instr in b.instrs:
            op = instr.get("op")
            if op == "speculate":
                d += 1
            elif op == "commit":
                d -= 1
        edges = [(s, d) for s in b.succs]
        if b.abort_succ is not None:
            edges.append((b.abort_succ, d - 1))
        for s, ds in edges:
            if s not in region:
                if ds != 0:
                    return None
                continue
            if s in depth:
                if depth[s] != ds:
                    return None
                continue
            depth[s] = ds
            todo.append(s)
    return depth


def grow_region(fc, header, allowed):
    """(blocks, entries): the blocks of `allowed` that can run natively, reachable
    from header without leaving them, and the loop headers among them where
    native code may be entered (no speculation open there); None if the header
    itself cannot run natively or a speculation could be open at an exit."""
    ok = {bi for bi in allowed if _block_ok(fc.blocks_by_index[bi])}
    if header not in ok:
        return None
    region = {header}
    todo = [header]
    while todo:
        b = fc.blocks_by_index[todo.pop()]
        nexts = list(b.succs) + ([b.abort_succ] if b.abort_succ is not None else [])
        for s in nexts:
            if s in ok and s not in region:
                region.add(s)
                todo.append(s)
    depth = _spec_depths(fc.blocks_by_index, region, header)
    if depth is None:
        return None
    entries = {l.header for l in fc.loops if l.header in region and depth.get(l.header) == 0}
    return region, entries


def select_region(fc, header):
    """Candidate regions for when the loop at `header` gets hot, widest first, as
    (blocks, entries) lists: everything of the function reachable from the
    header that native code can run (the rest of the function's work, all its
    later loops included, in one compilation), then the outermost loop around
    the header, then inner ones.  A region is entered at whichever of its loop
    headers is running."""
    out = []
    whole = grow_region(fc, header, range(len(fc.blocks_by_index)))
    if whole is not None:
        out.append(whole)
    loops = []
    loop = next(l for l in fc.loops if l.header == header)
    while loop is not None:
        loops.append(loop)
        loop = loop.parent
    for loop in reversed(loops):
        found = grow_region(fc, loop.header, loop.body)
        if found is not None and header in found[1] and \
                all(found[0] != c[0] for c in out):
            out.append(found)
    return out
