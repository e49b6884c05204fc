"""What the generated code assumes of `any` values (the dynamic extension), and what
happens when an assumption stops holding.

- An operand an instruction checks holds a value of that kind after it: the code it
  dominates uses it unchecked (`bril.analysis.typecheck`).
- An `any` parameter the calls the cold tier ran all passed one kind is assumed to
  hold it: one test on entry, typed code after it (`FunctionCode.assumed_kinds`); a
  call that breaks the assumption runs the generic variant, and a function whose
  assumptions fail in RESPECIALIZE_AFTER calls that all pass other kinds (a phase of
  the run) is regenerated for those, once; one whose assumptions keep failing is
  bound to its generic variant for the rest of the run (`CompiledProgram.miss`).

Every run must print and count exactly what the cold tier (which assumes nothing)
does.
"""

import io

from bril.interpreter import interp
from bril.interpreter.interp import MISS_LIMIT, RESPECIALIZE_AFTER, compile_program
from bril.ir.text import parse_program

from corpus import program_text

# @step adds with `add` while its flag is false, with `fadd` once it is true: its
# `any` parameters hold ints, then floats (a phase change at `split`).  (Its loop,
# run once, keeps it from being inlined into @main.)
PHASES = program_text("type_assumptions/phases")
# @step again, called from the split on with floats and ints in turn.
ALTERNATING = program_text("type_assumptions/alternating")


def _run(text, args, **options):
    out = io.StringIO()
    count = interp.run(parse_program(text), args, out=out, **options)
    return out.getvalue(), count


def test_a_checked_operand_is_not_checked_again():
    prog = parse_program("""
@f(n: any): any {
  two: int = const 2;
  a: any = add n two;
  b: any = mul n n;
  c: any = sub b n;
  ret c;
}
@main { x: int = const 5; r: any = call @f x; print r; }
""")
    compiled, main = compile_program(prog, out=io.StringIO())
    src = compiled.function_code(0).source()
    assert src.count("_cint(v_n") == 1          # (the first use; later ones trust it)


def _compiled_run(text, args):
    """(output and count, the CompiledProgram) of a run in the default tiers."""
    kept = []
    original = interp.compile_program

    def keep(prog, **options):
        got = original(prog, **options)
        kept.append(got[0])
        return got
    interp.compile_program = keep
    try:
        return _run(text, args), kept[0]
    finally:
        interp.compile_program = original


def test_any_parameters_are_assumed_of_the_kind_the_calls_passed():
    got, compiled = _compiled_run(PHASES, ["3000", "5000"])
    assert got == _run(PHASES, ["3000", "5000"], tier="cold")
    fc = compiled.codes[0]
    assert dict(fc.assumed_kinds) == {"a": "int", "b": "int", "fl": "bool"}
    assert "type(v_a) is not int" in fc.source() and "_cint(v_a" not in fc.source()


def test_no_kinds_are_assumed_with_speculation_off(monkeypatch):
    # BRIL_SPECULATE_TYPES=0: the generic code (what benchmarks/bench_phases.py
    # measures speculation against), printing and counting the same.
    monkeypatch.setenv("BRIL_SPECULATE_TYPES", "0")
    got, compiled = _compiled_run(PHASES, ["3000", "5000"])
    assert got == _run(PHASES, ["3000", "5000"], tier="cold")
    assert not compiled.speculate_types
    fc = compiled.codes[0]
    assert fc.assumed_kinds == [] and fc.header_kinds == {}
    assert "_cint(v_a" in fc.source()


