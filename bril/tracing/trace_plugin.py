"""Plug-in passes on each trace's straight-line code (`brili --trace --trace-pass SPEC`).

Once the tracer has numbered values and placed guards on a trace's straight line
(`trace_select.build_candidate`), each plug-in pass (`bril.passes.registry`
specs) runs on it, before regions are placed, dead code is removed and the trace
is spliced.  The pass sees an ordinary program: `@trace` holds the line, reading
the variables it does not define as arguments and ending in a call of
`@trace.end` with every variable it mentions (so a pass removes nothing the
original code could read at an exit); each `guard` goes to the label
`.trace.abort` at the end.

The pass may rewrite, remove or add computations that cannot fail (pure ops of
`bril.ir.ops` that do not trap); everything else (guards, effects, calls, ops that
may trap) must stay as it was, in the same order.  Its result is checked with
`bril.ir.rules` like any plug-in's, and then the traces built from it are checked
like the tracer's own (`bril.tracing.tracer._paying`: same output, no more instructions
on the training input).  A result that breaks these rules drops the pass for the
rest of the run with one warning on stderr (the trace keeps the tracer's own
code); a pass that raises or returns malformed JSON is an error naming it.
"""

import sys

from ..ir.ops import OPS
from .trace_build import Item

PASSES = []             # the plug-in passes of the current `trace_program` run
_END = "trace.end"
_ABORT = "trace.abort"


def _free(item):
    """An item the pass may change or remove: a computation that cannot fail."""
    op = OPS.get(item.instr.get("op"))
    return (not item.barrier and op is not None and op.pure and not op.may_trap
            and item.instr.get("dest") is not None)


def _anchor_instr(instr):
    if instr.get("op") == "guard":
        return dict(instr, labels=[_ABORT])
    return instr


def line_program(items, types):
    """The straight line as a program a pass can read (see the module's text)."""
    defined, reads, mentioned = set(), [], {}
    for it in items:
        for a in it.instr.get("args") or ():
            mentioned.setdefault(a, None)
            if a not in defined and a not in reads:
                reads.append(a)
        d = it.instr.get("dest")
        if d is not None:
            defined.add(d)
            mentioned.setdefault(d, None)
            types.setdefault(d, it.instr.get("type", "any"))
    end = list(mentioned)
    instrs = [_anchor_instr(it.instr) if not _free(it) else dict(it.instr) for it in items]
    instrs.append({"op": "call", "funcs": [_END], "args": end})
    instrs.append({"label": _ABORT})
    return {"functions": [
        {"name": "trace", "args": [{"name": v, "type": types.get(v, "any")} for v in reads],
         "instrs": instrs},
        {"name": _END, "args": [{"name": f"v{i}", "type": types.get(v, "any")}
                                for i, v in enumerate(end)], "instrs": []},
    ]}


def _map_back(result, items, original):
    """The items of the pass's result, or the reason it cannot be used."""
    from ..ir.rules import problems
    found = problems(result)
    if found:
        return f"its result is not well formed: {found[0].text()}"
    funcs = [f for f in result["functions"] if f["name"] == "trace"]
    if len(funcs) != 1 or [f["name"] for f in result["functions"]] != ["trace", _END]:
        return "its result must keep the functions @trace and @trace.end, and add none"
    instrs = funcs[0]["instrs"]
    if instrs[-2:] != original["functions"][0]["instrs"][-2:]:
        return "its result must end with the call of @trace.end and the label .trace.abort"
    anchors = [it for it in items if not _free(it)]
    out, k = [], 0
    pending = []
    for instr in instrs[:-2]:
        if "op" not in instr:
            return "its result has a label inside the straight line"
        if _free(Item(instr, 0, 0)):
            pending.append(instr)
            continue
        if k >= len(anchors) or instr != _anchor_instr(anchors[k].instr):
            expected = f"`{anchors[k].instr['op']}`" if k < len(anchors) else "nothing"
            return (f"it changed, moved, added or removed a guard, an effect or an op that "
                    f"may fail (found `{instr['op']}` where {expected} was; only "
                    "computations that cannot fail may change)")
        for p in pending:
            out.append(Item(p, anchors[k].site, anchors[k].frame))
        pending = []
        out.append(anchors[k])
        k += 1
    if k != len(anchors):
        return "it removed a guard, an effect or an op that may fail"
    last = items[-1] if items else None
    for p in pending:
        out.append(Item(p, last.site if last else 0, last.frame if last else 0))
    return out


def apply(items, types):
    """Run every plug-in pass on the straight-line `items` (types: what is known of
    the variables' declared types); the items to go on with."""
    from ..passes.registry import run_pass
    for p in list(PASSES):
        prog = line_program(items, dict(types))
        result = run_pass(p, prog)          # raises BrilError naming a failing plug-in
        mapped = _map_back(result, items, prog)
        if isinstance(mapped, str):
            sys.stderr.write(f"warning: trace pass {p.name} dropped: {mapped}\n")
            PASSES.remove(p)
            continue
        items = mapped
    return items
