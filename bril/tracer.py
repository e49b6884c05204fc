"""`brili --trace`: record hot loops, build speculative traces, splice them in.

The pipeline, like a tracing JIT's but ahead of the next run:

1. run the program once in recording mode (`trace_record`): loop headers
   count their visits; once hot, every iteration's block path is recorded;
2. per hot header, choose a chain of traces for its most frequent paths with
   the unrolling that pays best (`trace_select`, which builds candidates with
   `trace_build` and `trace_opt` and simulates them over the recording);
3. splice the chains into a copy of the program (`splice`);
4. verify on the training input: the traced program must print the same and
   execute no more instructions than the original; chains are dropped, the
   weakest first, until it does.

Spliced regions can be found again by every tool: the header keeps its label
and its code starts with a `speculate` carrying a `"trace"` field naming the
header (Bril tools ignore fields they do not know); the original header code
moves to the label `H.trace.orig`; a trace's repeating part is at
`H.trace.loopJ`, the J-th trace of a chain starts at `H.trace.cJ`, and resume
points in the original code are labels `H.trace.rN`.
"""

import copy
import io
from dataclasses import dataclass, field

from .errors import BrilError
from .trace_build import is_plain
from .trace_record import Recorder
from .trace_select import MARK, chain_instrs, choose_chain


def select(funcs, infos, recorder):
    """The chains worth splicing, best estimated gain first."""
    livecache = {}
    chains = []
    for (fname, _), st in recorder.loops.items():
        if st.counts and is_plain(funcs[fname]):
            ch = choose_chain(funcs, infos, st, livecache)
            if ch is not None:
                chains.append(ch)
    chains.sort(key=lambda c: -c.gain)
    return chains


def splice(prog, chains):
    """A copy of `prog` with the chains spliced in after their header labels."""
    prog = copy.deepcopy(prog)
    by_func = {}
    for ch in chains:
        by_func.setdefault(ch.func, []).append(ch)
    for func in prog["functions"]:
        chs = by_func.get(func["name"])
        if not chs:
            continue
        instrs = func["instrs"]
        before = {}                         # index -> instructions to insert before it
        labels = {}                         # index -> resume labels to insert before it
        for ch in chs:
            h = next(i for i, ins in enumerate(instrs) if ins.get("label") == ch.header)
            code, needed = chain_instrs(ch)
            before.setdefault(h + 1, []).extend(code)
            for site, labs in needed.items():
                labels.setdefault(site, set()).update(labs)
        out = []
        for i in range(len(instrs) + 1):
            out.extend(before.get(i, ()))       # a chain, right after its header label
            out.extend({"label": lab} for lab in sorted(labels.get(i, ())))
            if i < len(instrs):
                out.append(instrs[i])
        func["instrs"] = out
    return prog


@dataclass
class TraceResult:
    program: dict
    chains: list
    original_count: int
    traced_count: int
    output: str                     # what the training run printed
    traced_output: str              # what the traced program printed on the training input
    dropped: list = field(default_factory=list)
    max_header_visits: int = 0      # the busiest loop header's visits in the training run


def trace_program(prog, argv, *, hot=56, out=None, run=None, record=None):
    """Run `prog` on `argv` (printing to `out` if given) and return a
    TraceResult whose program has the paying traces spliced in.

    `record(prog, argv, out, recorder) -> count` runs a program in recording
    mode, `run(prog, argv) -> (stdout, count)` runs one silently (defaults:
    the interpreter's).  Bril errors in the training run propagate."""
    from . import interp
    record = record or interp.run_recording
    run = run or interp.run_capture
    funcs = {f["name"]: f for f in prog["functions"]}
    infos = {}
    rec = Recorder(funcs, infos, hot=hot)
    buf = io.StringIO()
    try:
        count = record(prog, argv, buf, rec)
    finally:
        if out is not None:
            out.write(buf.getvalue())
            out.flush()
    original_out = buf.getvalue()
    chains = select(funcs, infos, rec)
    dropped = []
    while True:
        if not chains:
            traced, t_out, t_count = prog, original_out, count
            break
        traced = splice(prog, chains)
        try:
            t_out, t_count = run(traced, argv)
        except BrilError:
            t_out, t_count = None, None
        if t_out == original_out and t_count <= count:
            break
        weakest = chains[-1]
        if len(weakest.traces) > 1:
            # First try it with its main trace only (each extra trace in a
            # chain costs every pass that falls through to it).
            weakest.traces = weakest.traces[:1]
            weakest.entries, weakest.aborts = weakest.entries[:1], weakest.aborts[:1]
        else:
            dropped.append(chains.pop())
    visits = max((st.visits for st in rec.loops.values()), default=0)
    return TraceResult(traced, chains, count, t_count, original_out, t_out, dropped, visits)


def report(result):
    """The trace report as a JSON-ready dict (what `--trace-report` writes)."""
    def trace(ch, j, t):
        return {"func": t.func, "header": t.header, "chain_position": j,
                "unroll": t.unroll, "path": t.path, "blocks": t.blocks,
                "instrs_replaced": t.replaced, "cost_first": t.cost_pre,
                "cost_loop": t.cost_loop, "guards": t.guards, "inlined_calls": t.inlined,
                "cut": t.cut, "entries": ch.entries[j], "aborts": ch.aborts[j]}

    return {
        "original_count": result.original_count,
        "traced_count": result.traced_count,
        "traces": [dict(trace(ch, j, t), saved_estimate=int(ch.gain) if j == 0 else None)
                   for ch in result.chains for j, t in enumerate(ch.traces)],
        "dropped": [{"func": ch.func, "header": ch.header, "saved_estimate": int(ch.gain)}
                    for ch in result.dropped],
    }


def report_text(result):
    """The trace report for people: one line per trace."""
    o, t = result.original_count, result.traced_count
    lines = [f"trace report: original {o} dyn instrs, traced {t} ({t / max(o, 1):.3f}x)"]
    for ch in result.chains:
        for j, tr in enumerate(ch.traces):
            lines.append(
                f"  @{tr.func} .{tr.header}{f' (chain {j})' if j else ''}: unroll {tr.unroll}, "
                f"{tr.blocks} blocks, {tr.replaced} instrs -> first {tr.cost_pre} / then "
                f"{tr.cost_loop}, {tr.guards} guards, {tr.inlined} calls inlined"
                f"{', cut' if tr.cut else ''}; est. entries {ch.entries[j]}, aborts "
                f"{ch.aborts[j]}" + (f", saves ~{int(ch.gain)}" if j == 0 else ""))
    for ch in result.dropped:
        lines.append(f"  dropped @{ch.func} .{ch.header}: did not pay on the training run")
    return lines


__all__ = ["MARK", "TraceResult", "report", "report_text", "select", "splice", "trace_program"]
