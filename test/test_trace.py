"""The tracer: traced programs behave exactly like the originals, and traces pay.

For every benchmark (the corpus's and ours): trace on its ARGS, then run the
traced program; stdout must be identical.  Our programs with an `# ALT-ARGS:`
line are also run on that other input, which the traces were not built from.
"""

import re

import pytest

from bril import interp
from bril.errors import BrilError
from bril.text import parse_program
from bril.tracer import MARK, trace_program

from corpus import BENCHMARKS, CONFORMANCE, args_of, bril_files, case_id

_ALT_RE = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)


def alt_args_of(path):
    m = _ALT_RE.search(path.read_text())
    return m.group(1).split() if m else None


CASES = ([pytest.param(p, CONFORMANCE, id=case_id(p)) for p in bril_files("benchmarks")]
         + [pytest.param(p, BENCHMARKS, id="ours/" + case_id(p, BENCHMARKS))
            for p in bril_files(root=BENCHMARKS)])


def load(path):
    return parse_program(path.read_text())


@pytest.mark.parametrize("path,root", CASES)
def test_traced_program_prints_the_same(path, root):
    prog = load(path)
    args = args_of(path)
    expected = (path.with_suffix(".out")).read_text()
    result = trace_program(prog, args)
    # The tracer's own check ran the traced program on the training input.
    assert result.output == expected
    assert result.traced_output == expected
    # Never more instructions than the original on the training input.
    assert result.traced_count <= result.original_count
    alt = alt_args_of(path)
    if alt is not None:
        want_out, want_count = interp.run_capture(prog, alt)
        got_out, _ = interp.run_capture(result.program, alt)
        assert got_out == want_out


def _spec_ops(prog):
    return [i["op"] for f in prog["functions"] for i in f["instrs"]
            if i.get("op") in ("speculate", "guard", "commit")]


LOOP = """
@main(n: int) {
  i: int = const 0;
  s: int = const 0;
  one: int = const 1;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  s: int = call @step s i;
  i: int = add i one;
  jmp .head;
.done:
  print s;
}
@step(s: int, i: int): int {
  two: int = const 2;
  r: int = rem2 i two;
  ret r;
}
"""


def _loop_program():
    # `rem2` is not an op: build the callee from real ops instead.
    text = LOOP.replace("r: int = rem2 i two;", "q: int = div i two;\n  q: int = mul q two;\n"
                        "  d: int = sub i q;\n  r: int = add s d;")
    return parse_program(text)


def test_hot_loop_gets_a_trace_that_saves_instructions():
    prog = _loop_program()
    result = trace_program(prog, ["5000"])
    assert result.chains, "the hot loop should be traced"
    ops = _spec_ops(result.program)
    assert "speculate" in ops and "guard" in ops and "commit" in ops
    assert any(i.get(MARK) for f in result.program["functions"] for i in f["instrs"])
    out, count = interp.run_capture(result.program, ["5000"])
    assert out == "2500\n"
    assert count == result.traced_count < result.original_count * 0.9
    # Other inputs, including ones where the loop does not run at all.
    for n in ["0", "1", "7", "20000"]:
        assert interp.run_capture(result.program, [n])[0] == interp.run_capture(prog, [n])[0]


PHASES = """
@main(n: int, split: int) {
  i: int = const 0;
  a: int = const 0;
  b: int = const 0;
  one: int = const 1;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  early: bool = lt i split;
  br early .first .second;
.first:
  a: int = add a i;
  jmp .next;
.second:
  b: int = add b one;
.next:
  i: int = add i one;
  jmp .head;
.done:
  print a b;
}
"""


def test_branch_that_flips_midway_keeps_output_on_other_inputs():
    prog = parse_program(PHASES)
    result = trace_program(prog, ["4000", "3000"])
    out, count = interp.run_capture(result.program, ["4000", "3000"])
    assert out == interp.run_capture(prog, ["4000", "3000"])[0]
    assert count <= result.original_count
    for args in (["4000", "0"], ["4000", "4000"], ["100", "7"], ["0", "0"]):
        assert interp.run_capture(result.program, args)[0] == interp.run_capture(prog, args)[0]


EFFECTS = """
@main(n: int) {
  size: int = const 4;
  p: ptr<int> = alloc size;
  zero: int = const 0;
  one: int = const 1;
  store p zero;
  i: int = const 0;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  v: int = load p;
  v: int = add v i;
  store p v;
  w: int = load p;
  big: bool = gt w n;
  br big .reset .keep;
.reset:
  print w;
  store p zero;
.keep:
  i: int = add i one;
  jmp .head;
.done:
  v: int = load p;
  print v;
  free p;
}
"""


def test_effects_before_guards_are_never_repeated_or_lost():
    # The guard on `big` reads memory written in the same iteration, so it
    # cannot move above the store: the trace must commit before the store.
    prog = parse_program(EFFECTS)
    for train in (["300"], ["3000"]):
        result = trace_program(prog, train)
        for args in (["300"], ["3000"], ["5"], ["0"]):
            assert interp.run_capture(result.program, args)[0] == \
                interp.run_capture(prog, args)[0]


def test_error_inside_traced_loop_is_the_same_error():
    # Divides by (z - i): trained where z is never reached, run where it is.
    text = """
@main(n: int, z: int) {
  i: int = const 0;
  one: int = const 1;
  s: int = const 0;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  k: int = sub z i;
  q: int = div n k;
  s: int = add s q;
  i: int = add i one;
  jmp .head;
.done:
  print s;
}
"""
    prog = parse_program(text)
    result = trace_program(prog, ["2000", "-1"])
    assert result.chains
    for args in (["2000", "1500"], ["10", "0"]):
        with pytest.raises(BrilError, match="division by zero") as want:
            interp.run_capture(prog, args)
        with pytest.raises(BrilError, match="division by zero") as got:
            interp.run_capture(result.program, args)
        assert str(got.value) == str(want.value)


# --- the command ------------------------------------------------------------------

import json
import subprocess
import sys


def _brili(args, stdin):
    return subprocess.run([sys.executable, "-m", "bril.cli.brili", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_brili_trace_command_keeps_output_and_count(tmp_path):
    prog = json.dumps(_loop_program())
    plain = _brili(["-p", "3000"], prog)
    out_json = tmp_path / "traced.json"
    report = tmp_path / "report.json"
    traced = _brili(["--trace", str(out_json), "--trace-report", str(report), "-p", "3000"], prog)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    assert traced.stderr == plain.stderr            # the same total_dyn_inst line
    result = json.loads(out_json.read_text())
    rep = json.loads(report.read_text())
    assert rep["traces"] and rep["traced_count"] < rep["original_count"]
    t = rep["traces"][0]
    assert t["func"] == "main" and t["header"] == "head" and t["guards"] >= 1
    assert t["path"][0] == ["main", "head"]
    again = _brili(["-p", "3000"], json.dumps(result))
    assert again.stdout == plain.stdout
    assert again.stderr == f"total_dyn_inst: {rep['traced_count']}\n"


def test_brili_trace_error_run_writes_nothing(tmp_path):
    text = LOOP.replace("r: int = rem2 i two;", "z: int = const 0;\n  r: int = div s z;")
    out_json = tmp_path / "traced.json"
    proc = subprocess.run([sys.executable, "-m", "bril.cli.brili", "--text", "--trace",
                           str(out_json), "100"], input=text, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: division by zero"
    assert not out_json.exists()
