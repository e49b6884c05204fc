"""Recording in every engine tier: the trace recorder hears the same events.

`brili --trace` records in the tiered engine: the cold tier reports function
entries, blocks and returns itself, and hot functions move to their record
variants (`record`, and `osrrecord` for a loop entered by on-stack
replacement).  The events -- and so the traces built from them -- must be
exactly those of the record variants run from the start (tier "fast"), for
every program of the corpus and ours, whenever functions get promoted.
"""

import gc
import io
import json

import pytest

from bril.interpreter import interp
from bril.ir.errors import BrilError
from bril.ir.text import parse_program
from bril.tracing.trace_record import Recorder

from corpus import CONFORMANCE, args_of, benchmark_cases, smaller_args

CASES = benchmark_cases()

# Ways to run: never promoted, promoted at the first backward jump or second call
# (on-stack replacement into osrrecord variants everywhere), after a few
# instructions, and by the engine's own budget.
TIERS = [dict(tier="cold"), dict(tier="auto", promote_after=0),
         dict(tier="auto", promote_after=50), dict(tier="auto")]


# Block events a test recorder takes in before it ends the run: what the tracer's
# Recorder hears before its budget (`bril.tracing.tracer.RECORD_BUDGET`, 30,000
# weighted events) three times over, with every promotion of a run's first part.
LISTEN = 100_000


class Enough(Exception):
    """Raised by a Listener once it has heard LISTEN block events: the run ends."""


class Listener:
    """A recorder that takes in the first LISTEN block events (entries and returns
    between them too) and then ends the run; `event` gets each one."""

    def __init__(self):
        self.left = LISTEN
        self.stopped = False

    def enter(self, fname):
        self.event(("enter", fname))

    def block(self, fname, bname):
        self.event((fname, bname))
        self.left -= 1
        if self.left <= 0:
            self.stopped = True
            raise Enough

    def leave(self):
        self.event(("leave",))


class Log(Listener):
    """Keeps every event it hears."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.event = self.events.append


class Compare(Listener):
    """Checks each event against those a Log kept (a second list of them all costs
    more than the run); `mismatch` is the first difference, as (index, expected,
    got), or None."""

    def __init__(self, events):
        super().__init__()
        self.expected = events
        self.n = 0
        self.mismatch = None

    def event(self, event):
        if self.mismatch is None:
            want = self.expected[self.n] if self.n < len(self.expected) else None
            if event != want:
                self.mismatch = (self.n, want, event)
        self.n += 1


def record(prog, args, recorder, **options):
    out = io.StringIO()
    # (no cyclic garbage collection meanwhile: a Log keeps LISTEN tuples, and
    # each collection would walk them all)
    enabled = gc.isenabled()
    gc.disable()
    try:
        count = interp.run(prog, args, out=out, recorder=recorder, **options)
    except BrilError as e:
        if isinstance(recorder, Listener) and recorder.stopped:
            return None             # (ended by the recorder: `Enough`)
        count = "error: " + e.message
    finally:
        if enabled:
            gc.enable()
    return out.getvalue(), count


@pytest.mark.parametrize("path", CASES)
def test_same_events_in_every_tier(path):
    """The events of every way to run, as long as a recorder listens; then the run
    ends (a program over sooner prints and counts alike too).  Every way's output
    and count are test_tiers'; going on once the recorder stops is
    test_after_the_budget_the_run_goes_on_exactly's."""
    prog = parse_program(path.read_text())
    args = args_of(path)
    want = Log()
    expected = record(prog, args, want, tier="fast")
    for options in TIERS:
        got = Compare(want.events)
        result = record(prog, args, got, **options)
        assert result == expected, options
        assert got.mismatch is None, (options, got.mismatch)
        assert got.n == len(want.events), options


