"""The engine's tiers agree: cold tier only, generated code only, and tiering
with promotion and on-stack replacement at every opportunity.

The whole conformance corpus (programs, error programs, benchmarks) and our
benchmarks run under each; output, error message and `-p` count must be
exactly those of the generated code (itself checked against the reference
data in test_interp.py).  Then the situations on-stack replacement must get
right: phi, an open speculation, pointer parameters whose assumption fails,
deep recursion while functions get promoted.
"""

import io

import pytest

from corpus import BENCHMARKS, args_of, bril_files, case_id
from bril.ir.errors import BrilError
from bril.interpreter.interp import CompiledProgram, run
from bril.ir.text import parse_program

PROGRAMS = (bril_files("test", "interp") + bril_files("test", "interp-error")
            + bril_files("benchmarks"))
OURS = bril_files(root=BENCHMARKS)

# tier options -> what they exercise
MODES = {
    "cold": dict(tier="cold"),
    "eager": dict(promote_after=0),         # promotion at the first chance, OSR everywhere
    "after-50": dict(promote_after=50),     # OSR in the middle of loops
}


def outcome(prog, argv, path=None, **options):
    out = io.StringIO()
    try:
        count = run(prog, list(argv), out=out, filename=str(path) if path else None, **options)
    except BrilError as e:
        return out.getvalue(), None, e.message
    return out.getvalue(), count, None


def _check_tiers(path):
    prog = parse_program(path.read_text(), filename=str(path))
    argv = args_of(path)
    expected = outcome(prog, argv, path, tier="fast")
    for name, options in MODES.items():
        assert outcome(prog, argv, path, **options) == expected, name


@pytest.mark.parametrize("path", PROGRAMS, ids=case_id)
def test_corpus_program_in_every_tier(path):
    _check_tiers(path)


@pytest.mark.parametrize("path", OURS, ids=lambda p: case_id(p, BENCHMARKS))
def test_our_benchmark_in_every_tier(path):
    _check_tiers(path)


def check_text(src, argv=(), osr=True):
    """Run Bril text in every mode; with `osr`, eager promotion must really move a
    running activation to generated code."""
    prog = parse_program(src)
    expected = outcome(prog, argv, tier="fast")
    entered = []
    original = CompiledProgram.osr_entry

    def counting(self, cf, block):
        entry = original(self, cf, block)
        if entry is not None:
            def enter(env):
                entered.append(cf.name)
                return entry(env)
            return enter
        return entry
    for name, options in MODES.items():
        CompiledProgram.osr_entry = counting
        try:
            assert outcome(prog, argv, **options) == expected, name
        finally:
            CompiledProgram.osr_entry = original
    assert bool(entered) == osr, entered
    return expected


LOOP_WITH_PHI = """
@main(n: int) {
  zero: int = const 0;
  one: int = const 1;
.entry:
  jmp .head;
.head:
  i: int = phi zero inext .entry .body;
  s: int = phi zero snext .entry .body;
  c: bool = lt i n;
  br c .body .done;
.body:
  snext: int = add s i;
  inext: int = add i one;
  jmp .head;
.done:
  print s;
}
"""


def test_osr_in_a_loop_with_phi():
    assert check_text(LOOP_WITH_PHI, ["500"])[0] == "124750\n"


SPECULATION_IN_LOOP = """
@main(n: int) {
  i: int = const 0;
  one: int = const 1;
  s: int = const 0;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  speculate;
  s: int = add s i;
  big: bool = lt i n;
  guard big .undo;
  commit;
  i: int = add i one;
  jmp .head;
.undo:
  i: int = add i one;
  jmp .head;
.done:
  print s;
}
"""


def test_osr_never_moves_an_open_speculation():
    # The loop header is only reached with the speculation closed: OSR happens there.
    assert check_text(SPECULATION_IN_LOOP, ["300"])[0] == "44850\n"


POINTER_PARAMETER = """
@fill(p: ptr<int>, n: int): int {
  i: int = const 0;
  one: int = const 1;
  s: int = const 0;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  q: ptr<int> = ptradd p i;
  store q i;
  x: int = load q;
  s: int = add s x;
  i: int = add i one;
  jmp .head;
.done:
  ret s;
}
@main(n: int) {
  p: ptr<int> = alloc n;
  s: int = call @fill p n;
  print s;
  free p;
}
"""


def test_osr_with_pointer_parameters():
    assert check_text(POINTER_PARAMETER, ["400"])[0] == "79800\n"


def test_errors_after_promotion_are_the_same():
    src = """
@main(n: int) {
  i: int = const 0;
  one: int = const 1;
  ten: int = const 10;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  k: int = sub ten i;
  q: int = div n k;
  i: int = add i one;
  jmp .head;
.done:
  print i;
}
"""
    out, count, error = check_text(src, ["200"])
    assert error == "division by zero"


def test_deep_recursion_while_functions_get_promoted():
    src = """
@down(n: int): int {
  zero: int = const 0;
  one: int = const 1;
  done: bool = le n zero;
  br done .base .rec;
.base:
  ret zero;
.rec:
  m: int = sub n one;
  r: int = call @down m;
  r: int = add r one;
  ret r;
}
@main(n: int) {
  r: int = call @down n;
  print r;
}
"""
    assert check_text(src, ["20000"], osr=False)[0] == "20000\n"


def test_unset_variable_read_in_the_cold_tier():
    src = """
@main(b: bool) {
  br b .set .use;
.set:
  x: int = const 1;
.use:
  print x;
}
"""
    out, count, error = check_text(src, ["false"], osr=False)
    assert error == "undefined variable x"


LOOP_INSIDE_SPECULATION = """
@main(n: int) {
  i: int = const 0;
  one: int = const 1;
  s: int = const 0;
  speculate;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  s: int = add s i;
  i: int = add i one;
  jmp .head;
.done:
  ok: bool = lt s i;
  guard ok .undo;
  commit;
  print s;
  ret;
.undo:
  print i s;
}
"""


def test_no_osr_inside_an_open_speculation():
    # Every backward jump happens with the speculation open: the activation stays
    # in the cold tier (an abort must restore the variables it saved).
    out, count, error = check_text(LOOP_INSIDE_SPECULATION, ["300"], osr=False)
    assert out == "0 0\n"
