"""The real `brili` command, as a subprocess: flags, pipelines, exit codes, errors.

The semantics are tested in process (test_interp.py); here we check what only
the command does: reading stdin/files/text, `-p`, `-L`, argument handling
(negative numbers, `-p` anywhere), one-line errors with exit code 2 and no
traceback, and a lean start-up (no lark for JSON input).
"""

import json
import os
import subprocess
import sys

import pytest

from corpus import CONFORMANCE, args_of
from helpers import run_brili
from bril.ir.text import parse_program

BRILI = [sys.executable, "-P", "-m", "bril.cli.brili"]
BRIL2JSON = [sys.executable, "-P", "-m", "bril.cli.bril2json"]

FACT = CONFORMANCE / "benchmarks" / "core" / "fact.bril"
LINKING = CONFORMANCE / "test" / "linking"

ADD_ONE = {"functions": [{"name": "main", "args": [{"name": "x", "type": "int"}], "instrs": [
    {"op": "const", "dest": "one", "type": "int", "value": 1},
    {"op": "add", "dest": "y", "type": "int", "args": ["x", "one"]},
    {"op": "print", "args": ["y"]},
]}]}


def brili(*args, stdin=b"", cwd=None):
    if isinstance(stdin, dict):
        stdin = json.dumps(stdin).encode()
    elif isinstance(stdin, str):
        stdin = stdin.encode()
    return subprocess.run(BRILI + list(args), input=stdin, capture_output=True, cwd=cwd,
                          timeout=120)


def assert_one_line_error(proc, message=None):
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("error: ")
    if message is not None:
        assert err == f"error: {message}\n"


def expected(path, suffix):
    with open(path.with_suffix(suffix), newline="") as fh:
        return fh.read()


def test_pipeline_with_profile():
    text = FACT.read_bytes()
    to_json = subprocess.run(BRIL2JSON, input=text, capture_output=True, timeout=120)
    assert to_json.returncode == 0
    proc = brili("-p", *args_of(FACT), stdin=to_json.stdout)
    assert proc.returncode == 0
    assert proc.stdout.decode() == expected(FACT, ".out")
    assert proc.stderr.decode() == expected(FACT, ".prof").strip() + "\n"


def test_profile_flag_anywhere_and_negative_arguments():
    for argv in (["-p", "-5"], ["-5", "-p"]):
        proc = brili(*argv, stdin=ADD_ONE)
        assert proc.returncode == 0
        assert proc.stdout == b"-4\n"
        assert proc.stderr == b"total_dyn_inst: 3\n"
    proc = brili("--", "-p", stdin=ADD_ONE)       # after --, -p is an argument of @main
    assert_one_line_error(proc, "int argument to main must be an integer; got -p")


def test_file_option_reads_text():
    proc = brili("-f", str(FACT), *args_of(FACT))
    assert proc.returncode == 0
    assert proc.stdout.decode() == expected(FACT, ".out")


def test_text_on_stdin():
    proc = brili("--text", "-p", *args_of(FACT), stdin=FACT.read_bytes())
    assert proc.returncode == 0
    assert proc.stdout.decode() == expected(FACT, ".out")
    assert proc.stderr.decode().startswith("total_dyn_inst: ")


def test_library_directories():
    path = LINKING / "diamond.bril"
    libs = [a for d in args_of(path) for a in ("-L", d)]
    proc = brili("-f", path.name, *libs, cwd=LINKING)
    assert proc.returncode == 0
    assert proc.stdout.decode() == expected(path, ".out")


def test_import_from_stdin_resolves_against_library_dirs():
    prog = parse_program('from "bitwise-ops.bril" import @AND; '
                         '@main { a: int = const 6; b: int = const 3; '
                         'c: int = call @AND a b; print c; }')
    proc = brili("-L", str(CONFORMANCE / "benchmarks" / "core"), stdin=prog)
    assert proc.returncode == 0
    assert proc.stdout == b"2\n"


def test_runtime_error_keeps_earlier_output():
    prog = parse_program("""@main {
      a: int = const 1; print a;
      z: int = const 0; q: int = div a z; print q; }""")
    proc = brili("-p", stdin=prog)
    assert_one_line_error(proc, "division by zero")
    assert proc.stdout == b"1\n"


@pytest.mark.parametrize("argv, message", [
    (["true"], "int argument to main must be an integer; got true"),
    ([], "mismatched main argument arity: expected 1; got 0"),
    (["1", "2"], "mismatched main argument arity: expected 1; got 2"),
])
def test_bad_main_arguments(argv, message):
    assert_one_line_error(brili(*argv, stdin=ADD_ONE), message)


@pytest.mark.parametrize("stdin", [b"", b"   \n", b"{not json", b"[1, 2]", b'{"functions": 3}',
                                   b"\xff\xfe", b'{"functions": [{"name": "f", "instrs": []}]}'])
def test_bad_input_is_one_line(stdin):
    assert_one_line_error(brili(stdin=stdin))


