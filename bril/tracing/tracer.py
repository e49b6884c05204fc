"""`brili --trace`: record hot loops, build speculative traces, splice them in.

The pipeline, like a tracing JIT's but ahead of the next run:

0. run the original once, for the output and count the caller sees, and the
   program optimized with the `-O` pipeline (unless asked not to) in
   recording mode (`trace_record`): loop headers count their visits; once
   hot, every iteration's block path is recorded.  The original is recorded
   too (in its run) when it is large, or when `-O` grew it so much that the
   traces would have little room left (`OPTIMIZED_ROOM`);
1. per hot header, choose a chain of traces for its most frequent paths with
   the unrolling that pays best (`trace_select`, which builds candidates with
   `trace_build` and `trace_opt`, gives guards side exits where `trace_exit`
   proves them, and simulates the candidates over the recording);
2. splice the chains into a copy of the program (`splice`);
3. verify on the training input: the traced program must print the same as
   the original and execute no more instructions than the program the traces
   were spliced into; chains are dropped, the weakest first, until it does
   (a checking run is stopped, and counts as failed, once it takes far longer
   than the recording run did: a traced program can only loop forever
   through a tracer bug, and that must not hang `brili --trace`);
4. keep whichever verified program (original or `-O`, with or without traces,
   for both ways of selecting) executes the fewest instructions: they are
   checked in the order of their estimated counts, until none left is
   estimated to beat the best checked.

Spliced regions can be found again by every tool: the header keeps its label
and its code starts with an instruction carrying a `"trace"` field naming the
header (Bril tools ignore fields they do not know): a `speculate`, or the first
instruction of a region that needs no rollback; the original header code
moves to the label `H.trace.orig` (gone when no path reaches it any more); a
trace's repeating part is at `H.trace.loopJ`, the J-th trace of a chain starts
at `H.trace.cJ`, and resume points in the original code are labels
`H.trace.rN`, side-exit stubs `H.trace.xJ.N`.
"""

import copy
import io
import time
from ..ir.record import Record

from ..analysis.cfg import CFG
from ..ir.errors import BrilError, int_setting
from .trace_build import is_plain
from .trace_emit import clone_site, count_ops, loop_clone
from .trace_record import Recorder
from .trace_select import chain_instrs, choose_chain, code_cost


# A checking run is stopped after CHECK_TIME_SLACK + CHECK_TIME_FACTOR times
# the recording run's seconds (generous: a machine under load must not drop
# good traces).
CHECK_TIME_SLACK = 10.0
CHECK_TIME_FACTOR = 20.0
# What the chains spliced into a program may add, in times its instructions: a
# traced program is at most 1 + GROWTH_LIMIT times the size of the original.
# (Priced by the instruction, a long run pays for any unrolling: harmonic-sum's
# traced program was 8x the original, its code loaded and compiled by every run.)
GROWTH_LIMIT = 2
# A program of at most this many instructions is recorded only as `-O` makes it
# (the original runs at full speed, for the output): recording both and
# choosing traces in both cost 1.18x the time (`bench_trace.py --time`, 10
# loop-heavy programs, 2026-11-25) for a count geomean of 0.7948 instead of
# 0.8051 on the 49 loop-heavy ones -- nearly all of it on the programs of the
# exception below.  A larger one is recorded as it is first, and `-O` is tried
# only if a loop got hot (its cost grows with the program, the run's does not).
SMALL_PROGRAM = 500
# ... unless `-O` took more than this share of the room the traces may grow the
# program by (`GROWTH_LIMIT`), counting the functions it inlined everywhere
# (dropped from it, but their copies made its loops larger): then the original,
# where the traces have more room, is recorded and traced too (oscillator, 69 ->
# 155 instructions under `-O`: traced 0.698x as the original, 0.907x as `-O`,
# whose chain cannot fit).
OPTIMIZED_ROOM = 0.5
# Block events a recording run takes in (each counted once plus once per iteration
# being recorded that it joins); then the recorder stops listening and the program
# runs on at full speed (the traces are chosen from that prefix of the run, what
# it shows of the loops still running scaled to the whole run by the share of the
# run's instructions it took in, `Recorder.scale_to`; the checking runs judge them
# on the whole of it).  30,000 (measured 2026-11-25 with `bench_trace.py`, count
# geomeans all 131 / 49 loop-heavy programs): 100,000 0.7087 / 0.7980, 50,000
# 0.7072 / 0.7937, 30,000 0.7076 / 0.7948, 15,000 0.7080 / 0.7923; `--train alt`
# 100,000 0.7084 / 0.7973, 30,000 0.7083 / 0.7967; tracing / plain run (`--time`
# on 10 loop-heavy programs) 4.04x -> 3.55x geomean.  (300,000 before the
# scaling.)  BRIL_TRACE_BUDGET: another budget (experiments).
RECORD_BUDGET = int_setting("BRIL_TRACE_BUDGET", 30_000)


