"""Value specialization: a hot loop versioned on a value its recording saw invariant,
and a function on the values nearly every call passed (`specialize_calls`, below).

Where the recording of a loop shows an integer variable that the loop reads as a
divisor but never writes holding the same value at every entry sampled, the loop
is copied with that variable replaced by a constant, and entered through a check
made once per entry of the loop: the constant, `eq`, then the copy if equal,
else the original loop.  On an input where the value differs the program runs
as before, plus the check.

The copy is for native code (`brilc`): LLVM turns a division by a constant into
a multiplication and shifts (a loop of `div i m`: 0.17 -> 0.10 s).  The Python
engine gains nothing and the check costs 3 instructions per entry, so it is
asked for (`brili --trace --trace-specialize`), and only loops that run many
iterations per entry (`MIN_TRIP`) are versioned.

The recorder samples the values (`trace_record.Recorder(values=True)`): at the
first `trace_record.VALUE_SAMPLES` entries of each hot loop, the variables
`trace_record.wanted` names.
The copy's labels are `H.trace.v.B` (B: the original block), its constants
`H.trace.vk.V` and the check's result `H.trace.vt` (H: the loop's header).
"""

from ..ir.record import Record
from ..analysis.cfg import CFG, natural_loops
from ..analysis.dataflow import defined_vars
from ..analysis.dominance import Dominance
from ..analysis.folding import exact_in_double
from .trace_emit import clone_site, count_ops, loop_clone
from ..ir.tracelabels import MARK
from .trace_record import VARIES, wanted

# Header visits per entry below which a loop is not versioned: the check's 3
# instructions per entry must be negligible beside the iterations.
MIN_TRIP = 16
def invariant_values(stats):
    """{variable: value} of the values the recording saw the same at every entry
    sampled, that a literal can carry exactly (the reference tools read JSON
    numbers as doubles) and that divide (not 0)."""
    return {v: x for v, x in stats.values.items()
            if x is not VARIES and x != 0 and exact_in_double(x)}


class Version(Record):
    """A loop (or a whole function: header None, `specialize_calls`) versioned on
    values: where, on what, and the instructions it added."""
    # func: str
    # header: str or None
    # values: dict  # variable -> the constant the copy reads
    # added: int
    fields = ('func', 'header', 'values', 'added')


def specialize(prog, loops, room=None):
    """`prog` with its hot loops versioned on their invariant values, and the list
    of `Version`s made.  `loops`: {(function, header): LoopStats} of a recording
    of `prog` (or of the program it was spliced from: headers keep their labels);
    `room`: instructions the copies may add in all (None: any).  A loop holding
    traces is copied with them (the copy's traces read the constants)."""
    done = []
    funcs = []
    for func in prog["functions"]:
        instrs = func.get("instrs") or []
        hot = {h: st for (f, h), st in loops.items() if f == func.get("name") and st.values}
        if not hot:
            funcs.append(func)
            continue
        cfg = CFG.from_function(func)
        dom = Dominance(cfg)
        loops_of = natural_loops(cfg, dom)
        def_in = None
        useful = wanted(func, cfg, loops_of)
        for loop in loops_of:
            st = hot.get(loop.header)
            if st is None or cfg.blocks[loop.header].label is None:
                continue
            if st.visits < MIN_TRIP * max(1, st.entries):
                continue
            values = {v: x for v, x in invariant_values(st).items() if v in useful[loop.header]}
            if def_in is None:
                def_in = defined_vars(cfg, [a["name"] for a in func.get("args") or []])[0]
            values = {v: x for v, x in values.items() if v in def_in[loop.header]}
            if not values:
                continue
            region = _region(cfg, dom, loop.header, loops_of)
            if any(ins.get("dest") in values for name in region
                   for ins in cfg.blocks[name].instrs):
                continue
            new = _versioned(func, cfg, loop.header, region, values)
            if new is None:
                continue
            added = count_ops(new) - count_ops(instrs)
            if room is not None and added > room:
                continue
            if room is not None:
                room -= added
            done.append(Version(func["name"], loop.header, values, added))
            func = dict(func, instrs=new)
            break           # (one loop per function: the CFG and loops were the old one's)
        funcs.append(func)
    if not done:
        return prog, done
    return dict(prog, functions=funcs), done


# A function is versioned on the values nearly all of its calls passed: this share
# of them, in this many calls at least (as `bril.interpreter.type_profile` for
# native code).
CALL_SHARE = 0.9
CALL_MIN = 4


