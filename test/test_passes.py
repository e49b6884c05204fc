"""Optimization passes preserve behaviour, on every corpus program, in process.

For each program of the conformance benchmarks and of our own benchmarks (and,
for the extensions and error paths, the conformance `test/interp` and
`test/interp-error` programs), every pass alone, the SSA round trip and the
`-O` pipeline must leave stdout, the error (message included) and, for the
passes that promise it, a dynamic instruction count no higher than before.
Runs use our interpreter (`bril.interpreter.interp`); each original runs once (cached).
A pass result equal to its input is not run again: its behaviour is the
original's by construction.

Small hand-written programs check what individual passes do (folding, what
must stay, SSA shape).
"""

import copy
import functools
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bril.analysis.cfg import CFG, natural_loops
from bril.ir.errors import BrilError
from bril.interpreter.interp import run
from bril.ir.program import check_program
from bril.ir.text import parse_program
from bril.passes import registry
from bril.passes.ssa import from_ssa, maybe_unassigned_variables, to_ssa
from corpus import (BENCHMARKS, CONFORMANCE, ROOT, args_of, bril_files, case_id, our_programs,
                    turnt_run)

PROGRAMS = (bril_files("benchmarks") + our_programs()
            + bril_files("test", "interp") + bril_files("test", "interp-error"))

PIPELINES = {name: [name] for name in registry.PASSES}
PIPELINES["ssa-roundtrip"] = ["to-ssa", "from-ssa"]
PIPELINES["-O"] = registry.O_PIPELINE

# These add copies (set/get, undef) and may raise the count; all others must not.
MAY_ADD_INSTRUCTIONS = {"to-ssa", "from-ssa", "ssa-roundtrip"}


def _id(path):
    if BENCHMARKS in path.parents:
        return "ours/" + case_id(path, BENCHMARKS)
    return case_id(path, CONFORMANCE)


def outcome(prog, argv):
    """(stdout, error message or None, dynamic count or None) of one run."""
    out = io.StringIO()
    try:
        count = run(prog, argv, out=out)
    except BrilError as err:
        return out.getvalue(), str(err), None
    return out.getvalue(), None, count


@functools.lru_cache(maxsize=None)
def _original(path):
    prog = parse_program(path.read_text(encoding="utf-8"))
    argv = args_of(path)
    return prog, argv, outcome(prog, argv)


def test_corpus_is_present():
    assert len(bril_files("benchmarks")) >= 90, CONFORMANCE


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_pipeline_preserves_behaviour(path, pipeline):
    prog, argv, expected = _original(path)
    pristine = copy.deepcopy(prog)
    new = registry.run_pipeline(prog, PIPELINES[pipeline])
    assert prog == pristine, "the pass modified its input"
    check_program(new)
    json.dumps(new, allow_nan=False)        # only JSON-representable constants
    got = expected if new == prog else outcome(new, argv)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    if pipeline not in MAY_ADD_INSTRUCTIONS and expected[2] is not None:
        assert got[2] <= expected[2]
    snapshot = path.with_suffix(".opt.prof")
    if pipeline == "-O" and snapshot.exists():
        # (turnt's `opt` env writes this snapshot; test_turnt_opt_env_on_one_program_per_folder
        # runs that env itself, as `bril-opt -O | brili -p`, on one program per folder)
        assert f"total_dyn_inst: {got[2]}" == snapshot.read_text().strip()


@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_to_ssa_assigns_each_variable_once(path):
    prog, _, _ = _original(path)
    ssa = to_ssa(prog)
    for func, orig in zip(ssa["functions"], prog["functions"]):
        if func == orig:
            continue                        # left alone (speculation, set/get, phi, ...)
        kept = maybe_unassigned_variables(orig)   # stay ordinary variables
        dests = [i["dest"] for i in func["instrs"] if "dest" in i and i["dest"] not in kept]
        dests += [a["name"] for a in func.get("args", ())]
        assert len(dests) == len(set(dests)), func["name"]
        assert "undef" not in {i.get("op") for i in func["instrs"]} - \
            {i.get("op") for i in orig["instrs"]}
        gets = [i["dest"] for i in func["instrs"] if i.get("op") == "get"]
        sets = {i["args"][0] for i in func["instrs"] if i.get("op") == "set"}
        assert sets == set(gets)
    back = from_ssa(ssa)
    for func, orig in zip(back["functions"], prog["functions"]):
        if not {"set", "get"} & {i.get("op") for i in orig["instrs"]}:
            assert not {"set", "get"} & {i.get("op") for i in func["instrs"]}, func["name"]


