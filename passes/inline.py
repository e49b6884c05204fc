"""Function inlining, and the variable/label renaming it is built on.

A call is replaced by a renamed copy of the callee's body when that cannot
change behaviour or add executed instructions:
- the callee is small (`INLINE_LIMIT`), not recursive (in no call-graph cycle),
  and uses no speculation, `phi`, `set` or `get` (its shadow variables would
  mix with the caller's); the caller uses no speculation or `phi`;
- a variable the callee loads through keeps its name (an uninitialized read
  names it in its message): the caller uses no variable of that name (another
  inlined body may, with the same type: each body assigns it before reading it);
  and a callee that loads has no loop;
- every variable the callee reads is assigned on every path to the read, and
  every label it jumps to exists (such failures name the renamed variable or
  label);
- the checks the interpreter makes at a call are sure to pass: the argument
  count matches; every argument is assigned and has a trusted kind equal to its
  parameter's; a call with a result names exactly the callee's return type and
  every `ret` in the callee returns an assigned variable of that kind (and no
  path falls off its end); a call without a result calls a function without a
  return type whose `ret`s carry no value;
- counting per path, the copies added (assigned parameters, returned values,
  jumps out of the body) do not exceed the `call` and `ret` removed.

Parameters the callee never assigns nor loads through are replaced by the
caller's argument variables (the inlined body writes only fresh names, so they
cannot change under it); others are copied with `id`.  A returned variable computed by the
instruction just before the `ret`, and read nowhere else, is computed straight
into the call's destination.

Reusable pieces (the tracer inlines callee blocks the same way):
`renaming`, `rename_instrs`, `inline_call`, `can_inline`, and from `bril.analysis.cfg`
`variable_names`, `label_names`, `NameSupply`.
"""

from bril.analysis.cfg import CFG, NameSupply, label_names, variable_names
from bril.analysis.dataflow import uses
from bril.ir import ops
from .safety import SPEC_OPS, FunctionFacts, copy_program, ops_in, trusted_kinds, kind, well_formed

INLINE_LIMIT = 60           # callee instructions
CALLER_LIMIT = 3000         # a caller stops growing at this many instructions


def _supply(names):
    return names if isinstance(names, NameSupply) else NameSupply(names)


def renaming(names, taken, prefix):
    """Map each name to a fresh `prefix.name` (`prefix.name.N` if that is taken).

    taken: a set of names in use or a `NameSupply`; the new names are added."""
    taken = _supply(taken)
    mapping = {}
    for n in sorted(names):
        new = f"{prefix}.{n}"
        if new in taken.used:
            new = taken.fresh(new)
        taken.used.add(new)
        mapping[n] = new
    return mapping


def rename_instrs(instrs, var_map, label_map):
    """Copies of the instructions with variables (destinations, operands, shadow
    names of `set`) and labels renamed; names missing from a map stay as they are."""
    out = []
    for instr in instrs:
        if "op" not in instr:
            out.append(dict(instr, label=label_map.get(instr["label"], instr["label"])))
            continue
        new = dict(instr)
        if "dest" in new:
            new["dest"] = var_map.get(new["dest"], new["dest"])
        if "args" in new:
            new["args"] = [var_map.get(a, a) for a in new["args"]]
        if "labels" in new:
            new["labels"] = [label_map.get(l, l) for l in new["labels"]]
        out.append(new)
    return out


def load_pointers(instrs):
    """The variables loaded through: they keep their names when inlined."""
    return {i["args"][0] for i in instrs if i.get("op") == "load" and i.get("args")}


def inline_call(call, callee, used_vars, used_labels):
    """The instructions that replace `call` by the body of `callee`.

    used_vars / used_labels: the variable and label names taken in the caller
    (sets or `NameSupply`s; the fresh names are added).  The callee's
    `load_pointers` keep their names.  Does not check that inlining is allowed
    (see `can_inline`)."""
    used_vars, used_labels = _supply(used_vars), _supply(used_labels)
    fname = callee["name"]
    body = callee.get("instrs", [])
    params = [a["name"] for a in callee.get("args", ())]
    args = call.get("args", [])
    kept = load_pointers(body)
    assigned = {i["dest"] for i in body if "dest" in i}
    local_vars = (variable_names(callee) - set(params)) | (set(params) & assigned)
    var_map = renaming(local_vars - kept, used_vars, fname)
    var_map.update((k, k) for k in kept)
    used_vars.used.update(kept)
    out = []
    for p, a, param in zip(params, args, callee.get("args", ())):
        if p in assigned or p in kept:
            out.append({"op": "id", "dest": var_map[p], "type": param["type"], "args": [a]})
        else:
            var_map[p] = a
    label_map = renaming(label_names(body), used_labels, fname)
    ret_label = used_labels.fresh(f"{fname}.ret")
    renamed = rename_instrs(body, var_map, label_map)
    dest = call.get("dest")
    ret_reads = _single_use_vars(renamed)
    for k, instr in enumerate(renamed):
        if instr.get("op") != "ret":
            out.append(instr)
            continue
        if dest is not None:
            value = instr["args"][0]
            prev = out[-1] if out and k > 0 and renamed[k - 1] is out[-1] else None
            if (prev is not None and prev.get("dest") == value and value in ret_reads
                    and prev.get("type") == call.get("type")):
                out[-1] = dict(prev, dest=dest, type=call["type"])
            else:
                out.append({"op": "id", "dest": dest, "type": call["type"], "args": [value]})
        if k != len(renamed) - 1:
            out.append({"op": "jmp", "labels": [ret_label]})
    out.append({"label": ret_label})
    return out