def _loop_calls():
    """@main loops calling @f (a loop of its own) and @g (straight code): the
    cold tier hands loops to osrrecord variants and calls to record variants."""
    return parse_program("""
@g(x: int): int {
  one: int = const 1;
  y: int = add x one;
  ret y;
}
@f(n: int): int {
  i: int = const 0;
  s: int = const 0;
.h:
  c: bool = lt i n;
  br c .b .e;
.b:
  s: int = call @g s;
  i: int = call @g i;
  jmp .h;
.e:
  ret s;
}
@main(n: int) {
  k: int = const 0;
  t: int = const 0;
.top:
  d: bool = lt k n;
  br d .body .done;
.body:
  r: int = call @f k;
  t: int = add t r;
  one: int = const 1;
  k: int = add k one;
  jmp .top;
.done:
  print t;
}
""")


@pytest.mark.parametrize("budget", [None, 500, 2000])
@pytest.mark.parametrize("options", TIERS)
def test_recorder_state_is_the_same_in_every_tier(options, budget):
    """Not only the events: the loops, paths and outcome sequences the tracer
    selects from, also when the recorder stops listening (`budget`) and the
    engine runs the rest without reporting."""
    prog = _loop_calls()

    def stats(**opts):
        funcs = {f["name"]: f for f in prog["functions"]}
        rec = Recorder(funcs, {}, hot=5, budget=budget)
        out = record(prog, ["40"], rec, **opts)
        return out, json.dumps({f"{k[0]}.{k[1]}": [st.visits, st.path_list, st.counts, st.seq,
                                                   st.exit_list]
                                for k, st in rec.loops.items()}), rec.max_visits()

    got = stats(**options)
    assert got == stats(tier="fast")
    assert got[0] == record(prog, ["40"], None)     # the same output and count


def test_budget_stops_recording():
    prog = _loop_calls()
    funcs = {f["name"]: f for f in prog["functions"]}
    full = Recorder(funcs, {}, hot=5)
    record(prog, ["40"], full)
    short = Recorder(funcs, {}, hot=5, budget=500)
    record(prog, ["40"], short)
    assert short.stopped and not full.stopped
    assert sum(sum(st.counts) for st in short.loops.values()) < \
        sum(sum(st.counts) for st in full.loops.values())


@pytest.mark.parametrize("path", CASES)
def test_the_recorder_counts_the_instructions_it_hears(path):
    """A recorder that never stops has heard every instruction the run counts (the
    share of a stopped run it took in scales what the selection estimates)."""
    prog = parse_program(path.read_text())
    args = smaller_args(path)
    funcs = {f["name"]: f for f in prog["functions"]}
    rec = Recorder(funcs, {}, hot=5)
    out, count = record(prog, args, rec)
    if not isinstance(count, int):
        return                          # (a program that fails: nothing to compare)
    assert rec.heard() == count


@pytest.mark.parametrize("path", CASES)
def test_after_the_budget_the_run_goes_on_exactly(path):
    """Once the recorder stops listening, every frame moves to the plain code at its
    next loop header (`resume_unrecorded`): output and count stay exact, also with
    eager promotion (frames in osrrecord variants everywhere when it stops)."""
    prog = parse_program(path.read_text())
    args = args_of(path)
    funcs = {f["name"]: f for f in prog["functions"]}
    expected = record(prog, args, None)
    for options in ({}, dict(promote_after=0)):
        assert record(prog, args, Recorder(funcs, {}, hot=5, budget=200), **options) == \
            expected, options


def test_after_the_budget_no_event_is_reported(monkeypatch):
    """The rest of the run reports nothing, not even to a no-op: the frames
    running record variants leave them at their next loop header."""
    calls = [0]

    def counting(*args):
        calls[0] += 1

    monkeypatch.setattr(interp, "_no_event", counting)
    prog = _loop_calls()
    funcs = {f["name"]: f for f in prog["functions"]}
    rec = Recorder(funcs, {}, hot=5, budget=500)
    # (tier "fast": record variants from the start, so the stop finds frames in them)
    assert record(prog, ["300"], rec, tier="fast") == record(prog, ["300"], None)
    assert rec.stopped
    # (the old way: every later block of the 300 * 300 iterations, ~270,000 events)
    assert calls[0] < 100