@pytest.mark.parametrize("name", ["BRIL_TRACE_BUDGET", "BRIL_TRACE_GROWTH_PRICE",
                                  "BRIL_TRACE_SIM_RUNS"])
def test_a_bad_setting_is_one_line(name, tmp_path):
    done = run_brili(["--trace", str(tmp_path / "t.json"), "1"], json.dumps(ADD_ONE),
                     **{name: "x"})
    assert done.returncode == 2 and done.stderr == f"error: {name} must be an integer, not 'x'\n"
    assert not (tmp_path / "t.json").exists()


def test_unknown_opcode_fails_when_reached():
    prog = {"functions": [{"name": "main", "instrs": [
        {"op": "const", "dest": "a", "type": "int", "value": 4},
        {"op": "print", "args": ["a"]},
        {"op": "frobnicate", "args": ["a"]},
    ]}]}
    proc = brili(stdin=prog)
    assert_one_line_error(proc, "unknown opcode frobnicate")
    assert proc.stdout == b"4\n"


def test_missing_file_and_option_argument():
    assert_one_line_error(brili("-f", "/nonexistent/x.bril"))
    assert_one_line_error(brili("-L"))


def test_a_closed_standard_input_is_one_line():
    # (started with fd 0 closed: Python's sys.stdin is None)
    done = subprocess.run([*BRILI, "-p"], stdin=subprocess.DEVNULL, capture_output=True,
                          preexec_fn=lambda: os.close(0), timeout=120)
    assert_one_line_error(done)
    assert done.stderr.startswith(b"error: cannot read standard input: ")


def test_help():
    proc = brili("--help")
    assert proc.returncode == 0
    assert b"usage: brili" in proc.stdout and b"-p" in proc.stdout


def test_dump_py_shows_generated_code():
    proc = brili("--dump-py", "3", stdin=ADD_ONE)
    assert proc.returncode == 0 and proc.stdout == b"4\n"
    assert b"def F0_main(v_x):" in proc.stderr


def _imported_after_run(argv, modules, cache_dir=None):
    """(stdout, stderr) of `brili ARGV` on ADD_ONE in a fresh process, its stderr
    ending in a line listing which of `modules` the run imported."""
    code = ("import sys\n"
            "from bril.cli import brili\n"
            f"try:\n    brili.main({list(argv)!r})\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {tuple(modules)!r} if m in sys.modules), "
            "file=sys.stderr)\n")
    env = dict(os.environ, BRIL_CACHE_DIR=str(cache_dir)) if cache_dir else None
    proc = subprocess.run([sys.executable, "-P", "-c", code], input=json.dumps(ADD_ONE).encode(),
                          capture_output=True, timeout=120, env=env)
    return proc.stdout, proc.stderr


def test_json_input_does_not_import_lark_or_llvmlite():
    assert _imported_after_run(["5"], ("lark", "llvmlite")) == (b"6\n", b"[]\n")


def test_a_run_in_the_cold_tier_imports_nothing_of_code_generation(tmp_path):
    # Most Bril runs are tiny and never leave the cold tier: the generator, its
    # analyses and its Python names are start-up they do not use.
    generation = ("bril.interpreter.codegen", "bril.analysis.typecheck",
                  "bril.native_runtime.pynames")
    assert _imported_after_run(["5"], generation, tmp_path) == (b"6\n", b"[]\n")


def test_jit_leaves_a_program_that_cannot_get_hot_to_the_interpreter(tmp_path):
    # No loop and no call: at most as many instructions run as the program has,
    # so `--jit` does not even import the JIT (a warm run is then no slower).
    got = _imported_after_run(["--jit", "-p", "5"], ("bril.backend.jit",), tmp_path)
    assert got == (b"6\n", b"total_dyn_inst: 3\n[]\n")


@pytest.mark.parametrize("text, expected", [
    ("@main { x: int = const 1; print x; }", False),
    ("@main { jmp .a; .a: print; }", False),                        # forward only
    ("@main { .a: jmp .a; }", True),                                 # a loop
    ("@main { b: bool = const true; .a: br b .c .a; .c: }", True),   # back edge by br
    ("@main { call @f; } @f { }", True),                             # may recurse
    ("@main { print; } @f { jmp .b; .b: } @g { .a: jmp .a; }", True),  # a loop, later
    ("@main { b: bool = const true; br b .x .y; .x: .y: } @f { }", False),
])
def test_may_run_long(text, expected):
    from bril.ir.program import may_run_long
    assert may_run_long(parse_program(text)) is expected


def test_lone_surrogate_prints_as_replacement_character():
    prog = {"functions": [{"name": "main", "instrs": [
        {"op": "const", "dest": "c", "type": "char", "value": "\ud800"},
        {"op": "print", "args": ["c"]},
    ]}]}
    proc = brili(stdin=prog)
    assert proc.returncode == 0
    assert proc.stdout == "\ufffd\n".encode()      # as JavaScript prints it