# --- What the passes do, on small programs -----------------------------------------

def main_of(src, pipeline):
    """The instructions of @main after the passes, in text-like tuples."""
    prog = parse_program(src)
    new = registry.run_pipeline(prog, pipeline)
    return [_short(i) for i in new["functions"][0]["instrs"]]


def _short(instr):
    if "op" not in instr:
        return ("label", instr["label"])
    parts = [instr["op"]]
    if "dest" in instr:
        parts.insert(0, instr["dest"])
    if "value" in instr:
        parts.append(instr["value"])
    parts += instr.get("args", []) + instr.get("labels", [])
    return tuple(parts)


def test_lvn_folds_and_propagates_copies():
    got = main_of("""@main(x: int) {
      a: int = const 4; b: int = const 2; s: int = add a b;
      c: int = id x; d: int = add c s; e: int = add s x; print d e; }""", ["lvn", "tdce"])
    assert got == [("s", "const", 6), ("d", "add", "x", "s"), ("print", "d", "d")]


def test_lvn_keeps_division_by_zero_and_its_error():
    src = """@main { a: int = const 1; z: int = const 0; q: int = div a z; print a; }"""
    got = main_of(src, registry.O_PIPELINE)
    assert ("q", "div", "a", "z") in got
    prog = registry.optimize(parse_program(src))
    assert outcome(prog, [])[1] == "division by zero"


def test_no_nan_or_infinity_constants():
    src = """@main { z: float = const 0; n: float = fdiv z z; one: float = const 1;
      inf: float = fdiv one z; neg: float = const -1; p: float = fmul z neg;
      print n inf p; }"""
    prog = registry.optimize(parse_program(src))
    consts = {i["dest"]: i["value"] for i in prog["functions"][0]["instrs"]
              if i.get("op") == "const"}
    assert "n" not in consts and "inf" not in consts
    assert consts["p"] == 0 and math.copysign(1, consts["p"]) == -1   # exactly -0.0
    json.dumps(prog, allow_nan=False)
    assert outcome(prog, [])[:2] == outcome(parse_program(src), [])[:2]


def test_dead_code_that_can_fail_stays():
    src = """@main {
      v: any = const 4; b: bool = and v v;
      one: int = const 1; p: ptr<int> = alloc one; x: int = load p;
      z: int = const 0; q: int = div one z;
      u: int = undef; w: int = add u one;
      free p; }"""
    got = main_of(src, ["tdce"])
    kept = {i[0] for i in got if len(i) > 1 and i[1] != "const"}
    assert {"b", "p", "x", "q", "w"} <= kept


def test_dead_code_that_cannot_fail_goes():
    got = main_of("""@main(n: int) { a: int = const 1; b: int = add n a; c: bool = lt b n;
      d: int = id b; nop; print n; }""", ["tdce"])
    assert got == [("print", "n")]


def test_constprop_folds_branches_across_blocks():
    got = main_of("""@main {
      x: int = const 3; y: int = const 4;
      c: bool = lt x y; br c .yes .no;
    .yes: s: int = add x y; print s; jmp .end;
    .no: print x;
    .end: ret; }""", ["constprop", "tdce", "cfgclean"])
    assert ("s", "const", 7) in got
    assert not any(i[0] in ("br", "jmp") for i in got)
    assert ("print", "x") not in got


def test_constprop_keeps_constants_that_differ_only_on_dead_paths():
    # x is 1 on the loop's back edge only while the dead branch never runs:
    # the optimistic analysis proves the loop test constant and the print too.
    got = main_of("""@main {
      x: int = const 1; t: bool = const true; i: int = const 0;
    .head: c: bool = lt i x; br c .body .done;
    .body: br t .same .other;
    .same: x: int = const 1; jmp .latch;
    .other: x: int = const 2; jmp .latch;
    .latch: i: int = add i x; jmp .head;
    .done: y: int = add x x; print y; }""", ["constprop"])
    assert ("y", "const", 2) in got
    assert ("x", "const", 2) in got             # the dead branch is left for cfgclean
    assert ("jmp", "same") in got               # its `br` became a jump