def _single_use_vars(instrs):
    """Variables assigned once and read exactly once in the instructions."""
    reads, writes = {}, {}
    for i in instrs:
        for a in uses(i):
            reads[a] = reads.get(a, 0) + 1
        if "dest" in i:
            writes[i["dest"]] = writes.get(i["dest"], 0) + 1
    return {v for v, n in reads.items() if n == 1 and writes.get(v) == 1}


# --- When inlining is allowed ---------------------------------------------------------

def _call_graph(prog):
    return {f["name"]: {i["funcs"][0] for i in f.get("instrs", ())
                        if i.get("op") == "call" and i.get("funcs")}
            for f in prog["functions"]}


def prune_functions(prog):
    """Pass: drop the functions no call from `@main` can reach (after inlining,
    a callee inlined at every call); a program without `@main` (a module of
    functions for others to import) is left whole."""
    graph = _call_graph(prog)
    if "main" not in graph:
        return copy_program(prog)
    reached, todo = {"main"}, ["main"]
    while todo:
        for callee in graph.get(todo.pop(), ()):
            if callee not in reached:
                reached.add(callee)
                todo.append(callee)
    return copy_program(dict(prog, functions=[f for f in prog["functions"]
                                              if f["name"] in reached]))


def recursive_functions(prog):
    """Functions on a call-graph cycle (including ones that call themselves).

    Tarjan's strongly connected components, with an explicit stack: linear in
    the call graph, however long its chains."""
    graph = _call_graph(prog)
    return {f for comp in _components(graph) for f in comp
            if len(comp) > 1 or f in graph[f]}


