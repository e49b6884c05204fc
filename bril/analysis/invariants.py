"""Values invariant at run time that a compiler lacks, and where taking one as a
constant pays: @main's arguments, fixed for a run, and the values nearly every
call of a function passes (a type profile's, `bril.interpreter.type_profile`).
Native code takes them as constants where loops compute with them (a modulus, a
base, a stride: LLVM turns a division by a constant into a multiplication) or
where one bounds a short loop (a point's dimension: LLVM unrolls the loop whole).
Read by `brilc --profile`'s variants and those of the executable `brili` builds
(`bril.backend.llvm_lower`) and by the JIT's regions of @main (`bril.backend.jit`,
`bril.backend.jit_server`)."""

# Operands of these count only when arithmetic reads the variable too: a trip count,
# which only comparisons read, is most often the input's size, which changes from
# run to run (and one value differing sends a run to the generic code); a modulus, a
# base, a multiplier -- where LLVM gains from a constant -- do not.
_COMPARISONS = frozenset(("eq", "lt", "gt", "le", "ge", "feq", "flt", "fgt", "fle", "fge"))
# ... except a short trip count: a loop of at most this many rounds, its bound
# known, is unrolled whole (benchmarks/spec/closest's points of 3 coordinates: 0.7x
# the plain executable's time).
SHORT_TRIP = 16


def _in_loops(instrs):
    """Per instruction, is it inside a loop (between a label and a later jump back
    to it, in the text's order: a cycle of blocks needs such a jump)?"""
    at = {}
    opened = [0] * (len(instrs) + 1)        # loops opening (+1) and closing (-1) here
    for i, instr in enumerate(instrs):
        if "label" in instr:
            at[instr["label"]] = i
        elif instr.get("op") in ("jmp", "br", "guard"):
            for label in instr.get("labels") or ():
                if label in at:
                    opened[at[label]] += 1
                    opened[i + 1] -= 1
    inside, depth = [], 0
    for change in opened[:-1]:
        depth += change
        inside.append(depth > 0)
    return inside


def _loop_reads(instrs):
    """({variable never assigned that instructions inside a loop read, comparisons
    aside}, {... that only comparisons inside a loop read}) -- directly, or through a
    variable assigned once, by an `id` of one, as a dynamic language's front end
    copies @main's typed arguments into `any` variables."""
    assigned = {}
    for instr in instrs:
        if "dest" in instr:
            assigned[instr["dest"]] = assigned.get(instr["dest"], 0) + 1
    read, compared = set(), set()
    for instr, inside in zip(instrs, _in_loops(instrs)):
        if inside:
            (compared if instr.get("op") in _COMPARISONS else read).update(
                instr.get("args") or ())
    for names in (read, compared):
        names.update(instr["args"][0] for instr in instrs
                     if instr.get("op") == "id" and instr.get("args")
                     and instr.get("dest") in names and assigned[instr["dest"]] == 1)
    read = {name for name in read if name not in assigned}
    return read, {name for name in compared if name not in assigned and name not in read}


def worth_constants(instrs, values, main=False):
    """{parameter: value} of `values` (int and bool parameters of a function whose
    instructions are `instrs`, each assumed to hold that value on entry) where a
    constant pays.  Not a trip count only its loops' comparisons read, unless short
    (0..SHORT_TRIP); of @main (called once), only those its loops compute with and
    short trip counts, never assigned."""
    read, compared = _loop_reads(instrs)
    short = {p for p in compared if type(values.get(p)) is int and 0 <= values[p] <= SHORT_TRIP}
    if main:
        return {p: v for p, v in values.items() if p in read or p in short}
    return {p: v for p, v in values.items() if p not in compared or p in short}


def main_constants(linked, main_args):
    """{parameter: value} of @main's int arguments (`main_args`: the run's, by name)
    that it never assigns, where a constant pays (`worth_constants`) -- each the
    same wherever @main's code runs, as no function calls @main (else {}).  A unit
    of @main's code compiled with them holds for this run only: its cache key names
    them."""
    main = linked.functions[linked.main_index()]
    typed = {a["name"] for a in main.get("args") or [] if a.get("type") == "int"}
    if not typed or any(instr.get("op") == "call" and "main" in (instr.get("funcs") or ())
                        for f in linked.functions for instr in f.get("instrs") or ()):
        return {}
    return worth_constants(main.get("instrs") or (),
                           {p: v for p, v in sorted(main_args.items())
                            if p in typed and type(v) is int}, main=True)