def select(funcs, infos, recorder, first_exits=True, price=None, room=None, free=0):
    """The chains worth splicing, the most worth first (`Chain.worth`; `price`: what
    an added instruction costs, default `trace_cost.GROWTH_PRICE`, `free`
    instructions in all at a discount), adding at most `room` instructions in all
    (None: no limit)."""
    livecache = {}
    chains = []
    for (fname, _), st in recorder.loops.items():
        if st.counts and is_plain(funcs[fname]):
            ch = choose_chain(funcs, infos, st, livecache, first_exits=first_exits,
                              price=price, max_added=room, free=free)
            if ch is not None:
                chains.append(ch)
    chains.sort(key=lambda c: -c.worth)
    if free:
        # The discounted instructions are shared: each chain, the most worth
        # first, takes what is left of them, and must still be worth something.
        kept = []
        for ch in chains:
            ch.free = free
            if ch.worth > 0:
                kept.append(ch)
                free -= min(free, ch.added)
        chains = kept
        chains.sort(key=lambda c: -c.worth)
    if room is not None:
        # The most worth first, while they fit.
        kept = []
        for ch in chains:
            if ch.added <= room:
                kept.append(ch)
                room -= ch.added
        chains = kept
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
        tails = []
        for ch in chs:
            h = next(i for i, ins in enumerate(instrs) if ins.get("label") == ch.header)
            code, needed = chain_instrs(ch)
            before.setdefault(h + 1, []).extend(code)
            if ch.tail:
                tails.extend(loop_clone(CFG.from_function(func), ch.header, ch.body))
            for site, labs in needed.items():
                labels.setdefault(site, set()).update(labs)
        if tails:
            # Copies of loops, where nothing falls into them.
            before.setdefault(clone_site(instrs), []).extend(tails)
        out = []
        for i in range(len(instrs) + 1):
            out.extend(before.get(i, ()))       # a chain, right after its header label
            out.extend({"label": lab} for lab in sorted(labels.get(i, ())))
            if i < len(instrs):
                out.append(instrs[i])
        func["instrs"] = _reachable_code(out)
    return prog


def _reachable_code(instrs):
    """`instrs` without the blocks no path reaches: code a splice left behind
    (the header's original code when every entry guard fails elsewhere, a loop
    copy no exit took) would cost every engine's set-up and the size limit,
    and run never.  Left whole where a `phi` names predecessor blocks."""
    if any(i.get("op") == "phi" for i in instrs):
        return instrs
    cfg = CFG.from_instrs(instrs)
    return cfg.to_instrs() if cfg.remove_unreachable() else instrs


class TraceResult(Record):
    # program: dict
    # chains: list
    # original_count: int
    # traced_count: int
    # output: str  # what the training run printed
    # traced_output: str  # what the traced program printed on the training input
    # dropped: list = []
    # max_header_visits: int = 0  # the busiest loop header's visits in the training run
    # optimized: bool = False  # traces were spliced into the `-O` program
    # base_count: int = 0  # the program traces were spliced into, on the training input
    # versions: list = []  # loops versioned on invariant values (`bril.tracing.specialize`)
    # growth_cost: float = 0  # what the chains' code costs at the price, in instructions
    fields = ('program', 'chains', 'original_count', 'traced_count', 'output', 'traced_output',
              'dropped', 'max_header_visits', 'optimized', 'base_count', 'versions',
              'growth_cost')
    defaults = {'dropped': list, 'max_header_visits': 0, 'optimized': False, 'base_count': 0,
                'versions': list, 'growth_cost': 0}


def _optimized(prog):
    """The `-O` program without the functions it no longer calls (inlined at
    every call: their code would only take room traces could use)."""
    return _optimized_sized(prog)[0]


def _optimized_sized(prog):
    """(`_optimized(prog)` or None, the `-O` program's size with those functions:
    what inlining grew it by tells how much larger its loops got)."""
    from ..passes.inline import prune_functions
    from ..passes.registry import optimize
    try:
        full = optimize(prog)
        return prune_functions(full), _size(full)
    except (BrilError, RecursionError):
        return None, None


