"""What the generated code assumes of `any` values (the dynamic extension), and what
happens when an assumption stops holding.

- An operand an instruction checks holds a value of that kind after it: the code it
  dominates uses it unchecked (`bril.analysis.typecheck`).
- An `any` parameter the calls the cold tier ran all passed one kind is assumed to
  hold it: one test on entry, typed code after it (`FunctionCode.assumed_kinds`); a
  call that breaks the assumption runs the generic variant, and a function whose
  assumptions keep failing is bound to its generic variant for the rest of the run
  (`CompiledProgram.miss`).

Every run must print and count exactly what the cold tier (which assumes nothing)
does.
"""

import io

from bril.interpreter import interp
from bril.interpreter.interp import MISS_LIMIT, compile_program
from bril.ir.text import parse_program

from corpus import program_text

# @step adds with `add` while its flag is false, with `fadd` once it is true: its
# `any` parameters hold ints, then floats (a phase change at `split`).  (Its loop,
# run once, keeps it from being inlined into @main.)
PHASES = program_text("type_assumptions/phases")


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


def test_a_phase_change_leaves_to_the_generic_code_then_stays_there():
    # (@step is promoted after some 600 calls in the cold tier: splits before and
    # after that, and one a few misses short of the limit)
    for n, split in (["4000", "2000"], ["1600", "200"], [str(2000 + MISS_LIMIT - 5), "2000"]):
        expected = _run(PHASES, [n, split], tier="cold")
        assert _run(PHASES, [n, split]) == expected
        assert _run(PHASES, [n, split], tier="fast") == expected
    _, compiled = _compiled_run(PHASES, ["4000", "2000"])
    # (the calls past the split missed: bound to the generic variant once, for good)
    assert compiled.despecialized == {0}


def test_the_code_cache_keeps_each_assumption_apart(tmp_path):
    from bril.cache.codecache import CodeCache
    cache = CodeCache(str(tmp_path))
    ints = _run(PHASES, ["3000", "5000"], cache=cache)           # (ints throughout)
    floats = _run(PHASES, ["3000", "0"], cache=cache)            # (floats from the start)
    assert ints == _run(PHASES, ["3000", "5000"], tier="cold")
    assert floats == _run(PHASES, ["3000", "0"], tier="cold")
    assert _run(PHASES, ["3000", "5000"], cache=cache) == ints   # (warm, each its own)
