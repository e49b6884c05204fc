"""Malformed input for every installed command: clean failure, never a crash or hang.

The commands are read from pyproject.toml at test time (`[project.scripts]` and
the plain scripts of `script-files`), so a new command is covered as soon as it
is declared.  Each input goes
to every command on stdin (bril2json, which reads the text format, gets the
text form where a case has one).  For every command and input:

* no `Traceback` on stderr, and the command ends within the timeout;
* if it fails, it exits with 2 and prints exactly one line, `error: ...`;
* inputs that are garbage for every tool (bad JSON, random bytes, deep
  nesting, wrong field types, unknown ops) must be rejected by every command;
  inputs that only a runner can notice (undefined variables and labels,
  wrong argument counts, bad `@main` arguments) must be rejected by `brili`.

All runs of one command go through a small thread pool, so each command takes
a few seconds.
"""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
import json
import os
import random
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60          # seconds; a hang is a failure, not a stuck suite
WORKERS = 3
ALL = "all"

# The command that reads the text format instead of JSON.
READS_TEXT = {"bril2json"}
# Commands whose input is a file named on the command line (bril-bench's TOML
# config): they get each input as that file instead of on stdin.
READS_FILE_ARGUMENT = {"bril-bench"}
# Command-line arguments that make a command do its main job on stdin.
# brilc without -o would write a.out into the working directory.
DEFAULT_ARGS = {"bril-opt": ["-O"], "brilc": ["--emit-llvm"]}
# Commands whose job is finding problems: a program with problems exits with 1
# and one `NAME[:LINE:COL]: error: ...` line per problem.
CHECKERS = {"bril-check"}