def trace_program(prog, argv, *, hot=56, out=None, run=None, record=None, optimize=True,
                  passes=(), cache=None, growth_price=None, specialize=False):
    """Run `prog` on `argv` (printing to `out` if given) and return a
    TraceResult whose program has the paying traces spliced in.

    With `optimize` (the default) the program is also optimized with the
    `-O` pipeline and traces are recorded on, and spliced into, the optimized
    program (and the original, when it is recorded: `SMALL_PROGRAM`,
    `OPTIMIZED_ROOM`); the result is whichever of the traced original, the
    optimized program alone and the traced optimized program executes the
    fewest instructions on the training input (so never more than `-O`
    alone).  The output and count of the run (`out`, `original_count`) are
    the original program's.  The optimized program is a candidate only if it
    prints the same on the training input and executes no more instructions.

    `record(prog, argv, out, recorder) -> count` runs a program in recording
    mode, `run(prog, argv) -> (stdout, count)` runs one silently (defaults:
    the interpreter's).  Bril errors in the training run propagate.

    `passes`: plug-in passes (`bril.passes.registry.Pass`) run on each trace's
    straight-line code before it is spliced (`bril.tracing.trace_plugin`).

    `cache`: a `bril.cache.codecache.CodeCache` for the default checking runs (the
    functions no trace changed are not generated again).

    `growth_price`: what each instruction a chain adds costs, in instructions it
    must save on the training input (default `trace_cost.GROWTH_PRICE`: traces
    chosen for time; 0: for instruction counts alone, however large)."""
    from . import trace_plugin
    trace_plugin.PASSES[:] = passes
    try:
        return _trace_program(prog, argv, hot, out, run, record, optimize, cache, growth_price,
                              specialize)
    finally:
        trace_plugin.PASSES[:] = []


def _trace_program(prog, argv, hot, out, run, record, optimize, cache, price, specialize):
    from ..interpreter import interp
    from .trace_cost import GROWTH_PRICE, free_growth
    forkable = record is None
    record = record or interp.run_recording
    largest = None              # instructions a traced program may have
    if GROWTH_PRICE if price is None else price:
        # (chosen for instruction counts alone, at price 0, there is no limit either)
        largest = (1 + GROWTH_LIMIT) * _size(prog)
    # A small program is recorded only as `-O` makes it, unless `-O` took more
    # than half the room traces may grow the program by (`OPTIMIZED_ROOM`).
    small = optimize and _size(prog) <= SMALL_PROGRAM
    child = None
    if small and forkable:
        # The original runs (for the output and count the caller sees) in a
        # child process, on the other core, while this one optimizes and
        # records `-O` (if `-O` grew too much, the original is recorded here).
        from . import forked
        child = forked.start(_original_run_data, prog, argv, hot, specialize)
    original = base_run = None
    try:
        base, grown = _optimized_sized(prog) if small else (None, None)
        only_optimized = base is not None and (
            largest is None
            or grown - _size(prog) <= OPTIMIZED_ROOM * (largest - _size(prog)))
        if child is not None and only_optimized:
            base_run = _record_base(base, argv, hot, specialize, record)
            data, child = child.result(), None
            if data is not None:
                output, count, elapsed, error = data
                original = (output, count, elapsed,
                            None if error is None else BrilError(error[0], error[1]), None)
    finally:
        if child is not None:
            child.cancel()
    if original is None:
        original = _original_run(prog, argv, hot, specialize, record,
                                 0 if only_optimized else RECORD_BUDGET)
    original_out, count, elapsed, error, rec = original
    if out is not None:
        out.write(original_out)
        out.flush()
    if error is not None:
        raise error
    if run is None:
        # A traced program that keeps its promise runs no more instructions
        # than the original, without a recorder: far beyond the time of that
        # run (with its recording overhead if recorded) is a hang.
        deadline = CHECK_TIME_SLACK + CHECK_TIME_FACTOR * elapsed
        run = lambda p, a: interp.run_capture(p, a, timeout=deadline, cache=cache)  # noqa: E731
    # Candidates: traces in the original if recorded, traces in the `-O` program
    # (recorded in a run that also checks it: the same output, no more
    # instructions), and the `-O` program alone.
    bases = []
    if not only_optimized:
        rec.scale_to(count)
        if not any(st.counts for st in rec.loops.values()):
            # Nothing got hot: no loop to trace, no recording of `-O`; a small
            # program's `-O` alone, checked by one plain run.
            if base is not None:
                try:
                    o_out, o_count = run(base, argv)
                except BrilError:
                    o_out = None
                if o_out == original_out and o_count <= count:
                    return TraceResult(base, [], count, o_count, original_out, o_out, [],
                                       rec.max_visits(), True, o_count)
            return TraceResult(prog, [], count, count, original_out, original_out, [],
                               rec.max_visits(), False, count)
        bases.append((False, prog, rec, count))
        if optimize and base is None:
            base = _optimized(prog)         # (a large program: only once a loop got hot)
    if base is not None:
        orec, o_out, ocount = base_run or _record_base(base, argv, hot, specialize, record)
        if ocount is not None and o_out == original_out and ocount <= count:
            orec.scale_to(ocount)
            bases.insert(0, (True, base, orec, ocount))
    if not bases:
        # `-O` failed its check: the original recorded after all.
        rec = _recorder(prog, hot, values=specialize)
        record(prog, argv, io.StringIO(), rec)
        rec.scale_to(count)
        bases.append((False, prog, rec, count))
    visits = bases[0][2].max_visits()
    if not any(st.counts for _, _, r, _ in bases for st in r.loops.values()):
        # Nothing got hot: the `-O` program alone if it passed its check.
        optimized, base, _, base_count = bases[0]
        return TraceResult(base, [], count, base_count, original_out, original_out, [],
                           visits, optimized, base_count)
    options = []
    for entry in bases:
        options += _options(entry, largest, price, len(options),
                            free_growth(count, GROWTH_PRICE if price is None else price))
    # Checked in the order of their estimated worth (count plus the price of the
    # code added; the gains stand for the whole run: `Recorder.scale_to`), until
    # none left is estimated to beat the best checked: each check is a whole run.
    # Ties go to the `-O` program (tried first).
    options.sort(key=lambda o: o[:2])
    best = None
    for estimate, _, optimized, base, base_count, chains in options:
        if best is not None and best[1] <= estimate:
            break
        found = _paying(base, chains, argv, run, original_out, base_count)
        worth = found[3] + found[5]         # (its count, plus what its code costs)
        if best is None or worth < best[1]:
            best = (found, worth, optimized, base_count)
    (traced, chains, t_out, t_count, dropped, cost), _, optimized, base_count = best
    result = TraceResult(traced, chains, count, t_count, original_out, t_out, dropped, visits,
                         optimized, base_count, growth_cost=cost)
    if specialize:
        brec = next(r for o, _, r, _ in bases if o == optimized)
        _specialized(result, brec, argv, run, largest)
    return result