def specialize_calls(prog, calls, loops, recorded, room=None, skip=()):
    """`prog` with each function that nearly every call passed one value for a
    parameter of (`calls`: {function: trace_record.CallStats} of a recording)
    versioned on those values, and the `Version`s made: a copy of the whole
    function reading the values as constants, entered when a check at the
    function's entry finds them (else the original code).  Only where a constant
    pays natively (`bril.analysis.invariants.worth_constants`: not a long trip
    count; a function that calls no other one, as `brilc --profile`'s variants),
    where the function's loops ran MIN_TRIP rounds a call (the check's few
    instructions must be negligible beside them), and a value not already a
    constant of one of its loops' versions (`skip`: {(function, parameter)}).
    `loops`: the recording's LoopStats by (function, header); `recorded`: {name:
    function} of the program recorded (traces spliced since compute with a trip
    count -- how many rounds are left -- where the loop only compared it)."""
    from ..analysis.invariants import worth_constants
    rounds = {}
    for (f, _), st in loops.items():
        rounds[f] = max(rounds.get(f, 0), st.visits)
    done, funcs = [], []
    for func in prog["functions"]:
        name = func.get("name")
        cs = calls.get(name)
        instrs = func.get("instrs") or []
        if name == "main" or cs is None or cs.calls < CALL_MIN \
                or rounds.get(name, 0) < MIN_TRIP * cs.calls \
                or any(ins.get("op") == "phi" or (ins.get("op") == "call" and
                                                  (ins.get("funcs") or [name])[0] != name)
                       for ins in instrs):
            funcs.append(func)
            continue
        assigned = {ins["dest"] for ins in instrs if "dest" in ins}
        values = {p: v for p, v in cs.common(CALL_SHARE).items()
                  if p not in assigned and (name, p) not in skip
                  and (type(v) is bool or exact_in_double(v))}
        values = worth_constants(recorded.get(name, func).get("instrs") or (), values)
        new = _function_version(func, values) if values else None
        added = 0 if new is None else count_ops(new) - count_ops(instrs)
        if new is None or (room is not None and added > room):
            funcs.append(func)
            continue
        if room is not None:
            room -= added
        done.append(Version(name, None, values, added))
        funcs.append(dict(func, instrs=new))
    if not done:
        return prog, done
    return dict(prog, functions=funcs), done


def _function_version(func, values):
    """The instructions of `func` versioned on `values` (parameter -> value): a check
    at the entry, then the copy (its labels `trace.fv.L`, L the original's; its
    entry `trace.fv`), then the original code.  None if names clash."""
    instrs = func.get("instrs") or []
    taken = _names(func) | {ins["label"] for ins in instrs if "label" in ins}
    entry = f"{MARK}.fv"
    if any(t == entry or t.startswith(entry + ".") for t in taken):
        return None                 # (versioned before)
    rename = {ins["label"]: f"{entry}.{ins['label']}" for ins in instrs if "label" in ins}
    consts = {p: f"{entry}.k.{p}" for p in values}
    check, tests = [], []
    for i, p in enumerate(sorted(values)):
        v = values[p]
        kind = "bool" if type(v) is bool else "int"
        check.append({"op": "const", "dest": consts[p], "type": kind, "value": v})
        if kind == "bool" and v:
            tests.append(p)
            continue
        t = f"{entry}.t.{i}"
        check.append({"op": "not", "dest": t, "type": "bool", "args": [p]} if kind == "bool"
                     else {"op": "eq", "dest": t, "type": "bool", "args": [p, consts[p]]})
        tests.append(t)
    while len(tests) > 1:
        # (a conjunction of the tests, pairwise)
        t = f"{entry}.and.{len(tests)}"
        check.append({"op": "and", "dest": t, "type": "bool", "args": tests[:2]})
        tests = [t] + tests[2:]
    original = instrs[0]["label"] if instrs and "label" in instrs[0] else f"{entry}.orig"
    check.append({"op": "br", "args": [tests[0]], "labels": [entry, original]})
    copy = [{"label": entry}]
    for ins in instrs:
        if "label" in ins:
            copy.append({"label": rename[ins["label"]]})
            continue
        ins = dict(ins)
        if "labels" in ins:
            ins["labels"] = [rename.get(lab, lab) for lab in ins["labels"]]
        if "args" in ins:
            # (a `set`'s first argument names a shadow variable, not a value)
            keep = 1 if ins.get("op") == "set" else 0
            ins["args"] = ins["args"][:keep] + [consts.get(a, a) for a in ins["args"][keep:]]
        if ins.get("op") == "speculate" and ins.get(MARK) in rename:
            ins[MARK] = rename[ins[MARK]]
        copy.append(ins)
    # The copy ends the function (falling off its end returns); the original's
    # end, if it falls through, jumps over the copy to an empty block at the end.
    end = f"{entry}.end"
    body = list(instrs)
    if original == f"{entry}.orig":
        body.insert(0, {"label": original})
    last = body[-1] if body else None
    falls = last is None or "label" in last or last.get("op") not in ("jmp", "br", "ret")
    if falls:
        body.append({"op": "jmp", "labels": [end]})
    out = check + body + copy
    if falls:
        out.append({"label": end})
    return out