def commands():
    """name -> entry point ("module:function") of every installed command: the
    console scripts of `[project.scripts]` and the plain scripts of `script-files`
    (cli/bin/NAME, each `from MODULE import main`)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    found = dict(project["project"].get("scripts", {}))
    for path in project["tool"]["setuptools"].get("script-files", []):
        text = (ROOT / path).read_text()
        entry = re.search(r"^\s*from (\S+) import main$", text, re.M)
        assert entry, f"{path}: no `from MODULE import main`"
        found[Path(path).name] = f"{entry.group(1)}:main"
    return found


def invocation(entry):
    """Run the entry point itself, so a command declared but not yet
    reinstalled is still tested."""
    module, func = entry.split(":")
    return [sys.executable, "-P", "-c", f"import {module} as m; m.{func}()"]


@dataclass
class Case:
    name: str
    stdin: bytes                     # JSON (or anything) for JSON-reading commands
    text: bytes | None = None        # what text-reading commands get instead
    args: list = field(default_factory=list)
    reject: object = ALL             # ALL, or the set of commands that must fail
    only: set | None = None          # run only for these commands
    must_succeed: bool = False       # a valid (if unusual) input: exit 0


def _json(obj):
    return json.dumps(obj).encode()


def _main(*instrs, args=None):
    func = {"name": "main", "instrs": list(instrs)}
    if args:
        func["args"] = args
    return {"functions": [func]}


def _const(dest, typ, value):
    return {"op": "const", "dest": dest, "type": typ, "value": value}


def _print(*args):
    return {"op": "print", "args": list(args)}


_VALID = _main(_const("x", "int", 1), _print("x"))
_VALID_TEXT = b"@main {\n  x: int = const 1;\n  print x;\n}\n"


def _random_bytes(seed, n):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


def _huge_program(n):
    """A valid straight-line @main with about 2n instructions."""
    instrs = [_const("one", "int", 1), _const("x", "int", 0)]
    instrs += [{"op": "add", "dest": "x", "type": "int", "args": ["x", "one"]}] * n
    instrs += [_print("x")]
    text = "@main {\n  one: int = const 1;\n  x: int = const 0;\n"
    text += "  x: int = add x one;\n" * n + "  print x;\n}\n"
    return _json(_main(*instrs)), text.encode()


def _deep_ptr_program(depth):
    """An alloc whose type is ptr<ptr<...<int>...>>, `depth` levels deep
    (written out directly: json.dumps itself would recurse too deeply)."""
    typ = b'{"ptr": ' * depth + b'"int"' + b"}" * depth
    return (b'{"functions": [{"name": "main", "instrs": [{"op": "const", "dest": "x", '
            b'"type": "int", "value": 1}, {"op": "alloc", "dest": "p", "args": ["x"], '
            b'"type": ' + typ + b"}]}]}")


def cases():
    c = []
    # --- garbage for every command ---------------------------------------------
    c += [
        Case("empty", b""),
        Case("whitespace", b"  \n\t \n"),
        Case("truncated JSON", _json(_VALID)[:25], text=_VALID_TEXT[:20]),
        Case("invalid JSON", b'{"functions": [}', text=b"@main { x: int = const 1; "),
        Case("random bytes", _random_bytes(1, 300)),
        Case("random bytes, invalid UTF-8", b"\xff\xfe\xfa" + _random_bytes(2, 200)),
        Case("NUL bytes", b"\0" * 64),
        Case("deeply nested JSON list", b"[" * 100000 + b"]" * 100000),
        Case("deeply nested JSON object",
             b'{"functions": ' + b'{"a": ' * 50000 + b"1" + b"}" * 50000 + b"}"),
        Case("JSON number", b"42"),
        Case("JSON list", b"[]"),
        Case("JSON string", b'"@main {}"'),
    ]
    # --- wrong shapes: every command must reject (bril2json sees bad text) -----
    shapes = {
        "no functions": {},
        "functions not a list": {"functions": {"main": []}},
        "function not an object": {"functions": ["main"]},
        "function name not a string": {"functions": [{"name": 7, "instrs": []}]},
        "instrs not a list": {"functions": [{"name": "main", "instrs": "print"}]},
        "instruction not an object": _main("print"),
        "op not a string": _main({"op": 42, "args": []}),
        "unknown op": _main({"op": "frobnicate", "args": []}),
        "args not a list": _main(_const("x", "int", 1), {"op": "print", "args": "x"}),
        "args of numbers": _main({"op": "print", "args": [1, 2]}),
        "dest not a string": _main(_const(["x"], "int", 1)),
        "labels not a list": _main({"op": "jmp", "labels": "end"}, {"label": "end"}),
        "malformed type": _main(_const("x", {"ptr": "int", "extra": "bool"}, 1)),
        "type is a number": _main(_const("x", 3, 1)),
        "const value an object": _main(_const("x", "int", {"v": 1})),
        "argument without type": {"functions": [{"name": "main", "args": [{"name": "a"}],
                                                 "instrs": []}]},
    }
    c += [Case(name, _json(prog)) for name, prog in shapes.items()]
    digits = b"9" * 5000        # beyond Python's default int-parsing digit limit
    c.append(Case("5000-digit integer", b'{"functions": [{"name": "main", "instrs": '
                  b'[{"op": "const", "dest": "x", "type": "int", "value": ' + digits
                  + b'}]}]}', text=b"@main { x: int = const " + digits + b"; }"))
    # --- valid-looking programs only a runner can reject ---------------------
    runner = {
        "undefined variable": _main(_print("nope")),
        "undefined label": _main({"op": "jmp", "labels": ["nowhere"]}),
        "br with one label": _main(_const("b", "bool", False),
                                   {"op": "br", "args": ["b"], "labels": ["l"]}, {"label": "l"}),
        "add with one argument": _main(_const("x", "int", 1),
                                       {"op": "add", "dest": "y", "type": "int", "args": ["x"]}),
        "call with too many arguments": {"functions": [
            {"name": "main", "instrs": [_const("x", "int", 1),
                                        {"op": "call", "funcs": ["f"], "args": ["x"]}]},
            {"name": "f", "instrs": []}]},
        "call of an undefined function": _main({"op": "call", "funcs": ["ghost"]}),
        "duplicate function": {"functions": [{"name": "main", "instrs": []},
                                             {"name": "main", "instrs": []}]},
        "add of booleans": _main(_const("b", "bool", True),
                                 {"op": "add", "dest": "y", "type": "int", "args": ["b", "b"]}),
        "division by zero": _main(_const("z", "int", 0),
                                  {"op": "div", "dest": "y", "type": "int", "args": ["z", "z"]}),
        "endless recursion": {"functions": [
            {"name": "main", "instrs": [{"op": "call", "funcs": ["f"]}]},
            {"name": "f", "instrs": [{"op": "call", "funcs": ["f"]}]}]},
        "memory leak": _main(_const("n", "int", 2),
                             {"op": "alloc", "dest": "p", "type": {"ptr": "int"}, "args": ["n"]}),
        "load out of bounds": _main(
            _const("n", "int", 1),
            {"op": "alloc", "dest": "p", "type": {"ptr": "int"}, "args": ["n"]},
            {"op": "ptradd", "dest": "q", "type": {"ptr": "int"}, "args": ["p", "n"]},
            {"op": "load", "dest": "v", "type": "int", "args": ["q"]},
            {"op": "free", "args": ["p"]}),
        "guard outside speculation": _main(_const("b", "bool", False),
                                           {"op": "guard", "args": ["b"], "labels": ["l"]},
                                           {"label": "l"}),
    }
    c += [Case(name, _json(prog), reject={"brili"}) for name, prog in runner.items()]
    # --- unusual but possibly valid: no crash, whatever the verdict -----------
    odd = {
        "lone surrogate char": _main(_const("c", "char", "\ud800"), _print("c")),
        "char of two code points": _main(_const("c", "char", "ab"), _print("c")),
        "integer beyond 64 bits": _main(_const("x", "int", 1 << 70), _print("x")),
        "float written as integer": _main(_const("f", "float", 3), _print("f")),
        "no main": {"functions": [{"name": "f", "instrs": []}]},
        "unknown extra fields": {"functions": [{"name": "main", "instrs": [], "x": [1]}],
                                 "meta": {"k": None}},
    }
    c += [Case(name, _json(prog), reject=set()) for name, prog in odd.items()]
    c.append(Case("deeply nested pointer type", _deep_ptr_program(20000), reject=set()))
    c.append(Case("NaN literal", b'{"functions": [{"name": "main", "instrs": [{"op": "const",'
                  b' "dest": "f", "type": "float", "value": NaN}, {"op": "print", "args":'
                  b' ["f"]}]}]}', reject=set()))
    # --- bad @main arguments (brili) -------------------------------------------
    def main_of(typ):
        return _json(_main(_print("a"), args=[{"name": "a", "type": typ}]))
    for typ, arg in [("int", "abc"), ("int", "1.5x"), ("bool", "yes"), ("char", "ab"),
                     ("float", "abc"), ("float", "NaN")]:
        c.append(Case(f"@main({typ}) given {arg!r}", main_of(typ), args=[arg],
                      reject={"brili"}, only={"brili"}))
    c.append(Case("@main(int) given no argument", main_of("int"), reject={"brili"},
                  only={"brili"}))
    c.append(Case("@main() given an argument", _json(_VALID), args=["5"], reject={"brili"},
                  only={"brili"}))
    c.append(Case("@main(int) given 2^64", main_of("int"), args=[str(1 << 64)], reject=set(),
                  only={"brili"}))
    # --- bad command lines ----------------------------------------------------------
    c.append(Case("unknown option", _json(_VALID), text=_VALID_TEXT,
                  args=["--no-such-option"]))
    c.append(Case("unknown pass", _json(_VALID), args=["no-such-pass"], only={"bril-opt"}))
    c.append(Case("missing program file", b"", args=["-f", "/nonexistent/x.json"],
                  only={"brili"}))
    # --- broken benchmark configurations (bril-bench) -------------------------
    good_run = '[runs.base]\npipeline = ["brili -p {args}"]\n'
    configs = {
        "config without extract": good_run,
        "config with a bad regex": 'extract = "("\n' + good_run,
        "config regex without group": 'extract = "x"\n' + good_run,
        "config with a text timeout": 'extract = "(x)"\ntimeout = "soon"\n' + good_run,
        "config without runs": 'extract = "(x)"\n',
        "config pipeline not a list": 'extract = "(x)"\n[runs.base]\npipeline = "brili"\n',
        "config bad command template": 'extract = "(x)"\n[runs.base]\npipeline = ["{nope}"]\n',
    }
    c += [Case(name, text.encode(), only={"bril-bench"}) for name, text in configs.items()]
    # --- huge input: must work, and not take forever ----------------------------
    huge_json, huge_text = _huge_program(20000)
    c.append(Case("huge program", huge_json, text=huge_text, reject=set(), must_succeed=True))
    return c


CASES = cases()


def run_case(name, entry, case, tmp):
    stdin = case.text if (name in READS_TEXT and case.text is not None) else case.stdin
    args = case.args if case.args else DEFAULT_ARGS.get(name, [])
    if name in READS_FILE_ARGUMENT:
        path = tmp / (case.name.replace(" ", "_").replace("/", "_") + ".input")
        path.write_bytes(stdin)
        args, stdin = [*args, str(path)], b""
    try:
        r = subprocess.run(invocation(entry) + args, input=stdin, capture_output=True,
                           timeout=TIMEOUT, cwd=tmp)  # commands that write files (brilc: a.out) write there
    except subprocess.TimeoutExpired:
        return f"{case.name}: no answer within {TIMEOUT} s"
    err = r.stderr.decode("utf-8", "replace")
    lines = err.splitlines()
    must_reject = case.reject == ALL or name in case.reject
    if "Traceback" in err:
        return f"{case.name}: traceback (exit {r.returncode}):\n{err[-1500:]}"
    if r.returncode == 0:
        if must_reject:
            return f"{case.name}: accepted (exit 0), must be rejected"
        return None
    if case.must_succeed:
        return f"{case.name}: exit {r.returncode}, must succeed; stderr: {err[-500:]!r}"
    if name in CHECKERS and r.returncode == 1:
        if not lines or not all(": error: " in line for line in lines):
            return f"{case.name}: every line must be `FILE: error: ...`, got {err[-500:]!r}"
        return None
    if r.returncode != 2:
        return f"{case.name}: exit {r.returncode} (errors exit with 2); stderr: {err[-500:]!r}"
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return f"{case.name}: stderr must be one `error: ...` line, got {err[-500:]!r}"
    return None


def applies(case, name):
    if case.only is not None:
        return name in case.only
    # A file-argument command's input is not a program: nothing to succeed on.
    return not (case.must_succeed and name in READS_FILE_ARGUMENT)


@pytest.mark.parametrize("name", sorted(commands()))
def test_malformed_input_fails_cleanly(name, tmp_path):
    entry = commands()[name]
    todo = [c for c in CASES if applies(c, name)]
    with ThreadPoolExecutor(WORKERS) as pool:
        problems = [p for p in pool.map(lambda c: run_case(name, entry, c, tmp_path), todo)
                    if p]
    assert not problems, f"{name}: {len(problems)} of {len(todo)} inputs mishandled:\n" + \
        "\n".join(problems)


@pytest.mark.parametrize("name", sorted(set(commands()) - READS_FILE_ARGUMENT))
def test_a_closed_standard_input_fails_cleanly(name, tmp_path):
    # (started with fd 0 closed: Python's sys.stdin is None)
    r = subprocess.run(invocation(commands()[name]) + DEFAULT_ARGS.get(name, []),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT,
                       cwd=tmp_path, preexec_fn=lambda: os.close(0))
    err = r.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err
    assert r.returncode == 2 and err.startswith("error: cannot read standard input: ") \
        and err.count("\n") == 1, err
