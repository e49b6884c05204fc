"""`bril.tracing.forked` and its use by `brili --trace`: the original program runs in a
child process while the tracer records `-O`, with the same output, count and
errors as a run in the process itself.

The checks run in fresh single-threaded interpreters (a pytest-xdist worker has
threads of its own, where `bril.tracing.forked` rightly declines to fork).
"""

import json
import subprocess
import sys

import pytest

from bril.ir.text import parse_program

from corpus import program_text
from helpers import run_brili


def _python(code):
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_child_returns_its_value_or_none():
    out = _python("""
import os
from bril.tracing import forked
assert forked.can_fork()
c = forked.start(lambda: ("x" * 300000, os.getpid(), 2 ** 70, None, 1.5, ("\\ud800",)))
text, pid, big, none, half, sur = c.result()
print(len(text), pid != os.getpid(), big == 2 ** 70, none, half, sur == ("\\ud800",))
def boom():
    raise ValueError("no")
print(forked.start(boom).result())
print(forked.start(lambda: object()).result())     # (marshal cannot write it)
c = forked.start(lambda: __import__("time").sleep(60))
c.cancel()
print(c.pid)
import threading
threading.Thread(target=__import__("time").sleep, args=(1,)).start()
print(forked.can_fork(), forked.start(lambda: 1))
""")
    assert out.split("\n")[:5] == ["300000 True True None 1.5 True", "None", "None", "None",
                                   "False None"]


# Sums i / 3 for i below n; the tests of errors add an instruction after its print.
LOOP = program_text("forked/thirds")


def loop_ending_with(tail):
    """LOOP with `tail` (Bril instructions) after its print."""
    return LOOP.replace("  print s;\n}", f"  print s;\n  {tail}\n}}")


def test_trace_program_runs_the_original_in_a_child():
    prog = json.dumps(parse_program(LOOP))
    out = _python(f"""
import io, json
from bril.tracing import forked, tracer
from bril.interpreter import interp
started = []
start = forked.start
def counted(*a):
    child = start(*a)
    started.append(child is not None)
    return child
forked.start = counted
prog = json.loads({prog!r})
buf = io.StringIO()
result = tracer.trace_program(prog, ["5000"], out=buf)
plain, count = interp.run_capture(json.loads({prog!r}), ["5000"])
print(started, buf.getvalue() == plain, result.original_count == count,
      result.traced_count < count)
""")
    assert out.strip() == "[True] True True True"


@pytest.mark.parametrize("tail, error", [
    ("z: int = const 0;\n  d: int = div s z;", "error: division by zero"),
    ("p: ptr<int> = alloc one;", None),          # a leak: the reference's error text
])
def test_trace_command_reports_the_original_s_error_after_its_output(tmp_path, tail, error):
    prog = json.dumps(parse_program(loop_ending_with(tail)))
    plain = run_brili(["-p", "3000"], prog)
    traced = run_brili(["--trace", str(tmp_path / "t.json"), "-p", "3000"], prog)
    assert plain.returncode == 2 and plain.stdout.strip()
    assert (traced.returncode, traced.stdout, traced.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)
    if error is not None:
        assert plain.stderr.strip() == error
    assert not (tmp_path / "t.json").exists()