def _region(cfg, dom, header, loops):
    """What the copy of the loop of `header` holds: the loops of the blocks the
    header dominates (its own, and those of the traces spliced at it, whose loop
    parts and tails never come back to it), and the blocks it dominates on the
    way to them."""
    dominated = {b for b in cfg.blocks if dom.reachable(b) and dom.dominates(header, b)}
    cycles = set()
    for loop in loops:
        if loop.header in dominated:
            cycles.update(loop.body)
    region = set(cycles)
    todo = list(cycles)
    while todo:
        for p in cfg.preds[todo.pop()]:
            if p in dominated and p not in region:
                region.add(p)
                todo.append(p)
    return region


def _versioned(func, cfg, header, region, values):
    """The instructions of `func` with the loop of `header` (the blocks `region`)
    versioned on `values`, or None."""
    copy = loop_clone(cfg, header, region, label=lambda h, b: f"{h}.{MARK}.v.{b}")
    instrs = func.get("instrs") or []
    site = clone_site(instrs)
    if copy is None or site is None:
        return None
    taken = _names(func)
    consts = {}
    for v in sorted(values):
        k = f"{header}.{MARK}.vk.{v}"
        if k in taken:
            return None
        consts[v] = k
    test = f"{header}.{MARK}.vt"
    check_label = f"{header}.{MARK}.v"
    if test in taken or any(ins.get("label", "").startswith(check_label) for ins in instrs):
        return None                 # (versioned before)
    # The copy reads the constants instead of the variables.
    for ins in copy:
        if "args" in ins:
            ins["args"] = [consts.get(a, a) for a in ins["args"]]
    check = [{"label": check_label}]
    tests = []
    for i, v in enumerate(sorted(values)):
        check.append({"op": "const", "dest": consts[v], "type": "int", "value": values[v]})
        t = test if len(values) == 1 else f"{test}.{i}"
        if t in taken:
            return None
        check.append({"op": "eq", "dest": t, "type": "bool", "args": [v, consts[v]]})
        tests.append(t)
    while len(tests) > 1:
        # (a conjunction of the tests, pairwise)
        t = f"{tests[0]}.and"
        if t in taken:
            return None
        check.append({"op": "and", "dest": t, "type": "bool", "args": tests[:2]})
        tests = [t] + tests[2:]
    check.append({"op": "br", "args": [tests[0]],
                  "labels": [f"{header}.{MARK}.v.{header}", header]})
    block_of = {id(ins): name for name, blk in cfg.blocks.items() for ins in blk.instrs}
    out = []
    for i, ins in enumerate(instrs):
        if ins.get("label") == header:
            # Entries come through the check (a block falling into the header
            # from inside the loop jumps over it).
            prev = instrs[i - 1] if i else None
            falls = prev is not None and "op" in prev and prev["op"] not in ("jmp", "br", "ret")
            if falls and block_of.get(id(prev)) in region:
                out.append({"op": "jmp", "labels": [header]})
            out.extend(check)
        elif ins.get("op") in ("jmp", "br") and header in ins["labels"] \
                and block_of.get(id(ins)) not in region:
            ins = dict(ins, labels=[check_label if lab == header else lab
                                    for lab in ins["labels"]])
        if i == site:
            out.extend(copy)
        out.append(ins)
    if site == len(instrs):
        out.extend(copy)
    return out


def _names(func):
    names = {a["name"] for a in func.get("args") or []}
    for ins in func.get("instrs") or []:
        if "dest" in ins:
            names.add(ins["dest"])
        names.update(ins.get("args") or ())
    return names