def test_a_phase_change_respecializes_for_the_new_kinds():
    # (@step is promoted after some 600 calls in the cold tier: splits before and
    # after that, and a few misses short of each limit)
    for n, split in (["4000", "2000"], ["1600", "200"],
                     [str(2000 + RESPECIALIZE_AFTER - 1), "2000"],
                     [str(2000 + MISS_LIMIT - 5), "2000"]):
        expected = _run(PHASES, [n, split], tier="cold")
        assert _run(PHASES, [n, split]) == expected
        assert _run(PHASES, [n, split], tier="fast") == expected
    _, compiled = _compiled_run(PHASES, ["4000", "2000"])
    # (the calls past the split missed, all with floats: regenerated for them)
    assert compiled.respecialized == {0: {"a": "float", "b": "float", "fl": "bool"}}
    assert compiled.despecialized == set()
    fc = compiled.codes[0]
    assert dict(fc.assumed_kinds) == {"a": "float", "b": "float", "fl": "bool"}
    assert compiled.ns[fc.pyname].__name__ == fc.pyname      # (not the generic variant)


def test_kinds_that_keep_changing_end_in_the_generic_code():
    # Past the split the calls alternate floats and ints: regenerated for floats
    # once (the first misses), then bound to the generic variant: no loop of
    # regenerations.
    for n, split in (["4000", "2000"], ["800", "0"], ["3000", "2990"]):
        expected = _run(ALTERNATING, [n, split], tier="cold")
        assert _run(ALTERNATING, [n, split]) == expected
        assert _run(ALTERNATING, [n, split], tier="fast") == expected
    _, compiled = _compiled_run(ALTERNATING, ["4000", "2000"])
    assert compiled.respecialized == {0: {"a": "float", "b": "float", "fl": "bool"}}
    assert compiled.despecialized == {0}
    assert compiled.ns[compiled.codes[0].pyname].__name__.endswith("__generic")


def test_the_code_cache_keeps_each_assumption_apart(tmp_path):
    from bril.cache.codecache import CodeCache
    cache = CodeCache(str(tmp_path))
    ints = _run(PHASES, ["3000", "5000"], cache=cache)           # (ints throughout)
    floats = _run(PHASES, ["3000", "0"], cache=cache)            # (floats from the start)
    assert ints == _run(PHASES, ["3000", "5000"], tier="cold")
    assert floats == _run(PHASES, ["3000", "0"], tier="cold")
    assert _run(PHASES, ["3000", "5000"], cache=cache) == ints   # (warm, each its own)


# A small `any` function (inlined where it is called).
_MOD = """
@mod(a: any, m: any): any {
  q: any = div a m;
  q: any = mul q m;
  r: any = sub a q;
  ret r;
}
"""


def test_an_inlined_copy_is_typed_by_its_call_site():
    prog = parse_program(_MOD + """
@main {
  x: int = const 17;
  m: int = const 5;
  r: any = call @mod x m;
  f: float = const 1.5;
  s: any = call @mod f m;
  print r s;
}
""")
    compiled, main = compile_program(prog, out=io.StringIO())
    src = compiled.function_code(main).source()
    # The first copy gets ints (no check), the second a float (its check raises).
    assert src.count("w1_") and "_cint(w1_a" not in src and "_cint(w1_m" not in src
    assert "_cint(w2_a" in src
    # (run: ints, then a float where the copy's check fails, as the cold tier fails)
    assert _outcome(_MOD_TEXT, "auto") == _outcome(_MOD_TEXT, "cold") == \
        ("2\n", "div argument 0 must be a int")


def _outcome(text, tier):
    """(what a run printed, its error message)."""
    from bril.ir.errors import BrilError
    out = io.StringIO()
    try:
        interp.run(parse_program(text), [], out=out, tier=tier)
    except BrilError as e:
        return out.getvalue(), e.message
    return out.getvalue(), None


_MOD_TEXT = _MOD + """
@main {
  x: int = const 17;
  m: int = const 5;
  i: int = const 0;
  n: int = const 3000;
  one: int = const 1;
.l:
  r: any = call @mod x m;
  i: int = add i one;
  go: bool = lt i n;
  br go .l .end;
.end:
  print r;
  f: float = const 1.5;
  s: any = call @mod f m;
  print s;
}
"""


