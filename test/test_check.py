"""`bril-check` and the rules it shares with every tool's load-time check (`bril.ir.rules`).

* The conformance corpus's `test/check` programs: exactly the reference checker's
  messages, in its order.
* Every conformance program that runs (interp, benchmarks, linking) checks clean;
  the `interp-error` programs whose errors are static are reported without running,
  the others (errors only a run finds) check clean.
* Agreement with the engines' load-time check (`bril.ir.program.check_program`,
  which `brili` applies): over the corpus and the property generator's programs,
  a program passes the load check exactly when `bril-check` finds no shape problem,
  and every generated (well-typed, running) program checks clean; an operand of the
  wrong type injected into a generated program is reported by `bril-check`, and
  `brili` stops with a type error only there.
* Programs broken on purpose, and the command itself (exit codes, positions,
  start-up without lark for JSON).
"""

import copy
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import strategies
from corpus import CONFORMANCE, bril_files, case_id

from bril.ir.errors import BrilError
from bril.ir.ops import OPS
from bril.ir.program import check_program
from bril.ir.rules import problems, shape_problems
from bril.ir.text import parse_program

CHECK = CONFORMANCE / "test" / "check"
RUNS = bril_files("test", "interp") + bril_files("benchmarks") + bril_files("test", "linking")
ERRORS = bril_files("test", "interp-error")
# interp-error programs whose error the checker finds without running them.
STATIC_ERRORS = {
    "core-error/call-wrong-arity", "core-error/call-return-wrong-type",
    "core-error/duplicate_function", "core-error/duplicate_main",
    "core-error/call-wrong-argument-types", "core-error/call-wrong-declared-type",
    "core-error/call-return-nothing-error", "core-error/call-void-return-error",
    "core-error/call-nonvoid-return-nothing-error", "core-error/undefined-func",
    "mem-error/wrong_write",
}


def _lines(path):
    """The checker's report of a .bril file, as the reference writes it (LINE:COL: MSG)."""
    prog = parse_program(path.read_text(), positions=True)
    return [f"{p.pos[0]}:{p.pos[1]}: {p.message}" if p.pos else p.text()
            for p in problems(prog)]


@pytest.mark.parametrize("path", bril_files("test", "check"), ids=lambda p: p.stem)
def test_reference_checker_messages(path):
    expected = path.with_suffix(".err").read_text().splitlines()
    assert _lines(path) == expected


def test_running_programs_check_clean():
    assert RUNS, "conformance corpus not found"
    bad = {case_id(p): _lines(p) for p in RUNS if _lines(p)}
    assert not bad


def test_static_errors_reported_without_running():
    found = {str(p.relative_to(CONFORMANCE / "test" / "interp-error").with_suffix(""))
             for p in ERRORS if _lines(p)}
    assert found == STATIC_ERRORS


def _load_check_accepts(prog):
    try:
        check_program(prog)
        return True
    except BrilError:
        return False


def test_load_check_agrees_with_checker_on_corpus():
    paths = RUNS + ERRORS + bril_files("test", "check")
    for path in paths:
        prog = parse_program(path.read_text())
        assert _load_check_accepts(prog) == (not shape_problems(prog)), case_id(path)
        if not problems(prog):
            assert _load_check_accepts(prog), case_id(path)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(strategies.programs())
def test_generated_programs_check_clean(prog):
    assert problems(prog) == []
    assert _load_check_accepts(prog)


# --- programs broken on purpose ------------------------------------------------------

def _messages(prog):
    return [p.text() for p in problems(prog)]


def test_every_shape_problem_at_once():
    prog = {"functions": [
        {"name": "main", "instrs": [
            {"op": "add", "dest": "x", "type": "int", "args": [1, 2]},
            {"op": "frobnicate"},
            {"op": "const", "dest": "c", "type": "int"},
            {"labl": "oops"},
        ]},
        {"name": "g", "args": [{"name": "a"}], "instrs": []},
    ]}
    assert _messages(prog) == [
        "@main, instruction 0: field 'args' must be a list of strings",
        "@main, instruction 1: unknown opcode frobnicate",
        "@main, instruction 2: const needs a number, boolean or char 'value'",
        "@main, instruction 3: neither an instruction (no 'op') nor a label",
        "@g: every argument needs a 'name' and a 'type'",
    ]
    with pytest.raises(BrilError, match="instruction 0: field 'args'"):
        check_program(prog)        # the load check: the first of them


