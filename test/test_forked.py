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


def _python(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
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


LOOP = """
@main(n: int) {
  i: int = const 0; s: int = const 0; one: int = const 1; three: int = const 3;
.head:
  c: bool = lt i n;
  br c .body .done;
.body:
  q: int = div i three;
  s: int = add s q;
  i: int = add i one;
  jmp .head;
.done:
  print s;
  %s
}
"""


def test_trace_program_runs_the_original_in_a_child():
    prog = json.dumps(parse_program(LOOP % ""))
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
    prog = json.dumps(parse_program(LOOP % tail))
    run = lambda *a: subprocess.run([sys.executable, "-m", "bril.cli.brili", *a],  # noqa: E731
                                    input=prog, capture_output=True, text=True, timeout=120)
    plain = run("-p", "3000")
    traced = run("--trace", str(tmp_path / "t.json"), "-p", "3000")
    assert plain.returncode == 2 and plain.stdout.strip()
    assert (traced.returncode, traced.stdout, traced.stderr) == (
        plain.returncode, plain.stdout, plain.stderr)
    if error is not None:
        assert plain.stderr.strip() == error
    assert not (tmp_path / "t.json").exists()
