"""Every program in `../shared/bugs/` is a regression test, on every engine.

Each `NAME.bril` there names its arguments (`# ARGS:`); `NAME.out` and
`NAME.prof` hold what the established tools print.  The programs are read in
place (never copied): plain `brili`, `brili --jit` (everything hot at once) and
`brili --trace` (the run itself and the traced program it writes) must print
exactly that, and quickly (each exposed a hang or a crash).
"""

import json
import subprocess
import sys

import pytest

from corpus import ROOT, args_of

BUGS = ROOT.parent / "shared" / "bugs"
PROGRAMS = sorted(BUGS.glob("*.bril")) if BUGS.exists() else []
BRILI = [sys.executable, "-P", "-m", "bril.cli.brili"]
TIME_LIMIT = 60


def _expected(path):
    out = path.with_suffix(".out").read_text()
    prof = path.with_suffix(".prof").read_text().strip() + "\n"
    return out, prof


def _brili(*args, stdin=None):
    return subprocess.run(BRILI + list(args), input=stdin, capture_output=True, text=True,
                          timeout=TIME_LIMIT)


@pytest.mark.parametrize("engine", [[], ["--jit", "--hot", "1"]], ids=["brili", "jit"])
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_bug_program_runs_exactly(path, engine):
    out, prof = _expected(path)
    proc = _brili("-p", *engine, "-f", str(path), *args_of(path))
    assert proc.stdout == out
    assert proc.stderr == prof


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_bug_program_traces_exactly(path, tmp_path):
    out, prof = _expected(path)
    traced = tmp_path / "traced.json"
    proc = _brili("-p", "--trace", str(traced), "-f", str(path), *args_of(path))
    assert (proc.stdout, proc.stderr) == (out, prof)
    proc = _brili(*args_of(path), stdin=traced.read_text())
    assert proc.returncode == 0 and proc.stdout == out
    json.loads(traced.read_text())


def test_the_bugs_folder_is_there():
    assert PROGRAMS, f"no programs found in {BUGS}"