BROKEN = {
    "unknown type": ("@main { x: blah = id y; y: int = const 1; }", ["unknown type blah"]),
    "phi labels": ("@main { .a: x: int = const 1; y: int = phi x .a .a; }",
                   ["phi needs one label per argument; found 1 args, 2 labels"]),
    "main any": ("@main(a: any) { }", ["argument a of @main cannot have type any"]),
    "int const": ("@main { x: int = const 1.5; }", ["cannot convert 1.5 to an int"]),
    "twice": ("@f { } @f { } @main { call @f; }", ["multiple functions of name f found"]),
    "ret type": ("@f(): int { b: bool = const true; ret b; } @main { }",
                 ["b has type bool, but arg 0 for ret should have type int"]),
    "print undef": ("@main { print nothing; }", ["nothing (arg 0) undefined"]),
    "ptr mismatch": ("@main { n: int = const 1; p: ptr<int> = alloc n; "
                     "q: ptr<bool> = ptradd p n; free p; }",
                     ["p has type ptr<int>, but arg 0 for ptradd should have type ptr<bool>"]),
    "any ok": ("@main { x: any = const 1; y: int = add x x; print y; }", []),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_programs(name):
    source, expected = BROKEN[name]
    got = [p.message for p in problems(parse_program(source))]
    assert got == expected


# --- the command -----------------------------------------------------------------------

def _run(args, stdin=b""):
    return subprocess.run([sys.executable, "-P", "-m", "bril.cli.bril_check", *args],
                          input=stdin, capture_output=True)


def test_command_reports_positions_and_exits_1(tmp_path):
    src = tmp_path / "bad.bril"
    src.write_text("@main {\n  b: bool = const true;\n  x: int = add b b;\n  jmp .nowhere;\n}\n")
    r = _run(["-f", str(src)])
    assert r.returncode == 1
    assert r.stderr.decode().splitlines() == [
        f"{src}:3:3: error: b has type bool, but arg 0 for add should have type int",
        f"{src}:3:3: error: b has type bool, but arg 1 for add should have type int",
        f"{src}:4:3: error: label .nowhere undefined",
    ]
    # JSON with positions (bril2json -p), on stdin, named with --name
    prog = parse_program(src.read_text(), positions=True)
    r = _run(["--name", "p.json"], json.dumps(prog).encode())
    assert r.returncode == 1
    assert r.stderr.decode().splitlines()[2] == "p.json:4:3: error: label .nowhere undefined"
    # without positions: where in the program
    r = _run([], json.dumps(parse_program(src.read_text())).encode())
    assert r.stderr.decode().splitlines()[2] == \
        "-: error: @main, instruction 2: label .nowhere undefined"


def test_command_clean_and_bad_input(tmp_path):
    r = _run(["--text"], b"@main { x: int = const 1; print x; }\n")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    r = _run(["--text"], b"@main { x: int = const 1 print x; }\n")
    assert r.returncode == 1 and b": error: " in r.stderr
    r = _run(["-f", str(tmp_path / "missing.json")])
    assert r.returncode == 2 and r.stderr.decode().startswith("error: cannot read")
    r = _run(["--help"])
    assert r.returncode == 0 and b"--load" in r.stdout


def test_json_check_imports_no_lark():
    code = ("import sys, io; from bril.cli import bril_check; "
            "sys.stdin = io.TextIOWrapper(io.BytesIO(b'{\"functions\": []}')); "
            "code = bril_check._body([]); assert code == 0, code; "
            "assert 'lark' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True)
    assert r.stdout == b"ok\n", r.stderr


_PRIMS = ("int", "bool", "float", "char")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=strategies.cases(), data=st.data())
def test_injected_type_errors_are_found_and_brili_agrees(case, data):
    """An operand of the wrong type put into a well-typed program: bril-check reports
    it, and brili, if it runs that instruction, stops with a type error there (and
    never with a type error the checker did not see)."""
    from bril.interpreter.interp import run_capture
    prog = copy.deepcopy(case.prog)
    sites = []
    for func in prog["functions"]:
        types = {a["name"]: a["type"] for a in func.get("args") or []}
        types.update((i["dest"], i["type"]) for i in func["instrs"]
                     if "dest" in i and isinstance(i.get("type"), str))
        for instr in func["instrs"]:
            op = OPS.get(instr.get("op"))
            if op is None or not op.args or instr["op"] == "set" or \
                    len(instr.get("args") or ()) != len(op.args):
                continue
            for k, want in enumerate(op.args):
                wrong = sorted(v for v, t in types.items() if t in _PRIMS and t != want)
                if want in _PRIMS and wrong:
                    sites.append((instr, k, wrong))
    assume(sites)
    instr, k, wrong = data.draw(st.sampled_from(sites))
    instr["args"][k] = data.draw(st.sampled_from(wrong))
    found = [p.message for p in problems(prog)]
    assert any(f"arg {k} for {instr['op']}" in m for m in found), found
    try:
        run_capture(prog, case.argv)
    except BrilError as e:
        if "must be a" in e.message:
            assert e.message.startswith(f"{instr['op']} argument"), e.message
