"""Value specialization (`brili --trace --trace-specialize`, `bril.tracing.specialize`).

A hot loop that divides by a variable it never writes, seen holding one value
at every entry the recording sampled, is copied with the value as a constant
and entered through a check at the loop's entry; a function that nearly every
call passes one value for a parameter of is copied whole the same way (where
the constant pays natively: `bril.analysis.invariants.worth_constants`).  The
program must print
exactly what the original prints on every input and engine: the training
input, larger ones with the same value (the copy runs), and unseen values
(the check fails and the original loop runs).
"""

import io

import pytest

from bril.interpreter import interp
from bril.ir.errors import BrilError
from bril.backend.jit import Jit
from bril.tracing.specialize import invariant_values
from bril.interpreter.cold import MIXED
from bril.tracing.trace_record import VARIES, CallStats, record_value
from bril.ir.text import parse_program
from bril.ir.tracelabels import MARK
from bril.tracing.tracer import report, report_text, trace_program
from bril.tracing.trace_record import Recorder

from corpus import BENCHMARKS, alt_args_of, args_of, benchmark_cases, program_text
from helpers import bril_json, build, run_brili, run_native

LCG = (BENCHMARKS / "loops" / "lcg-period.bril").read_text()
TRAIN = ["3000", "2147483647", "16807", "0", "1"]
# (the same modulus, a longer run; other moduli; an empty loop)
OTHERS = [["20000", "2147483647", "16807", "0", "1"], ["20000", "2147483629", "16807", "0", "1"],
          ["500", "7", "3", "1", "2"], ["0", "2147483647", "16807", "0", "1"],
          ["50", "-1000003", "5", "3", "9"]]


def outputs(prog, args):
    """What the Python engine, the JIT and the brilc executable print (or the error)."""
    got = []
    out = io.StringIO()
    try:
        count = interp.run(prog, args, out=out)
        got.append((out.getvalue(), count))
    except BrilError as e:
        got.append(("error", e.message))
    out = io.StringIO()
    try:
        interp.run(prog, args, out=out, jit=Jit(hot=3, background=False))
        got.append(out.getvalue())
    except BrilError as e:
        got.append(("error", e.message))
    return got


def native_output(prog, args, tmp_path):
    got = run_native(build(prog, str(tmp_path / "prog")), args, profile=False)
    return got.returncode, got.stdout


def _labels(prog):
    return {i["label"] for f in prog["functions"] for i in f["instrs"] if "label" in i}


def test_a_loop_dividing_by_an_argument_is_versioned_on_its_value(tmp_path):
    prog = parse_program(LCG)
    plain = trace_program(prog, TRAIN)
    result = trace_program(prog, TRAIN, specialize=True)
    assert plain.versions == []                     # (asked for only)
    [v] = result.versions
    assert (v.func, v.header, v.values) == ("main", "loop", {"m": 2147483647})
    assert {f"loop.{MARK}.v", f"loop.{MARK}.v.loop"} <= _labels(result.program)
    assert result.traced_output == result.output
    for args in [TRAIN] + OTHERS:
        want = interp.run_capture(prog, args)[0]
        assert outputs(result.program, args)[0][0] == want, args
        assert outputs(result.program, args)[1] == want, args
        assert native_output(result.program, args, tmp_path) == (0, want), args
    # The report names it.
    assert report(result)["versions"] == [{"func": "main", "header": "loop",
                                           "values": {"m": 2147483647}, "instrs_added": v.added}]
    assert any("versioned on m = 2147483647" in line for line in report_text(result))


def test_the_copy_reads_a_constant_and_the_check_runs_once_per_entry():
    prog = parse_program(LCG)
    result = trace_program(prog, TRAIN, specialize=True)
    main = next(f for f in result.program["functions"] if f["name"] == "main")
    copy_divs = []
    inside = False
    for ins in main["instrs"]:
        if "label" in ins:
            inside = ins["label"].startswith(f"loop.{MARK}.v.")
        elif inside and ins["op"] == "div":
            copy_divs.append(ins["args"][1])
    # (every division of the copy, its traces' included)
    assert copy_divs and set(copy_divs) == {f"loop.{MARK}.vk.m"}
    consts = [i for i in main["instrs"] if i.get("dest") == f"loop.{MARK}.vk.m"]
    assert [c["value"] for c in consts] == [2147483647]
    # The check's three instructions run once: the traced program executes 3
    # more than without the versioning.
    plain = trace_program(prog, TRAIN)
    assert interp.run_capture(result.program, TRAIN)[1] == \
        interp.run_capture(plain.program, TRAIN)[1] + 3