def _original_run(prog, argv, hot, specialize, record=None, budget=0):
    """The run whose output and count the caller sees: (output, count, seconds,
    the BrilError it ended with or None, its recorder).  Budget 0: not recorded,
    the original runs at full speed."""
    from ..interpreter import interp
    record = record or interp.run_recording
    buf = io.StringIO()
    started = time.perf_counter()
    rec = _recorder(prog, hot, budget, specialize)
    try:
        count = record(prog, argv, buf, rec)
    except BrilError as e:
        return buf.getvalue(), None, 0.0, e, None
    # (budget 0: a recorder that heard nothing, not returned; a child could not send it)
    return buf.getvalue(), count, time.perf_counter() - started, None, rec if budget else None


def _original_run_data(prog, argv, hot, specialize):
    """`_original_run` in a child process: what it sends back (`bril.tracing.forked`)."""
    output, count, elapsed, error, _ = _original_run(prog, argv, hot, specialize)
    return output, count, elapsed, None if error is None else (error.message, error.pos)


def _record_base(base, argv, hot, specialize, record):
    """The `-O` program's recording run: (recorder, output, count or None if it failed)."""
    orec = _recorder(base, hot, values=specialize)
    obuf = io.StringIO()
    try:
        ocount = record(base, argv, obuf, orec)
    except BrilError:
        ocount = None
    return orec, obuf.getvalue(), ocount


def _specialized(result, recorder, argv, run, largest):
    """Version `result`'s hot loops on their invariant values, and its functions on
    the values nearly every call passes (`bril.tracing.specialize`), kept if the
    program still prints the same on the training input."""
    from .specialize import specialize, specialize_calls
    room = None if largest is None else max(0, largest - _size(result.program))
    prog, versions = specialize(result.program, recorder.loops, room)
    # (functions' copies may take the program past the traces' limit, up to twice
    # its size: asked for, for native code, where size costs less)
    room = None if largest is None else max(largest, 2 * _size(prog)) - _size(prog)
    prog, calls = specialize_calls(prog, recorder.calls, recorder.loops, recorder.funcs, room,
                                   {(v.func, var) for v in versions for var in v.values})
    versions += calls
    if not versions:
        return
    try:
        out, count = run(prog, argv)
    except BrilError:
        return
    if out == result.output:
        result.program, result.traced_output, result.traced_count = prog, out, count
        result.versions = versions