def _components(graph):
    """The strongly connected components of graph ({node: successors}; successors
    that are not nodes are ignored), callees' components before callers'."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, succs = work[-1]
            for s in succs:
                if s not in graph:
                    continue
                if s not in index:
                    index[s] = low[s] = counter
                    counter += 1
                    stack.append(s)
                    on_stack.add(s)
                    work.append((s, iter(sorted(graph[s]))))
                    break
                if s in on_stack:
                    low[node] = min(low[node], index[s])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        f = stack.pop()
                        on_stack.discard(f)
                        comp.append(f)
                        if f == node:
                            break
                    comps.append(comp)
    return comps


def _postorder(graph, roots):
    """Nodes of graph reachable from roots, each after its successors (sorted) where
    the graph allows (a depth-first postorder, iterative)."""
    seen, order = set(), []
    for root in roots:
        if root in seen or root not in graph:
            continue
        seen.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, succs = work[-1]
            for s in succs:
                if s not in seen and s in graph:
                    seen.add(s)
                    work.append((s, iter(sorted(graph[s]))))
                    break
            else:
                work.pop()
                order.append(node)
    return order


class _CalleeInfo:
    """What `can_inline` needs to know about a callee, computed once."""

    def __init__(self, func):
        self.func = func
        self.size = sum(1 for i in func.get("instrs", ()) if "op" in i)
        cfg = CFG.from_function(func)
        facts = FunctionFacts(func, cfg)
        ret_kind = kind(func.get("type")) if "type" in func else None
        self.ok = True
        self.ret_costs = []
        reachable = cfg.reachable()
        # A jump to a missing label fails naming the (renamed) label.
        defined_labels = {i["label"] for i in func.get("instrs", ()) if "op" not in i}
        if label_names(func.get("instrs", ())) - defined_labels:
            self.ok = False
        # A read of an unassigned variable would fail naming the renamed variable.
        for name in reachable:
            block = cfg.blocks[name]
            for instr, defined in zip(block.instrs, facts.defined_before(block)):
                if not all(a in defined for a in uses(instr)):
                    self.ok = False
        last = func["instrs"][-1] if func.get("instrs") else None
        for name in reachable:
            block = cfg.blocks[name]
            if block.returns and (block.terminator is None or block.terminator["op"] != "ret"):
                if "type" in func:
                    self.ok = False         # falls off the end without a value
                self.ret_costs.append(0)
                continue
            if not block.returns:
                continue
            ret = block.terminator
            defined = facts.defined_before(block)[-1]
            args = ret.get("args", [])
            if "type" in func:
                if (len(args) != 1 or ret_kind is None or args[0] not in defined
                        or facts.kinds.get(args[0]) != ret_kind):
                    self.ok = False
            elif args:
                self.ok = False
            jump = 0 if ret is last else 1
            self.ret_costs.append(jump)
        params = {a["name"] for a in func.get("args", ())}
        assigned = {i["dest"] for i in func.get("instrs", ()) if "dest" in i}
        # The names kept (`load_pointers`), with their types.
        self.kept = {n: None for n in load_pointers(func.get("instrs", ()))}
        # A callee with loads inlines only without a loop (a memory function that
        # loops pays its call once per loop: inlined, matrix and array helpers
        # copied into every caller left mat-mul's traces less room, no faster).
        rpo = {n: k for k, n in enumerate(cfg.reverse_postorder())}
        if self.kept and any(rpo[h] <= rpo[t] for t in rpo for h in cfg.succs[t] if h in rpo):
            self.ok = False
        for n, t in [(a["name"], a.get("type")) for a in func.get("args", ())] + [
                (i["dest"], i.get("type")) for i in func.get("instrs", ()) if "dest" in i]:
            if n in self.kept:
                self.ok = self.ok and self.kept[n] in (None, t)
                self.kept[n] = t
        self.param_copies = len(params & (assigned | set(self.kept)))


def can_inline(call, info, caller_kinds, defined):
    callee = info.func
    if not info.ok or info.size > INLINE_LIMIT:
        return False
    params = callee.get("args", [])
    args = call.get("args", [])
    if len(params) != len(args):
        return False
    for p, a in zip(params, args):
        k = kind(p.get("type"))
        if k is None or a not in defined or caller_kinds.get(a) != k:
            return False
    if "dest" in call:
        if "type" not in callee or call.get("type") != callee["type"] \
                or kind(callee["type"]) is None:
            return False
        copy_cost = 1           # an `id` for the result, unless coalesced (not counted)
    else:
        if "type" in callee:
            return False
        copy_cost = 0
    worst = info.param_copies + max(info.ret_costs, default=0) + copy_cost
    return worst <= 2           # the removed `call` and `ret`


_AVOID_IN_CALLEE = ops.STATEFUL_OPS


def inline(prog):
    """Pass: inline small non-recursive functions (bottom-up)."""
    out = copy_program(prog)
    names = [f["name"] for f in out["functions"]]
    if len(set(names)) != len(names):
        return out                  # calls are ambiguous: the interpreter rejects the program
    rec = recursive_functions(out)
    funcs = {f["name"]: f for f in out["functions"]}
    graph = _call_graph(out)
    order = _postorder(graph, funcs)        # callees before callers
    infos = {}
    for name in order:
        func = funcs[name]
        if ops_in(func) & (SPEC_OPS | {"phi"}) or not well_formed(func):
            continue
        func["instrs"] = _inline_into(func, funcs, rec, infos)
        infos.pop(name, None)
        infos.pop(("screened", name), None)
    return out


def _screened(callee, infos):
    """True if the callee's ops and shape allow inlining it (cached in infos with
    its _CalleeInfo: computed once per callee, not once per call)."""
    key = ("screened", callee["name"])
    ok = infos.get(key)
    if ok is None:
        ok = infos[key] = not (ops_in(callee) & _AVOID_IN_CALLEE) and well_formed(callee)
    return ok


def _inline_into(func, funcs, rec, infos):
    cfg = CFG.from_function(func)
    facts = FunctionFacts(func, cfg)
    defined_at = {}                 # id(call instruction) -> variables surely assigned
    for block in cfg.blocks.values():
        for instr, defined in zip(block.instrs, facts.defined_before(block)):
            if instr.get("op") == "call":
                defined_at[id(instr)] = defined
    kinds = trusted_kinds(func)
    own_vars = variable_names(func)
    kept_types = {}                 # names kept by the bodies inlined so far -> type
    used_vars = NameSupply(set(own_vars))
    used_labels = NameSupply(label_names(func.get("instrs", ())))
    size = sum(1 for i in func.get("instrs", ()) if "op" in i)
    out = []
    for instr in func.get("instrs", ()):
        callee_name = instr.get("funcs", [None])[0] if instr.get("op") == "call" else None
        callee = funcs.get(callee_name)
        if (callee is None or callee_name in rec or callee_name == func["name"]
                or size >= CALLER_LIMIT or not _screened(callee, infos)):
            out.append(instr)
            continue
        info = infos.get(callee_name)
        if info is None:
            info = infos[callee_name] = _CalleeInfo(callee)
        if not can_inline(instr, info, kinds, defined_at[id(instr)]) or any(
                n in own_vars or (n in used_vars.used and kept_types.get(n) != t)
                for n, t in info.kept.items()):
            out.append(instr)
            continue
        kept_types.update(info.kept)
        out.extend(inline_call(instr, callee, used_vars, used_labels))
        size += info.size
    return out