def test_values_that_vary_between_entries_are_not_specialized():
    # The divisor changes with the outer loop: no single value, no version.
    text = program_text("specialize/divisor_varies_by_entry")
    prog = parse_program(text)
    result = trace_program(prog, ["200"], specialize=True)
    assert result.versions == []
    assert interp.run_capture(result.program, ["300"])[0] == interp.run_capture(prog, ["300"])[0]


def test_recorded_values_keep_only_what_a_literal_can_carry():
    class Stats:
        values = {}
    st = Stats()
    for var, value in (("a", 7), ("b", 7), ("c", 2 ** 53 + 1), ("z", 0), ("f", 1.5),
                       ("u", None)):
        record_value(st, var, value)
    record_value(st, "b", 8)
    record_value(st, "a", 7)
    assert st.values["b"] is VARIES and st.values["f"] is VARIES and st.values["u"] is VARIES
    # (2**53 + 1 reads as 2**53 in the reference tools; 0 does not divide)
    assert invariant_values(st) == {"a": 7}


@pytest.mark.parametrize("tier", ["cold", "auto", "fast"])
def test_every_tier_samples_the_same_values(tier):
    prog = parse_program(LCG)
    funcs = {f["name"]: f for f in prog["functions"]}
    rec = Recorder(funcs, {}, hot=5, values=True)
    interp.run(prog, TRAIN, out=io.StringIO(), recorder=rec, tier=tier, promote_after=50)
    st = rec.loops[("main", "loop")]
    assert st.samples == 1 and st.values == {"m": 2147483647}


def _versionable(param):
    """Only a loop reading a `div`'s divisor is versioned (`trace_record.wanted`),
    and a function on its int and bool parameters: a program with neither is
    traced exactly as without specialization."""
    prog = parse_program(param.values[0].read_text())
    return any(i.get("op") == "div" for f in prog["functions"] for i in f["instrs"]) or \
        any(f["name"] != "main" and any(a.get("type") in ("int", "bool")
                                        for a in f.get("args") or ())
            for f in prog["functions"])


CASES = [case for case in benchmark_cases() if _versionable(case)]


def test_most_benchmarks_can_be_versioned():
    assert len(CASES) >= 120



@pytest.mark.parametrize("path", CASES)
def test_specialized_programs_print_the_same(path):
    """Every benchmark that divides or calls a function with int or bool
    parameters, traced with specialization, prints what the original prints, on
    its training input and on another."""
    prog = parse_program(path.read_text())
    args = args_of(path)
    try:
        result = trace_program(prog, args, specialize=True)
    except BrilError:
        return                          # (a program that fails: nothing to compare)
    if not result.versions:
        return
    for other in (args, alt_args_of(path) or args):
        try:
            want = interp.run_capture(prog, other)[0]
        except BrilError:
            continue
        assert interp.run_capture(result.program, other)[0] == want, other


def test_the_jit_reads_the_constant_of_the_copy(monkeypatch):
    """A JIT region takes a variable the function assigns once, by a `const`, as
    that constant (LLVM folds the division), not as a live-in value."""
    from bril.backend import jit_lower
    seen = []
    real = jit_lower.RegionLowering.__init__

    def spy(self, *args):
        real(self, *args)
        seen.append(dict(self.known))

    monkeypatch.setattr(jit_lower.RegionLowering, "__init__", spy)
    prog = parse_program(LCG)
    result = trace_program(prog, TRAIN, specialize=True)
    got = outputs(result.program, ["20000", "2147483647", "16807", "0", "1"])
    assert got[1] == got[0][0]
    assert any(known.get(f"loop.{MARK}.vk.m") == 2147483647 for known in seen), seen


def test_the_command_versions_only_when_asked(tmp_path):
    prog = bril_json(LCG)

    def brili(*args):
        return run_brili(args, prog)

    plain = brili("-p", *TRAIN)
    for extra, versioned in (([], False), (["--trace-specialize"], True)):
        out = tmp_path / "t.json"
        done = brili("--trace", str(out), *extra, "--trace-report", "-", "-p", *TRAIN)
        assert done.returncode == 0 and done.stdout == plain.stdout
        # (the report's lines, then the run's count)
        assert done.stderr.endswith(plain.stderr)
        assert ("versioned on m = 2147483647" in done.stderr) == versioned
        assert (f"loop.{MARK}.v" in out.read_text()) == versioned
    assert "--trace-specialize" in brili("--help").stdout


# --- functions versioned on the values their calls pass ---------------------------

CLOSEST = BENCHMARKS / "spec" / "closest.bril"
CALLS = program_text("specialize/call_values")