def test_constprop_merges_only_where_variables_live():
    # A nest of n loops: each counter is merged at its own header, not at every
    # enclosing one (n^2 merges made -O quadratic on deep nests).
    from bril.passes.constprop import _Function
    n = 300
    lines = ["one: int = const 1;"]
    for k in range(n):
        lines += [f"i{k}: int = const 0;", f".h{k}: c{k}: bool = lt i{k} one;",
                  f"br c{k} .b{k} .e{k};", f".b{k}:"]
    lines.append("print one;")
    for k in reversed(range(n)):
        lines += [f"i{k}: int = add i{k} one;", f"jmp .h{k};", f".e{k}:"]
    prog = parse_program("@main {\n" + "\n".join(lines) + "\n}")
    fn = _Function(CFG.from_function(prog["functions"][0]))
    assert sum(len(m) for m in fn.merges.values()) <= 2 * n
    assert outcome(registry.run_pipeline(prog, ["constprop"]), []) == outcome(prog, [])


def test_cfgclean_rotates_loops_and_saves_jumps():
    src = """@main(n: int) { i: int = const 0; one: int = const 1;
    .head: c: bool = lt i n; br c .body .done;
    .body: i: int = add i one; jmp .head;
    .done: print i; }"""
    before = outcome(parse_program(src), ["10"])
    after = outcome(registry.run_pipeline(parse_program(src), ["cfgclean"]), ["10"])
    assert after[:2] == before[:2]
    assert after[2] == before[2] - 10           # one `jmp` fewer per iteration


def test_cfgclean_keeps_a_loop_entered_from_two_blocks():
    # .head is entered from the entry block and from .redo: copying its test into
    # .redo alone (rotation) would leave a cycle with two entries and no natural
    # loop, which every tier compiles far worse (the sum-check benchmark's shape).
    src = """@main(n: int, k: int) { i: int = const 0; one: int = const 1;
    z: bool = eq k i; br z .redo .head;
    .head: c: bool = lt i n; br c .body .done;
    .body: i: int = add i one; r: bool = eq i k; br r .redo .head;
    .redo: i: int = add i one; jmp .head;
    .done: print i; }"""
    prog = registry.run_pipeline(parse_program(src), ["cfgclean"])
    cfg = CFG.from_function(prog["functions"][0])
    assert [l.header for l in natural_loops(cfg)] == ["head"]
    for argv in (["10", "0"], ["10", "4"]):
        assert outcome(prog, argv)[:2] == outcome(parse_program(src), argv)[:2]


def test_licm_hoists_invariant_code_only():
    # cfgclean first rotates the loop: then the body runs at least once per
    # entry, so hoisting cannot add executed instructions.
    src = """@main(n: int, k: int) { i: int = const 0; s: int = const 0;
    .head: c: bool = lt i n; br c .body .done;
    .body: one: int = const 1; t: int = mul k k; z: int = const 0; q: int = div k z;
      s: int = add s t; i: int = add i one; jmp .head;
    .done: print s; }"""
    got = main_of(src, ["cfgclean", "licm"])
    body = got[got.index(("label", "body")):]
    assert ("one", "const", 1) not in body and ("t", "mul", "k", "k") not in body
    assert ("one", "const", 1) in got and ("t", "mul", "k", "k") in got
    assert ("q", "div", "k", "z") in body        # may fail: stays in the loop
    prog = registry.run_pipeline(parse_program(src), ["cfgclean", "licm"])
    for argv in (["0", "3"], ["2", "3"]):
        assert outcome(prog, argv)[:2] == outcome(parse_program(src), argv)[:2]


def test_licm_does_not_hoist_from_blocks_that_may_not_run():
    src = """@main(n: int, k: int) { i: int = const 0;
    .head: c: bool = lt i n; br c .body .done;
    .body: t: int = mul k k; one: int = const 1; i: int = add i one; jmp .head;
    .done: print i; }"""
    assert main_of(src, ["licm"]) == main_of(src, [])


def test_inline_renames_and_removes_the_call():
    src = """@main { x: int = const 5; y: int = call @sq x; print y x; }
    @sq(x: int): int { r: int = mul x x; ret r; }"""
    prog = registry.run_pipeline(parse_program(src), ["inline"])
    main = [_short(i) for i in prog["functions"][0]["instrs"]]
    assert not any(i[0] == "call" for i in main)
    assert ("y", "mul", "x", "x") in main
    assert outcome(prog, []) == ("25 5\n", None, 3)


def test_inline_keeps_calls_whose_checks_could_fail():
    src = """@main { x: int = const 1; call @f x; v: int = call @g; print v; }
    @f(b: bool) { print b; }
    @g: int { ret; }"""
    prog = registry.run_pipeline(parse_program(src), ["inline"])
    assert prog == parse_program(src)


