"""How traced code is marked in a program: the one convention every tool that
finds a trace again reads (the tracer writes it; native lowering, `bril2dot`
and the tests read it).

A trace spliced at loop header H is entered by a `speculate` instruction whose
extra field `MARK` names H (Bril tools ignore fields they do not know), and the
blocks the tracer makes are labelled `H.trace.<part>`:

    H.trace.loopJ     the repeating part of trace J, after its first pass
    H.trace.cJ        the J-th later trace of a chain (the first starts at H)
    H.trace.orig      H's original code, where every trace's entry guard failed
    H.trace.rS        a resume point: the original code from site S on
    H.trace.xT.N      exit stubs; H.trace.kT.N copies; H.trace.t.B the loop's tail
    H.trace.v...      a loop versioned on a value (`bril.tracing.specialize`)
"""

MARK = "trace"


def prefix(header):
    """The start of every label the tracer makes for a trace at `header`."""
    return f"{header}.{MARK}."


def loop_label(header, tag):
    """The label of a trace's repeating part (`tag`: its trace's), after its first pass."""
    return f"{header}.{MARK}.loop{tag}"


def is_loop_label(label):
    """Is `label` (or None) a trace's repeating part (`loop_label`)?"""
    return bool(label) and label.rpartition(f".{MARK}.loop")[2].isdigit()


def chain_label(header, j):
    """Where the j-th trace of a chain starts: the header itself for the first."""
    return f"{header}.{MARK}.c{j}" if j else header


def orig_label(header):
    """The header's original code, reached when every trace's entry guard failed."""
    return f"{header}.{MARK}.orig"


def resume_label(header, site):
    """A resume point: the original code of the trace at `header` from site `site` on."""
    return f"{header}.{MARK}.r{site}"


def part(header, label):
    """What follows `H.trace.` in `label` for the trace at `header`, or None."""
    p = prefix(header)
    return label[len(p):] if label and label.startswith(p) else None


def is_trace_part(rest):
    """Is a `part` code of the trace itself (a repeating part, a later trace of its
    chain), rather than original code (`orig`, resume points, the loop's tail)?"""
    return ((rest.startswith("loop") and (rest == "loop" or rest[4:].isdecimal()))
            or (rest.startswith("c") and rest[1:].isdecimal()))


def is_resume_part(rest):
    """Is a `part` a resume point (`resume_label`)?"""
    return rest.startswith("r") and rest[1:].isdecimal()


ORIG_PART = "orig"
