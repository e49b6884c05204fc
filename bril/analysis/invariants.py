"""Values invariant at run time that a compiler lacks: @main's arguments, fixed for a
run, which native code can take as constants where its loops compute with them (a
modulus, a base: LLVM turns a division by a constant into a multiplication).  Read
by `brilc --profile`'s variants (`bril.backend.llvm_lower`) and the JIT's regions
of @main (`bril.backend.jit`, `bril.backend.jit_server`)."""

# Operands of these count only when arithmetic reads the variable too: a trip count,
# which only comparisons read, is the input's size, which changes from run to run
# (and one value differing sends a run to the generic code); a modulus, a base, a
# multiplier -- where LLVM gains from a constant -- do not.
_COMPARISONS = frozenset(("eq", "lt", "gt", "le", "ge", "feq", "flt", "fgt", "fle", "fge"))


def invariants_in_loops(instrs):
    """The variables never assigned that instructions inside a loop read, comparisons
    aside (between a label and a later jump back to it, in the text's order: a cycle
    of blocks needs such a jump) -- directly, or through a variable assigned once, by
    an `id` of one, as a dynamic language's front end copies @main's typed arguments
    into `any` variables."""
    assigned = {}
    for instr in instrs:
        if "dest" in instr:
            assigned[instr["dest"]] = assigned.get(instr["dest"], 0) + 1
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
    read = set()
    depth = 0
    for instr, change in zip(instrs, opened):
        depth += change
        if depth and instr.get("op") not in _COMPARISONS:
            read.update(instr.get("args") or ())
    read.update(instr["args"][0] for instr in instrs
                if instr.get("op") == "id" and instr.get("args")
                and instr.get("dest") in read and assigned[instr["dest"]] == 1)
    return {name for name in read if name not in assigned}


def main_constants(linked, main_args):
    """{parameter: value} of @main's int arguments (`main_args`: the run's, by name)
    that its loops compute with and it never assigns -- each the same wherever
    @main's code runs, as no function calls @main (else {}).  A unit of @main's
    code compiled with them holds for this run only: its cache key names them."""
    main = linked.functions[linked.main_index()]
    typed = {a["name"] for a in main.get("args") or [] if a.get("type") == "int"}
    if not typed or any(instr.get("op") == "call" and "main" in (instr.get("funcs") or ())
                        for f in linked.functions for instr in f.get("instrs") or ()):
        return {}
    looped = invariants_in_loops(main.get("instrs") or ())
    return {p: v for p, v in sorted(main_args.items())
            if p in typed and p in looped and type(v) is int}