def test_cold_code_is_not_generated():
    """A recording run generates code only for what got hot: a function that
    runs once stays in the cold tier (no FunctionCode, no record variant)."""
    prog = _loop_calls()
    seen = {}
    real = interp.CompiledProgram.function_code

    def spy(self, index):
        seen[self.linked.functions[index]["name"]] = True
        return real(self, index)

    rec = Recorder({f["name"]: f for f in prog["functions"]}, {}, hot=5)
    interp.CompiledProgram.function_code = spy
    try:
        record(prog, ["1"], rec)
    finally:
        interp.CompiledProgram.function_code = real
    assert seen == {}


TWO_LOOPS = """
@main(n: int) {
  i: int = const 0;
  one: int = const 1;
  s: int = const 0;
  k: int = const 200;
.a:
  c: bool = lt i k;
  br c .abody .bstart;
.abody:
  s: int = add s i;
  i: int = add i one;
  jmp .a;
.bstart:
  j: int = const 0;
.b:
  d: bool = lt j n;
  br d .bbody .done;
.bbody:
  s: int = add s j;
  j: int = add j one;
  jmp .b;
.done:
  print s;
}
"""


def test_a_loop_running_when_the_recorder_stops_is_scaled_to_the_run():
    """The recorder stops during @main's second loop: that loop is taken to go on
    as recorded (its figures scaled by the run's instructions from its first
    recorded iteration on, over those heard from then), the first, recorded
    whole, is not scaled."""
    prog = parse_program(TWO_LOOPS)
    funcs = {f["name"]: f for f in prog["functions"]}
    rec = Recorder(funcs, {}, hot=5, budget=3000)
    out, count = record(prog, ["20000"], rec)
    assert rec.stopped and out == record(prog, ["20000"], None)[0]
    rec.scale_to(count)
    a, b = rec.loops[("main", "a")], rec.loops[("main", "b")]
    assert not a.running and a.scale == 1.0 and a.visits == 201
    assert b.running and b.scale == (count - b.start) / (rec.heard() - b.start) > 10
    # Stationary: the second loop's visits, scaled, are its whole run's.
    assert b.visits * b.scale == pytest.approx(20001, rel=0.01)
    assert rec.max_visits() == round(b.visits * b.scale)
    # A recorder that heard the whole run scales nothing.
    full = Recorder(funcs, {}, hot=5)
    record(prog, ["20000"], full)
    full.scale_to(count)
    assert all(st.scale == 1.0 for st in full.loops.values())


def test_after_the_budget_calls_run_the_normal_code(monkeypatch):
    """Calls made after the stop, by frames still in record variants too, go to
    the normal variants: a recursive function does not enter its record variant
    and move to the osr variant at every call (eight-queens made 16,513 such
    moves after its budget)."""
    moves = [0]
    real = interp.CompiledProgram.resume_unrecorded

    def counting(self, *args):
        moves[0] += 1
        return real(self, *args)

    monkeypatch.setattr(interp.CompiledProgram, "resume_unrecorded", counting)
    path = CONFORMANCE / "benchmarks" / "mem" / "eight-queens.bril"
    prog = parse_program(path.read_text())
    funcs = {f["name"]: f for f in prog["functions"]}
    for tier in ("fast", "auto"):
        moves[0] = 0
        # (a budget that runs out after the functions got promoted)
        rec = Recorder(funcs, {}, hot=5, budget=10_000)
        assert record(prog, ["8"], rec, tier=tier) == record(prog, ["8"], None)
        assert rec.stopped
        # (at most the frames on the stack at the stop: the recursion is 8 deep)
        assert moves[0] <= 10
