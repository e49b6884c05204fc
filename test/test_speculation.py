"""A `speculate` snapshot holds what an abort must give back, and no more.

An abort restores the variables assigned in the function that some guard's
abort target may read (`FunctionTypes.snapshot_keys`); a variable dead there is
written before it is read again, so leaving it as the speculation left it
cannot be seen.  (Copying every variable made a 290-instruction JIT region
with 345 variables take 2.5 s to compile, 0.4 s now.)  Checked here on the
interpreter's tiers and the JIT; test_aot runs the same program under `brilc`.
"""

import pytest

from bril.analysis import typecheck as tc
from bril.analysis.blocks import build_blocks
from bril.ir.text import parse_program

from corpus import program_text
from helpers import run_outcome

# mode 0: x is read at the abort target (restored), d is not (written first);
# mode 1: w is assigned in an inner speculation and read only at the outer
#         speculation's abort target; x at both;
# mode 2: u, unassigned at `speculate`, is unassigned again after the abort;
# mode 3: a loop whose speculation aborts on some iterations (the JIT's regions).
RESTORES = program_text("speculation_restores")

# mode -> (stdout, error message or None)
EXPECTED = {
    0: ("1 30\n", None),
    1: ("1\n100 1\n", None),
    2: ("", "undefined variable u"),
    3: (f"{sum(i for i in range(200) if i % 3) - 7 * len(range(0, 200, 3))}\n", None),
}


def test_the_snapshot_holds_what_abort_targets_read():
    func = parse_program(RESTORES)["functions"][0]
    keys = tc.infer(func, build_blocks(func)).snapshot_keys
    assert {"x", "w", "u", "s", "i", "f", "one"} <= keys
    assert not {"d", "q", "keep", "is"} & keys


def _jit():
    from bril.backend.jit import Jit
    return Jit(hot=1, hot_calls=1, background=False)


ENGINES = {
    "cold": lambda: dict(tier="cold"),      # copies every variable: the yardstick
    "fast": lambda: dict(tier="fast"),
    "eager": lambda: dict(promote_after=0),
    "jit": lambda: dict(jit=_jit()),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_an_abort_restores_what_its_target_reads(engine, mode):
    out, _, message = run_outcome(parse_program(RESTORES), [mode], **ENGINES[engine]())
    stdout, error = EXPECTED[mode]
    assert out == stdout
    assert message is None if error is None else error in message