def _options(entry, largest, price, first=0, free=0):
    """The selections for one recorded base, each as (estimated count, rank,
    optimized, base, base count, chains); `largest`: the instructions a traced
    program may have (None: any)."""
    optimized, base, brec, base_count = entry
    room = None if largest is None else max(0, largest - _size(base))
    options = []
    for first_exits in (True, False):
        chains = select(brec.funcs, brec.infos, brec, first_exits, price, room, free)
        estimate = base_count - sum(ch.worth for ch in chains)
        options.append((estimate, first + len(options), optimized, base, base_count, chains))
        if not any(t.first_exits for ch in chains for t in ch.traces):
            break           # the second selection would be the same
    return options


def _paying(base, chains, argv, run, original_out, base_count):
    """Splice `chains` into `base`, dropping the weakest until the result prints
    what the original printed and saves, on the training input, at least what
    the code it adds costs (`_code_cost`; none at price 0: no more instructions
    than `base`): (program, chains kept, output, count, chains dropped, that cost).

    The estimate a chain was chosen by can be far off (a loop whose behaviour
    changes after the recorder stopped listening: state-machine's trace was
    estimated to save 69,198 instructions and saved 7,054), so the price is
    charged again on what the checking run counted."""
    dropped = []
    while True:
        if not chains:
            return base, chains, original_out, base_count, dropped, 0
        traced = splice(base, chains)
        cost = _code_cost(chains, _size(traced) - _size(base))
        try:
            t_out, t_count = run(traced, argv)
        except BrilError:
            t_out, t_count = None, None
        if t_out == original_out and t_count + cost <= base_count:
            return traced, chains, t_out, t_count, dropped, cost
        weakest = chains[-1]
        if len(weakest.traces) > 1:
            # First try it with its main trace only (each extra trace in a
            # chain costs every pass that falls through to it).
            weakest.traces = weakest.traces[:1]
            weakest.entries, weakest.aborts = weakest.entries[:1], weakest.aborts[:1]
        else:
            dropped.append(chains.pop())


def _code_cost(chains, growth):
    """What the `growth` instructions the chains add cost, in instructions they
    must save (`trace_select.code_cost`: at their price, the discounted ones
    shared among them, as `select` shares them)."""
    if not chains:
        return 0
    return code_cost(growth, chains[0].price, max(ch.free for ch in chains))


def _size(prog):
    return sum(count_ops(f.get("instrs") or ()) for f in prog["functions"])


def _recorder(prog, hot, budget=RECORD_BUDGET, values=False):
    funcs = {f["name"]: f for f in prog["functions"]}
    return Recorder(funcs, {}, hot=hot, budget=budget, values=values)


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
        "optimized": result.optimized,
        "base_count": result.base_count,
        "traced_count": result.traced_count,
        "code_cost": round(result.growth_cost),
        "traces": [dict(trace(ch, j, t), saved_estimate=int(ch.gain) if j == 0 else None)
                   for ch in result.chains for j, t in enumerate(ch.traces)],
        "dropped": [{"func": ch.func, "header": ch.header, "saved_estimate": int(ch.gain)}
                    for ch in result.dropped],
        "versions": [{"func": v.func, "header": v.header, "values": v.values,
                      "instrs_added": v.added} for v in result.versions],
    }


def report_text(result):
    """The trace report for people: one line per trace."""
    o, t = result.original_count, result.traced_count
    lines = [f"trace report: original {o} dyn instrs, "
             + (f"-O {result.base_count} ({result.base_count / max(o, 1):.3f}x), "
                if result.optimized else "")
             + f"traced {t} ({t / max(o, 1):.3f}x)"
             + (f", its traces' code priced at ~{round(result.growth_cost)}"
                if result.growth_cost else "")]
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
    for v in result.versions:
        on = ", ".join(f"{var} = {x}" for var, x in sorted(v.values.items()))
        where = f".{v.header}" if v.header is not None else "(its calls)"
        lines.append(f"  @{v.func} {where}: versioned on {on} (+{v.added} instrs)")
    return lines


__all__ = ["TraceResult", "report", "report_text", "select", "splice", "trace_program"]
