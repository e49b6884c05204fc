"""Integer range facts (`bril.typecheck`) and the checking mode that asserts them.

1. The checking mode (`BRIL_CHECK_FACTS=1`, `run(..., check_facts=True)`): off,
   the generated code has no extra line; on, every fact the code relies on is
   asserted, and a wrong one (here: an analysis broken on purpose) is an
   internal error naming the function and the instruction or block.
2. Refinement on branch edges, exhaustively over small cases: every comparison
   op, the constant on either side, negated (`not`) and copied (`id`), the
   same variable on both sides, then the two edges meeting again.  The ranges
   inferred at each block hold on every run (checking mode) and are as tight
   as the test allows.
3. Per-instruction results hold at every place of an instruction object used
   at several places (a program built in Python may reuse one dict).
"""

import io
import itertools

import pytest

import simple_interp
from bril import codegen
from bril import typecheck as tc
from bril.errors import BrilError
from bril.interp import compile_program, run
from bril.text import parse_program

INT_MAX = (1 << 63) - 1
INT_MIN = -(1 << 63)

DIV_AFTER_JOIN = """
@main(x: int) {
  zero: int = const 0;
  ten: int = const 10;
  c: bool = ge zero x;
  br c .nonpos .pos;
.nonpos:
  jmp .join;
.pos:
  one: int = const 1;
  q: int = div x ten;
  jmp .join;
.join:
  q: int = div x ten;
  big: int = const 9223372036854775000;
  r: int = add q big;
  print q r;
}
"""


def outcome(prog, argv, **kw):
    out = io.StringIO()
    try:
        count = run(prog, list(argv), out=out, **kw)
    except BrilError as err:
        return simple_interp.Outcome(out.getvalue(), str(err), None)
    return simple_interp.Outcome(out.getvalue(), None, count)


def source(prog, monkeypatch=None, env=None, **kw):
    """The generated source of @main."""
    if monkeypatch is not None:
        if env is None:
            monkeypatch.delenv("BRIL_CHECK_FACTS", raising=False)
        else:
            monkeypatch.setenv("BRIL_CHECK_FACTS", env)
    compiled, main = compile_program(prog, out=io.StringIO(), **kw)
    compiled.prepare(main)
    return compiled.codes[main].source()


# --- 1. the checking mode ------------------------------------------------------------

def test_checking_mode_off_adds_nothing(monkeypatch):
    prog = parse_program(DIV_AFTER_JOIN)
    plain = source(prog, monkeypatch)
    assert "_RF(" not in plain
    assert source(prog, monkeypatch, env="0") == plain
    assert source(prog, monkeypatch, check_facts=False) == plain


@pytest.mark.parametrize("how", ["env", "keyword"])
def test_checking_mode_asserts_the_facts_it_relies_on(monkeypatch, how):
    prog = parse_program(DIV_AFTER_JOIN)
    src = source(prog, monkeypatch, env="1") if how == "env" \
        else source(prog, monkeypatch, check_facts=True)
    plain = source(prog, monkeypatch)
    assert set(plain.splitlines()) <= set(src.splitlines())     # only lines added
    # (c) ranges at block entry, (b) the dividend of the `//` in .pos (x >= 1 there)
    # and the divisors, (a) the add whose wrap test is one-sided.
    assert "_RF('@main: entry of .pos: x in [1, 9223372036854775807]', v_x)" in src
    assert "if v_x < 0: _RF('@main: `q: int = div x ten`: x >= 0', v_x)" in src
    assert "if v_ten < 1: _RF('@main: `q: int = div x ten`: ten >= 1', v_ten)" in src
    assert "_RF('@main: `r: int = add q big`: no wrap-around below', v_r)" in src
    for argv in (["-17"], ["17"], [str(INT_MIN)], [str(INT_MAX)]):
        expected = simple_interp.run(prog, argv)
        assert outcome(prog, argv, check_facts=True) == expected == outcome(prog, argv)


def test_a_wrong_sign_fact_is_reported(monkeypatch):
    # An analysis that believes every sign test proves x >= 0 after the join.
    real = tc.State._merge_ranges

    def merge_keeping_positive(self, other, widen, new_keys):
        changed = real(self, other, widen, new_keys)
        if "x" in self.types and "one" in self.types:
            self.ranges["x"] = (1, INT_MAX)
        return changed
    monkeypatch.setattr(tc.State, "_merge_ranges", merge_keeping_positive)
    prog = parse_program(DIV_AFTER_JOIN)
    assert outcome(prog, ["-17"]).stdout.startswith("-2 ")       # floor division: wrong
    got = outcome(prog, ["-17"], check_facts=True)
    assert got.error == ("internal error: range fact violated: @main: entry of .join: "
                         "x in [1, 9223372036854775807] (got -17)")


def test_a_wrong_divisor_or_dividend_fact_is_reported(monkeypatch):
    prog = parse_program("@main(a: int, b: int) { q: int = div a b; print q; }")
    monkeypatch.setattr(tc, "_div_range", lambda a, b: (0, 0))
    real = tc._result_range

    def claims_nonneg(ft, instr, st, args):
        out = real(ft, instr, st, args)
        if instr["op"] == "div":
            ft.nonneg[id(instr)] = (True, True)
        return out
    monkeypatch.setattr(tc, "_result_range", claims_nonneg)
    assert outcome(prog, ["-7", "2"]).stdout == "-4\n"            # floor division: wrong
    assert outcome(prog, ["-7", "2"], check_facts=True).error == (
        "internal error: range fact violated: @main: `q: int = div a b`: a >= 0 (got -7)")
    assert outcome(prog, ["7", "-2"], check_facts=True).error == (
        "internal error: range fact violated: @main: `q: int = div a b`: b >= 1 (got -2)")
    assert outcome(prog, ["7", "2"], check_facts=True).stdout == "3\n"


def test_a_wrong_overflow_fact_is_reported(monkeypatch):
    prog = parse_program("@main(a: int) { one: int = const 1; s: int = add a one; print s; }")
    monkeypatch.setattr(tc, "wrap_check", lambda lo, hi: "none")
    assert outcome(prog, [str(INT_MAX)]).stdout == f"{INT_MAX + 1}\n"   # not wrapped: wrong
    assert outcome(prog, [str(INT_MAX)], check_facts=True).error == (
        "internal error: range fact violated: @main: `s: int = add a one`: no wrap-around "
        f"(got {INT_MAX + 1})")


def test_checking_mode_is_read_once_per_program(monkeypatch):
    monkeypatch.setenv("BRIL_CHECK_FACTS", "1")
    compiled, main = compile_program(parse_program(DIV_AFTER_JOIN), out=io.StringIO())
    monkeypatch.delenv("BRIL_CHECK_FACTS")
    compiled.prepare(main)
    assert compiled.check_facts and "_RF(" in compiled.codes[main].source()
    assert codegen.check_facts_requested() is False
