"""Integer range facts (`bril.analysis.typecheck`) and the checking mode that asserts them.

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
from corpus import program_text
from bril.interpreter import codegen
from bril.analysis.blocks import build_blocks
from bril.analysis import typecheck as tc
from bril.ir.errors import BrilError
from bril.interpreter.interp import compile_program, run
from bril.ir.text import parse_program

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
    """Run prog in generated code (the code the range facts are for)."""
    out = io.StringIO()
    try:
        count = run(prog, list(argv), out=out, tier="fast", **kw)
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
    real = tc._Analysis.merge

    def merge_keeping_positive(self, s, o, widen=False):
        (values, deps), changed = real(self, s, o, widen)
        x = self.ids.get("x")
        v = self.get(values, x) if x is not None else None
        if v is not None:       # (the only merge is at .join)
            values = self.put(values, {x: (v[0], v[1], (1, INT_MAX), v[3])})
        return (values, deps), changed
    monkeypatch.setattr(tc._Analysis, "merge", merge_keeping_positive)
    prog = parse_program(DIV_AFTER_JOIN)
    assert outcome(prog, ["-17"]).stdout.startswith("-2 ")       # floor division: wrong
    got = outcome(prog, ["-17"], check_facts=True)
    assert got.error == ("internal error: range fact violated: @main: entry of .join: "
                         "x in [1, 9223372036854775807] (got -17)")


def test_a_wrong_divisor_or_dividend_fact_is_reported(monkeypatch):
    prog = parse_program("@main(a: int, b: int) { q: int = div a b; print q; }")
    monkeypatch.setattr(tc, "_div_range", lambda a, b: (0, 0))
    real = tc._result_range

    def claims_nonneg(ft, instr, aids, vals):
        out = real(ft, instr, aids, vals)
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


# --- 2. refinement on branch edges ---------------------------------------------------

OPS = ("eq", "lt", "le", "gt", "ge")
_SWAP = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_NOT = {"eq": None, "lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}


def _interval(rel, k):
    """Where x lies when `x rel k` holds (None: no interval)."""
    if rel is None:
        return None
    return {"lt": (INT_MIN, k - 1), "le": (INT_MIN, k), "gt": (k + 1, INT_MAX),
            "ge": (k, INT_MAX), "eq": (k, k)}[rel]


def _sign_test_program(op, order, negate, copy, k):
    """x compared with the constant k (order 'xk', 'kx', or 'xx': with itself),
    maybe negated and copied; both edges divide x, meet again, divide again."""
    a, b = {"xk": ("x", "k"), "kx": ("k", "x"), "xx": ("x", "x")}[order]
    lines = [f"k: int = const {k};", "ten: int = const 10;", "m: int = const -3;",
             f"c: bool = {op} {a} {b};"]
    cond = "c"
    if negate:
        lines.append("n: bool = not c;")
        cond = "n"
    if copy:
        lines.append(f"d: bool = id {cond};")
        cond = "d"
    lines += [f"br {cond} .yes .no;",
              ".yes:", "q: int = div x ten;", "r: int = div x m;", "print q r;", "jmp .join;",
              ".no:", "only: int = const 7;", "q: int = div x ten;", "print q;",
              ".join:", "s: int = div x ten;", "t: int = div x k;", "print s t;"]
    return parse_program("@main(x: int) {\n" + "\n".join(lines) + "\n}")


CASES = list(itertools.product(OPS, ("xk", "kx", "xx"), (False, True), (False, True)))


@pytest.mark.parametrize("op, order, negate, copy", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
def test_refinement_is_sound_and_tight(op, order, negate, copy):
    for k in (-2, -1, 1, 2, 11):          # (non-zero: `t` divides by k)
        prog = _sign_test_program(op, order, negate, copy, k)
        func = prog["functions"][0]
        blocks = build_blocks(func)
        ft = tc.infer(func, blocks)
        where = {b.label: ft.block_in[b.index] for b in blocks}
        rel = op if order == "xk" else _SWAP[op]
        for label, holds in (("yes", True), ("no", False)):
            got = where[label].range("x")
            if order == "xx":
                # x op x: one edge is never taken (any range will do), the other
                # learns nothing.
                if (op in ("eq", "le", "ge")) == (holds != negate):
                    assert got == tc.FULL, (label, got)
                continue
            want = _interval(rel if holds != negate else _NOT[rel], k) or tc.FULL
            assert got == want, (label, k, got, want)
        assert where["join"].range("x") == tc.FULL
        for x in (-12, -11, -3, -2, -1, 0, 1, 2, 3, 11, 12, INT_MIN, INT_MAX):
            argv = [str(x)]
            expected = simple_interp.run(prog, argv)
            assert outcome(prog, argv, check_facts=True) == expected, (k, x)


def test_a_fact_dies_with_its_operands():
    # c = x < 0 is computed, then x is reassigned on one path (or copied into a
    # variable that is reassigned): the branch on c says nothing about the new x.
    prog = parse_program("""
    @main(x: int, b: bool) {
      zero: int = const 0; ten: int = const 10; minus: int = const -5;
      c: bool = lt x zero;
      d: bool = id c;
      br b .change .keep;
    .change:
      x: int = const -25;
      jmp .test;
    .keep:
      c: bool = lt zero minus;
      jmp .test;
    .test:
      br d .neg .pos;
    .neg:
      q: int = div x ten; print q;
      jmp .end;
    .pos:
      q: int = div x ten; print q;
    .end:
      br c .a .b;
    .a: print c;
    .b: q: int = div x ten; print q;
    }""")
    ft = tc.infer(prog["functions"][0], build_blocks(prog["functions"][0]))
    assert not any(dividend for dividend, _ in ft.nonneg.values())
    for argv in (["5", "true"], ["5", "false"], ["-5", "true"], ["-5", "false"]):
        expected = simple_interp.run(prog, argv)
        assert outcome(prog, argv, check_facts=True) == expected


COPIED_TEST = """
@main(e: int, w: int) {
  zero: int = const 0; two: int = const 2;
  k: int = id e;
  %s
  go: bool = gt e zero;
  br go .body .done;
.body:
  half: int = div k two;
  print half;
.done:
  print k;
}"""


@pytest.mark.parametrize("between, proven", [
    ("", True),                      # k is e at the branch: e > 0 bounds k too
    ("e: int = id w;", False),       # e changed after the copy: k is not the tested value
    ("k: int = id w;", False),       # k changed after the copy
])
def test_a_branch_bounds_the_copies_of_what_it_tests(between, proven):
    # (loop rotation plus copy propagation leave `k = id e; go = gt e zero`)
    prog = parse_program(COPIED_TEST % between)
    func = prog["functions"][0]
    blocks = build_blocks(func)
    ft = tc.infer(func, blocks)
    body = next(b for b in blocks if b.label == "body")
    assert (ft.block_in[body.index].range("k") == (1, INT_MAX)) == proven
    assert any(dividend for dividend, _ in ft.nonneg.values()) == proven
    for e, w in itertools.product(("5", "-5", "0"), ("7", "-7")):
        expected = simple_interp.run(prog, [e, w])
        assert outcome(prog, [e, w], check_facts=True) == expected


def test_a_loop_dividing_toward_zero_from_below_ends():
    prog = parse_program(program_text("range_facts/divide_toward_zero_from_below"))
    for x in ("-123456", str(INT_MIN), "-1", "0", "5"):
        expected = simple_interp.run(prog, [x])
        assert outcome(prog, [x], check_facts=True) == expected


def test_a_negated_equality_moves_a_bound_equal_to_the_constant():
    # `not (x == 0)`, and `x == 0` on its false edge: x in [-5, 0] becomes [-5, -1].
    prog = parse_program("""
    @main(b: bool) {
      zero: int = const 0; ten: int = const 10;
      br b .l .r;
    .l: x: int = const -5; jmp .test;
    .r: x: int = const 0;
    .test:
      c: bool = eq x zero;
      n: bool = not c;
      br n .nonzero .zero;
    .nonzero:
      d: bool = eq zero x;
      br d .never .again;
    .again:
      q: int = div ten x;
      print q;
      ret;
    .zero:
    .never:
      print x;
    }""")
    func = prog["functions"][0]
    blocks = build_blocks(func)
    ft = tc.infer(func, blocks)
    where = {b.label: ft.block_in[b.index] for b in blocks}
    assert where["test"].range("x") == (-5, 0)
    assert where["nonzero"].range("x") == (-5, -1)
    assert where["zero"].range("x") == (0, 0)
    assert where["again"].range("x") == (-5, -1)
    for argv in (["true"], ["false"]):
        assert outcome(prog, argv, check_facts=True) == simple_interp.run(prog, argv)


# --- 3. an instruction object at two places ------------------------------------------

def test_an_instruction_at_two_places_is_analysed_at_both():
    # The same `add` dict twice: the first place may wrap, the second may not.
    # The result recorded for it must hold at both (the last place analysed
    # used to decide for both: the sum was printed unwrapped).
    add = {"op": "add", "dest": "y", "type": "int", "args": ["x", "one"]}
    show = {"op": "print", "args": ["y"]}
    div = {"op": "div", "dest": "q", "type": "int", "args": ["x", "ten"]}
    prog = {"functions": [{"name": "main", "args": [{"name": "a", "type": "int"}], "instrs": [
        {"op": "const", "dest": "one", "type": "int", "value": 1},
        {"op": "const", "dest": "ten", "type": "int", "value": 10},
        {"op": "const", "dest": "x", "type": "int", "value": INT_MAX},
        add, show,
        {"op": "id", "dest": "x", "type": "int", "args": ["a"]},
        div, {"op": "print", "args": ["q"]},
        {"op": "const", "dest": "x", "type": "int", "value": 1},
        add, show, div, {"op": "print", "args": ["q"]},
    ]}]}
    expected = simple_interp.run(prog, ["-17"])
    assert expected.stdout == f"{INT_MIN}\n-1\n2\n0\n"
    assert outcome(prog, ["-17"]) == expected
    assert outcome(prog, ["-17"], check_facts=True) == expected


def test_an_analysis_that_gives_up_assumes_nothing(monkeypatch):
    # With no worklist budget the analysis stops early: its partial states are
    # not kept (every variable maybe unassigned, every int unbounded).
    monkeypatch.setattr(tc, "VISITS_PER_BLOCK", 0)
    prog = parse_program(DIV_AFTER_JOIN)
    func = prog["functions"][0]
    blocks = build_blocks(func)
    ft = tc.infer(func, blocks)
    assert not ft.precise and not ft.wrap_checks and not ft.nonneg
    assert all(all(u) for u in ft.arg_unbound.values())
    for st in ft.block_in:      # (every block may be reached)
        assert not st.ranges and not st.bound and set(st.types) >= {"x", "q", "one"}
        assert all(t == tc.TOP for t in st.types.values())
    assert outcome(prog, ["-17"], check_facts=True) == simple_interp.run(prog, ["-17"])