def test_inline_keeps_the_names_loads_report():
    # An uninitialized read names the pointer variable: an inlined load keeps it
    # (copied in from the argument), so the error reads the same.
    callee = "@get(cell: ptr<int>): int { x: int = load cell; y: int = add x x; ret y; }"
    src = """@main(n: int) { one: int = const 1; p: ptr<int> = alloc one;
      b: bool = lt n one; br b .skip .fill;
    .fill: store p n;
    .skip: v: int = call @get p; w: int = call @get p; print v w; free p; }""" + callee
    prog = registry.run_pipeline(parse_program(src), ["inline"])
    main = [_short(i) for i in prog["functions"][0]["instrs"]]
    assert not any("call" in i for i in main)
    assert main.count(("cell", "id", "p")) == 2
    assert outcome(prog, ["0"])[1] == "Pointer cell points to uninitialized data"
    assert outcome(prog, ["0"])[:2] == outcome(parse_program(src), ["0"])[:2]
    before, after = outcome(parse_program(src), ["5"]), outcome(prog, ["5"])
    assert after[:2] == before[:2] == ("10 10\n", None) and after[2] < before[2]
    # A caller with a variable of that name keeps the call.
    clash = """@main { one: int = const 1; cell: ptr<int> = alloc one; q: ptr<int> = id cell;
      v: int = call @get q; print v; free cell; }""" + callee
    assert registry.run_pipeline(parse_program(clash), ["inline"]) == parse_program(clash)
    # A callee that loads in a loop stays a call (its call is paid once per loop).
    looping = """@main { one: int = const 1; p: ptr<int> = alloc one; store p one;
      v: int = call @sum p one; print v; free p; }
    @sum(cell: ptr<int>, n: int): int { i: int = const 0; s: int = const 0;
    .head: c: bool = lt i n; br c .body .done;
    .body: x: int = load cell; s: int = add s x; one: int = const 1; i: int = add i one;
      jmp .head;
    .done: ret s; }"""
    assert registry.run_pipeline(parse_program(looping), ["inline"]) == parse_program(looping)


def test_prune_drops_the_functions_main_never_reaches():
    src = """@main { x: int = const 2; y: int = call @f x; print y; }
    @f(x: int): int { y: int = call @g x; z: int = call @f y; ret y; }
    @g(x: int): int { ret x; }
    @h(x: int): int { y: int = call @k x; ret y; }
    @k(x: int): int { ret x; }"""
    prog = parse_program(src)
    pruned = registry.run_pipeline(prog, ["prune"])
    assert [f["name"] for f in pruned["functions"]] == ["main", "f", "g"]
    assert prog == parse_program(src)
    # A module without @main (others import its functions) stays whole.
    module = parse_program(src.replace("@main", "@other"))
    assert registry.run_pipeline(module, ["prune"]) == module
    # The tracer's -O program: a callee inlined at every call is gone.
    from bril.tracing.tracer import _optimized
    inlined = _optimized(parse_program("""@main { x: int = const 2; y: int = call @sq x;
      print y; } @sq(x: int): int { r: int = mul x x; ret r; }"""))
    assert [f["name"] for f in inlined["functions"]] == ["main"]


def test_to_ssa_keeps_variables_that_may_be_read_unassigned():
    src = """@main(n: int) { i: int = const 0; one: int = const 1;
    .head: c: bool = lt i n; br c .body .done;
    .body: x: int = id i; i: int = add i one; jmp .head;
    .done: print x; }"""
    prog = parse_program(src)
    assert maybe_unassigned_variables(prog["functions"][0]) == {"x"}
    ssa = to_ssa(prog)
    assert [i["dest"] for i in ssa["functions"][0]["instrs"] if i.get("dest") == "x"] == ["x"]
    for argv in (["0"], ["2"]):             # with 0 the print fails: x was never assigned
        assert outcome(ssa, argv)[:2] == outcome(prog, argv)[:2]
    assert outcome(prog, ["0"])[1] == "undefined variable x"


def test_ssa_round_trip_handles_the_swap_problem():
    src = """@main { i: int = const 3; one: int = const 1; zero: int = const 0;
      x0: int = const 0; y0: int = const 1; set x x0; set y y0;
    .loop: x: int = get; y: int = get; print x y;
      c: bool = gt i zero; i: int = sub i one;
      set x y; set y x; br c .loop .end;
    .end: }"""
    back = from_ssa(parse_program(src))
    ops = {i.get("op") for i in back["functions"][0]["instrs"]}
    assert not {"set", "get"} & ops
    assert outcome(back, [])[:2] == outcome(parse_program(src), [])[:2]


