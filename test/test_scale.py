"""Programs of unusual size and shape through every tool, with exact results.

Each shape of `benchmarks/shapes.py` (a 600-block jump chain, 100,000 adds in
one block, 120 nested loops, 20,000 variables, a 3,000-deep call chain, 3,000
functions) at its table size goes through each tool as a whole process, as a
user runs it: `brili -p` (tiers and the JIT), `brili --no-jit -p`, `bril-opt -O | brili`,
`brili --trace`, `bril2txt | bril2json` and `brilc` + its executable.  Output
and `total_dyn_inst` must be exactly `shapes.expected`'s.  Each (shape, tool)
is its own test, so pytest-xdist spreads them over the cores; the few that take
several seconds are marked `slow` (they still run in CI: `-m "not slow"` is
only for a quick local run).  `python benchmarks/bench_scale.py` measures the
same cases at growing sizes.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import shapes  # noqa: E402

TOOLS = ["brili", "interp", "opt", "trace", "text", "brilc"]

# (shape, tool) cases that take more than a few seconds on a 2-core machine.
SLOW = {("straight-line", t) for t in TOOLS} | {
    ("many-variables", "trace"), ("many-variables", "brilc"), ("many-variables", "interp"),
    ("call-chain", "trace"), ("call-chain", "brilc"), ("call-chain", "opt"),
    ("many-functions", "trace"), ("many-functions", "brilc"), ("many-functions", "opt"),
}

TIMEOUT = 600


def _cases():
    for shape in shapes.SHAPES:
        for tool in TOOLS:
            marks = [pytest.mark.slow] if (shape, tool) in SLOW else []
            yield pytest.param(shape, tool, id=f"{shape}-{tool}", marks=marks)


def _run(cmd, data=b"", **kw):
    r = subprocess.run(cmd, input=data, capture_output=True, timeout=TIMEOUT, **kw)
    assert r.returncode == 0, (cmd, r.returncode, r.stderr.decode(errors="replace")[-2000:])
    return r


def _count(stderr):
    for line in stderr.decode().splitlines():
        if line.startswith("total_dyn_inst:"):
            return int(line.split(":")[1])
    return None


def _check(r, shape, size, count=True):
    out, dyn = shapes.expected(shape, size)
    assert r.stdout.decode() == out
    if count:
        assert _count(r.stderr) == dyn


@pytest.mark.parametrize("shape,tool", list(_cases()))
def test_shape(shape, tool, tmp_path):
    size = shapes.SHAPES[shape][1]
    prog = shapes.program(shape, size)
    data = json.dumps(prog).encode()
    if tool == "brili":
        _check(_run(["brili", "-p"], data), shape, size)
    elif tool == "interp":
        _check(_run(["brili", "--no-jit", "-p"], data), shape, size)
    elif tool == "opt":
        opt = _run(["bril-opt", "-O"], data)
        r = _run(["brili", "-p"], opt.stdout)
        _check(r, shape, size, count=False)
        # -O never runs more instructions than the original.
        assert _count(r.stderr) <= shapes.expected(shape, size)[1]
    elif tool == "trace":
        traced = tmp_path / "traced.json"
        _check(_run(["brili", "--trace", str(traced), "-p"], data), shape, size)
        _check(_run(["brili", "-p"], traced.read_bytes()), shape, size, count=False)
    elif tool == "text":
        text = _run(["bril2txt"], data).stdout
        back = _run(["bril2json"], text).stdout
        assert json.loads(back) == prog
    elif tool == "brilc":
        exe = tmp_path / "prog"
        _run(["brilc", "-o", str(exe)], data)
        _check(_run([str(exe), "-p"]), shape, size)
    else:
        raise AssertionError(tool)
