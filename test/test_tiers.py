"""The engine's tiers agree: cold tier only, generated code only, and tiering
with promotion and on-stack replacement at every opportunity.

The whole conformance corpus (programs, error programs, benchmarks) and our
benchmarks (on their smaller ALT-ARGS input) run under each; output, error message and `-p` count must be
exactly those of the generated code (itself checked against the reference
data in test_interp.py).  Then the situations on-stack replacement must get
right: phi, an open speculation, pointer parameters whose assumption fails,
deep recursion while functions get promoted.
"""

import pytest

from corpus import (BENCHMARKS, args_of, bril_files, case_id, our_programs, program_text,
                    smaller_args)
from helpers import run_outcome
from bril.interpreter.interp import CompiledProgram
from bril.ir.text import parse_program

PROGRAMS = (bril_files("test", "interp") + bril_files("test", "interp-error")
            + bril_files("benchmarks"))
OURS = our_programs()

# tier options -> what they exercise
MODES = {
    "cold": dict(tier="cold"),
    "eager": dict(promote_after=0),         # promotion at the first chance, OSR everywhere
    "after-50": dict(promote_after=50),     # OSR in the middle of loops
}


def _check_tiers(path, argv=None):
    prog = parse_program(path.read_text(), filename=str(path))
    argv = args_of(path) if argv is None else argv
    expected = run_outcome(prog, argv, filename=str(path), tier="fast")
    for name, options in MODES.items():
        assert run_outcome(prog, argv, filename=str(path), **options) == expected, name


@pytest.mark.parametrize("path", PROGRAMS, ids=case_id)
def test_corpus_program_in_every_tier(path):
    _check_tiers(path)


@pytest.mark.parametrize("path", OURS, ids=lambda p: case_id(p, BENCHMARKS))
def test_our_benchmark_in_every_tier(path):
    _check_tiers(path, smaller_args(path))


def check_text(src, argv=(), osr=True):
    """Run Bril text in every mode; with `osr`, eager promotion must really move a
    running activation to generated code."""
    prog = parse_program(src)
    expected = run_outcome(prog, argv, tier="fast")
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
            assert run_outcome(prog, argv, **options) == expected, name
        finally:
            CompiledProgram.osr_entry = original
    assert bool(entered) == osr, entered
    return expected


LOOP_WITH_PHI = program_text("tiers/loop_with_phi")


def test_osr_in_a_loop_with_phi():
    assert check_text(LOOP_WITH_PHI, ["500"])[0] == "124750\n"


SPECULATION_IN_LOOP = program_text("tiers/speculation_in_loop")


def test_osr_never_moves_an_open_speculation():
    # The loop header is only reached with the speculation closed: OSR happens there.
    assert check_text(SPECULATION_IN_LOOP, ["300"])[0] == "44850\n"


POINTER_PARAMETER = program_text("tiers/pointer_parameter")


def test_osr_with_pointer_parameters():
    assert check_text(POINTER_PARAMETER, ["400"])[0] == "79800\n"


def test_errors_after_promotion_are_the_same():
    src = program_text("tiers/division_by_zero_after_promotion")
    out, count, error = check_text(src, ["200"])
    assert error == "division by zero"


def test_deep_recursion_while_functions_get_promoted():
    src = program_text("tiers/deep_recursion")
    assert check_text(src, ["20000"], osr=False)[0] == "20000\n"


def test_a_recursive_descent_moves_to_generated_code_before_it_returns():
    # A function's work in the cold tier is counted as it runs: the 700th call of a
    # descent finds it past its budget and runs generated code, as do the calls below
    # it.  (Counted as activations returned, the whole descent stayed in the cold tier:
    # ten times slower, three Python frames a call.)
    import io
    from bril.interpreter.interp import run
    seen = []
    out = io.StringIO()
    total = run(parse_program(program_text("tiers/deep_recursion")), ["20000"], out=out,
                observe=seen.append)
    assert out.getvalue() == "20000\n"
    cold = seen[0].cold.count
    assert cold < 10_000 < total, (cold, total)


def test_unset_variable_read_in_the_cold_tier():
    src = program_text("tiers/unset_variable")
    out, count, error = check_text(src, ["false"], osr=False)
    assert error == "undefined variable x"


LOOP_INSIDE_SPECULATION = program_text("tiers/loop_inside_speculation")


def test_no_osr_inside_an_open_speculation():
    # Every backward jump happens with the speculation open: the activation stays
    # in the cold tier (an abort must restore the variables it saved).
    out, count, error = check_text(LOOP_INSIDE_SPECULATION, ["300"], osr=False)
    assert out == "0 0\n"


def _entered_blocks(src, argv, **options):
    """The blocks the cold tier moved frames to generated code at (by on-stack
    replacement), in one run."""
    blocks = []
    original = CompiledProgram.osr_entry

    def recording(self, cf, block):
        entry = original(self, cf, block)
        if entry is not None:
            blocks.append(block)
        return entry
    CompiledProgram.osr_entry = recording
    try:
        run_outcome(parse_program(src), argv, **options)
    finally:
        CompiledProgram.osr_entry = original
    return blocks


def test_osr_out_of_a_loop_with_two_entries():
    # No natural loop: the frame moves at a backward jump's target (entry variant).
    src = program_text("tiers/irreducible_loop")
    for split in ("0", "7", "5000"):
        assert check_text(src, ["300", split])[0] == "44850\n"
    assert _entered_blocks(src, ["3000", "7"], promote_after=50)


def test_osr_at_a_rotated_loops_header():
    # The backward jump goes to .body (block 1); the frame moves at .test (block 2),
    # which only forward jumps reach.
    src = program_text("tiers/rotated_loop")
    assert check_text(src, ["300"])[0] == "44850\n"
    assert _entered_blocks(src, ["3000"], promote_after=50) == [2]


def test_osr_out_of_a_cycle_with_two_entries_after_a_loop():
    # The function has a loop header, but the frame now spins where no loop is.
    src = program_text("tiers/loop_then_irreducible")
    assert check_text(src, ["300", "5"])[0] == "22210\n"
    assert check_text(src, ["300", "1"])[0] == "22350\n"
    # (blocks: 1 .head, 4 .a, 5 .b: the frame moves in the cycle)
    assert _entered_blocks(src, ["3000", "5"], promote_after=50)[-1] in (4, 5)