def test_functions_with_speculation_are_left_alone():
    src = """@main { v: int = const 4; speculate; v: int = const 2;
      b: bool = const false; guard b .failed; commit; print v; ret;
    .failed: print v; }"""
    prog = parse_program(src)
    for name in registry.PASSES:
        assert registry.run_pipeline(prog, [name]) == prog, name


def test_passes_keep_unknown_fields():
    prog = parse_program("@main { a: int = const 1; b: int = add a a; print b; }")
    for instr in prog["functions"][0]["instrs"]:
        instr["note"] = "kept"
    new = registry.run_pipeline(prog, ["lvn"])
    assert all(i.get("note") == "kept" for i in new["functions"][0]["instrs"])


# --- The command --------------------------------------------------------------------

def bril_opt(*args, stdin=b""):
    """Run the installed `bril-opt` console script (as users do)."""
    script = Path(sys.executable).parent / "bril-opt"
    cmd = [str(script)] if script.exists() else [sys.executable, "-P", "-m", "bril.cli.bril_opt"]
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, timeout=120)


def test_command_runs_a_pipeline_like_the_library():
    prog = parse_program((CONFORMANCE / "benchmarks" / "core" / "sum-check.bril").read_text())
    done = bril_opt("lvn", "tdce", stdin=json.dumps(prog).encode())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == registry.run_pipeline(prog, ["lvn", "tdce"])
    done = bril_opt("-O", stdin=json.dumps(prog).encode())
    assert json.loads(done.stdout) == registry.optimize(prog)


def test_the_command_with_plain_arguments_starts_without_click():
    # (`bril-opt -O` in a pipeline: click's import was half of its 90-100 ms run)
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "from bril.cli import bril_opt\n"
            "sys.argv = ['bril-opt', '-O', 'tdce']\n"
            "try:\n    bril_opt.main()\nexcept SystemExit:\n    pass\n"
            "print('click' in set(sys.modules) - before, file=sys.stderr)\n")
    prog = parse_program((CONFORMANCE / "benchmarks" / "core" / "sum-check.bril").read_text())
    done = subprocess.run([sys.executable, "-P", "-c", code], input=json.dumps(prog).encode(),
                          capture_output=True, timeout=120)
    assert done.stderr == b"False\n"
    assert json.loads(done.stdout) == registry.run_pipeline(registry.optimize(prog), ["tdce"])


def test_command_lists_the_passes():
    done = bril_opt("--list")
    assert done.returncode == 0
    text = done.stdout.decode()
    for name, p in registry.PASSES.items():
        assert f"{name}  " in text and p.description in text
    assert " ".join(registry.O_PIPELINE) in text


@pytest.mark.parametrize("args, stdin, message", [
    (["nope"], b'{"functions": []}', "error: unknown pass 'nope' (see bril-opt --list)"),
    (["tdce"], b'{"functions": [', "error: 1:16: invalid JSON: Expecting value"),
    (["-O"], b'{"functions": [{"name": "main", "instrs": [{"op": "frob"}]}]}',
     "error: @main, instruction 0: unknown opcode frob"),
])
def test_command_errors_are_one_line(args, stdin, message):
    done = bril_opt(*args, stdin=stdin)
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == message + "\n"


def test_turnt_opt_env_on_one_program_per_folder():
    """The `opt` env of turnt.toml: stdout as X.out, optimized count as X.opt.prof."""
    programs = sorted({p.parent: p for p in bril_files(root=BENCHMARKS)}.values())
    assert programs, BENCHMARKS
    done = turnt_run(["-j", "-e", "opt"] + [str(p) for p in programs], cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(re.findall(r"^ok \d+ ", done.stdout, re.M)) == len(programs), done.stdout


PORTABILITY = """
@main {
  a: int = const 3000000000;
  b: int = mul a a;
  c: int = const 5;
  d: int = add b c;
  e: int = sub d d;
  print d e;
}
"""


@pytest.mark.parametrize("name", ["constprop", "lvn", "-O"])
def test_folding_never_writes_a_literal_a_double_cannot_hold(name):
    # 9000000000000000005 would read as 9000000000000000000 in the reference tools
    # (JSON numbers as doubles): that addition stays; 9e18 and 0 fold.
    prog = parse_program(PORTABILITY)
    new = registry.optimize(prog) if name == "-O" else registry.PASSES[name].run(prog)
    literals = {i["value"] for i in new["functions"][0]["instrs"] if i.get("op") == "const"}
    assert all(float(v) == v for v in literals), literals
    assert 9000000000000000005 not in literals
    out = io.StringIO()
    run(new, [], out=out)
    assert out.getvalue() == "9000000000000000005 0\n"
