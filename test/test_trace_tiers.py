"""Recording in every engine tier: the trace recorder hears the same events.

`brili --trace` records in the tiered engine: the cold tier reports function
entries, blocks and returns itself, and hot functions move to their record
variants (`record`, and `osrrecord` for a loop entered by on-stack
replacement).  The events -- and so the traces built from them -- must be
exactly those of the record variants run from the start (tier "fast"), for
every program of the corpus and ours, whenever functions get promoted.
"""

import io
import json

import pytest

from bril import interp
from bril.errors import BrilError
from bril.text import parse_program
from bril.trace_record import Recorder

from corpus import BENCHMARKS, CONFORMANCE, args_of, bril_files, case_id

CASES = ([pytest.param(p, id=case_id(p)) for p in bril_files("benchmarks")]
         + [pytest.param(p, id="ours/" + case_id(p, BENCHMARKS))
            for p in bril_files(root=BENCHMARKS)])

# Ways to run: never promoted, promoted at the first backward jump or second call
# (on-stack replacement into osrrecord variants everywhere), after a few
# instructions, and by the engine's own budget.
TIERS = [dict(tier="cold"), dict(tier="auto", promote_after=0),
         dict(tier="auto", promote_after=50), dict(tier="auto")]


class Log:
    """A recorder that keeps every event."""

    def __init__(self):
        self.events = []

    def enter(self, fname):
        self.events.append(("enter", fname))

    def block(self, fname, bname):
        self.events.append((fname, bname))

    def leave(self):
        self.events.append(("leave",))


def record(prog, args, recorder, **options):
    out = io.StringIO()
    try:
        count = interp.run(prog, args, out=out, recorder=recorder, **options)
    except BrilError as e:
        count = "error: " + e.message
    return out.getvalue(), count


@pytest.mark.parametrize("path", CASES)
def test_same_events_in_every_tier(path):
    prog = parse_program(path.read_text())
    args = args_of(path)
    want = Log()
    expected = record(prog, args, want, tier="fast")
    for options in TIERS:
        got = Log()
        assert record(prog, args, got, **options) == expected, options
        assert len(got.events) == len(want.events), options
        assert got.events == want.events, options


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