# @fill is called with a pointer into a region of `any` and values of two kinds.
STORE_ANY = program_text("type_assumptions/store_any")


def test_a_store_into_a_region_of_any_checks_nothing():
    # @fill's `any` parameter p held a pointer into a region of `any` in every call
    # the cold tier ran: assumed (tested on entry), its stores need no kind check.
    text = STORE_ANY
    got, compiled = _compiled_run(text, ["2000"])
    assert got == _run(text, ["2000"], tier="cold")
    fc = compiled.codes[0]
    assert dict(fc.assumed_kinds)["p"] == "ptr:any"
    assert "_hbadstore" not in fc.source() and "_KIND_BITS" not in fc.source()


# @walk's loop adds to k with `fadd` only: k, an `any` call result, is checked once
# where it enters the loop; the calls passing an int leave for generic code there.
LOOP_KINDS = program_text("type_assumptions/loop_kinds")


def test_a_kind_a_loop_keeps_is_checked_once_where_the_value_enters():
    got, compiled = _compiled_run(LOOP_KINDS, ["3000", "1000"])
    assert got == _run(LOOP_KINDS, ["3000", "1000"], tier="cold")
    fc = next(fc for fc in compiled.codes.values() if fc.name == "walk")
    (kinds,) = fc.header_kinds.values()
    assert kinds["k"] == "float"
    src = fc.source()
    assert src.count("type(v_k) is not float") == 1 and "_cfloat(v_k" not in src
    assert fc.index not in compiled.despecialized        # (3 calls left for generic code)


def test_a_loop_kind_that_keeps_failing_ends_in_the_generic_code():
    for args in (["3000", "7"], ["300", "1"], ["200", "2"]):
        got, compiled = _compiled_run(LOOP_KINDS, args)
        assert got == _run(LOOP_KINDS, args, tier="cold")
        assert got == _run(LOOP_KINDS, args, tier="fast")
    # (3000 / 7 calls with an int: past MISS_LIMIT, bound to the generic variant)
    _, compiled = _compiled_run(LOOP_KINDS, ["3000", "7"])
    walk = next(fc for fc in compiled.codes.values() if fc.name == "walk")
    assert walk.index in compiled.despecialized


# s is added to as an int until iteration `flip`, as a float after it.
HEADER_FLIP = program_text("type_assumptions/header_flip")


def test_a_kind_seen_at_a_loop_header_is_assumed_until_the_loop_changes_it():
    # s is an int, then a float (`fadd` after the flip): used with two kinds, so
    # assumed of the kind it had when the loop went to generated code (an int);
    # the flip regenerates the loop for floats.  Every run exact.
    text = HEADER_FLIP
    for args in (["5000", "2500"], ["5000", "0"], ["5000", "6000"]):
        assert _run(text, args) == _run(text, args, tier="cold")
    _, compiled = _compiled_run(text, ["5000", "2500"])
    assert compiled.loops_respecialized == {0}
    assert list(compiled.codes[0].header_kinds.values()) == [{"s": "float"}]


LOOP_PHASES = program_text("type_assumptions/loop_phases")


def test_a_loop_whose_kinds_change_is_regenerated_for_the_new_ones():
    for args in (["20000", "10000"], ["20000", "1"], ["20000", "19999"], ["300", "100"],
                 ["20000", "30000"]):
        expected = _run(LOOP_PHASES, args, tier="cold")
        assert _run(LOOP_PHASES, args) == expected
        assert _run(LOOP_PHASES, args, tier="fast") == expected
    _, compiled = _compiled_run(LOOP_PHASES, ["20000", "10000"])
    fc = compiled.codes[0]
    assert compiled.loops_respecialized == {0} and not compiled.despecialized
    (kinds,) = fc.header_kinds.values()
    assert (kinds["acc"], kinds["x"], kinds["step"]) == ("float", "float", "float")
    # (the int path of the loop cannot run there: `add` on a float raises)
    assert "_cfloat(v_acc" not in fc.osr_source(1)