def _agree(prog, result, inputs, tmp_path):
    """The versioned program prints what the original prints on every input, in
    the Python engine (every tier), under the JIT and as an executable."""
    for args in inputs:
        try:
            want = ("out", interp.run_capture(prog, args)[0])
        except BrilError as e:
            want = ("error", e.message)
        for tier in ("cold", "auto", "fast"):
            out = io.StringIO()
            try:
                interp.run(result.program, args, out=out, tier=tier)
                got = ("out", out.getvalue())
            except BrilError as e:
                got = ("error", e.message)
            assert got == want, (args, tier)
        jit = outputs(result.program, args)[1]
        assert jit == (want if want[0] == "error" else want[1]), args
        code, out = native_output(result.program, args, tmp_path)
        assert (code, out) == ((0, want[1]) if want[0] == "out" else (2, "")), args


def test_a_function_called_with_one_value_is_versioned_on_it(tmp_path):
    """closest(points, count, query, dim) is called with one count and one dim:
    a copy for dim 3 (a short loop native code unrolls whole), not for count 200
    (a trip count only compared, most often the input's size)."""
    prog = parse_program(CLOSEST.read_text())
    args = args_of(CLOSEST)
    plain = trace_program(prog, args)
    result = trace_program(prog, args, specialize=True)
    assert plain.versions == []
    [v] = [v for v in result.versions if v.header is None]
    assert (v.func, v.values) == ("closest", {"dim": 3}) and v.added > 0
    closest = next(f for f in result.program["functions"] if f["name"] == "closest")
    labels = [i["label"] for i in closest["instrs"] if "label" in i]
    assert f"{MARK}.fv" in labels and f"{MARK}.fv.point_body.{MARK}.t.coord_body" in labels
    # (the copy reads the constant, the original the parameter)
    copy = closest["instrs"][closest["instrs"].index({"label": f"{MARK}.fv"}):]
    assert not any("dim" in (i.get("args") or ()) for i in copy)
    # The check runs at each call: const, eq, br.
    calls = int(args[1])
    assert result.traced_count == plain.traced_count + 3 * calls
    _agree(prog, result, [args, alt_args_of(CLOSEST), ["30", "20", "3", "5"],
                          ["0", "3", "3", "1"], ["10", "4", "1", "2"]], tmp_path)
    assert report(result)["versions"] == [{"func": "closest", "header": None,
                                           "values": {"dim": 3}, "instrs_added": v.added}]
    assert "  @closest (its calls): versioned on dim = 3 " \
        f"(+{v.added} instrs)" in report_text(result)


def test_only_functions_whose_values_pay_are_versioned(tmp_path):
    """@fill: one k and one neg at every call (a bool: its test is the value
    itself); @total's value varies, @caller calls another function, @tiny runs
    no loop.  The copy ends the function (the original's end, which fell off,
    jumps over it)."""
    prog = parse_program(CALLS)
    result = trace_program(prog, ["200", "3"], optimize=False, specialize=True)
    assert [(v.func, v.header, v.values) for v in result.versions] == \
        [("fill", None, {"k": 3, "neg": True})]
    fill = next(f for f in result.program["functions"] if f["name"] == "fill")
    assert fill["instrs"][-1] == {"label": f"{MARK}.fv.end"}
    assert {"op": "jmp", "labels": [f"{MARK}.fv.end"]} in fill["instrs"]
    _agree(prog, result, [["200", "3"], ["300", "3"], ["40", "-2"], ["0", "3"], ["7", "0"]],
           tmp_path)


@pytest.mark.parametrize("tier", ["cold", "auto", "fast"])
def test_every_tier_counts_the_same_call_values(tier):
    prog = parse_program(CALLS)
    funcs = {f["name"]: f for f in prog["functions"]}
    rec = Recorder(funcs, {}, hot=5, values=True)
    interp.run(prog, ["30", "3"], out=io.StringIO(), recorder=rec, tier=tier,
               promote_after=50)
    fill, total, tiny = rec.calls["fill"], rec.calls["total"], rec.calls["tiny"]
    assert (fill.calls, fill.values) == (30, {"k": {(False, 3): 30},
                                              "neg": {(True, True): 30}})
    assert total.calls == 30 and total.values["i"] is MIXED
    assert tiny.calls == 30 * 16 and tiny.common(0.9) == {"k": 3}


def test_call_counts_keep_a_few_values_each():
    cs = CallStats("f", [(0, "a"), (1, "b"), (2, "c")])
    for i in range(20):
        cs.count((7, i, 1.5 if i == 3 else 2))
    cs.count((8, 0))
    # (a: 20 of 21 calls; b: too many values; c: a float once, then a missing argument)
    assert cs.calls == 21 and cs.common(0.9) == {"a": 7}
    assert cs.values["b"] is MIXED and cs.values["c"] is MIXED
