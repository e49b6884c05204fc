"""Shared helpers for the benchmark scripts: finding programs, reading their
`# ARGS:` / `# ALT-ARGS:` lines, and running an interpreter command on them.

Interpreter commands are shell-like strings (split with shlex) that read a
Bril JSON program on stdin and take `-p` plus the @main arguments on the
command line, like `brili` and the reference `brili-ref`.
"""

import os
import re
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The conformance corpus is read in place (never copied); BRIL_CONFORMANCE
# overrides its location as in test/corpus.py.
CORPUS = Path(os.environ.get("BRIL_CONFORMANCE", HERE.parent.parent / "shared" / "conformance"))
CORPUS_BENCHMARKS = CORPUS / "benchmarks"

_ARGS_RE = re.compile(r"^\s*#\s*ARGS:(.*)$", re.M)
_ALT_ARGS_RE = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)
_DYN_RE = re.compile(r"total_dyn_inst:\s*(\d+)")


def compile_bytecode():
    """Compile the installed package's modules to bytecode, as `pip install`
    does for a regular install, before whole processes are timed: where Python
    writes none (PYTHONDONTWRITEBYTECODE, a read-only checkout) an editable
    install recompiles every module it imports at each start (about 28 ms of
    every `brili` run here, more than the run of most programs).  Folders it
    cannot write are left as they are."""
    import compileall
    import importlib
    import bril
    names = ["bril", "bril.cli", "bril.passes"]
    # (the stage subpackages: listed by the package, so none is skipped)
    names += [f"bril.{sub.name}" for sub in _subpackages(os.path.dirname(bril.__file__))]
    for name in names:
        try:
            folder = os.path.dirname(importlib.import_module(name).__file__)
        except ImportError:
            continue
        compileall.compile_dir(folder, maxlevels=0, quiet=2)


def _subpackages(folder):
    return [e for e in os.scandir(folder)
            if e.is_dir() and os.path.exists(os.path.join(e.path, "__init__.py"))]


def dyn_count(text):
    """The N of a `total_dyn_inst: N` line in text, or None."""
    m = _DYN_RE.search(text)
    return int(m.group(1)) if m else None


def args_of(path):
    """The `# ARGS:` arguments of a .bril file (empty list if none)."""
    m = _ARGS_RE.search(Path(path).read_text())
    return m.group(1).split() if m else []


def alt_args_of(path):
    """The `# ALT-ARGS:` arguments (a second input), or None if the file has none."""
    m = _ALT_ARGS_RE.search(Path(path).read_text())
    return m.group(1).split() if m else None


def our_programs(root=HERE):
    """Our benchmark programs: every .bril file below root, sorted."""
    return sorted(Path(root).rglob("*.bril"))


def display_name(path):
    """A short name: relative to our benchmarks, else to the corpus benchmarks."""
    path = Path(path).resolve()
    for base, prefix in ((HERE, ""), (CORPUS_BENCHMARKS, "corpus:")):
        try:
            return prefix + str(path.relative_to(base).with_suffix(""))
        except ValueError:
            pass
    return str(path)


def to_json_text(text, bril2json="bril2json", what="program"):
    """The JSON (bytes) of Bril program text, via a bril2json command."""
    done = subprocess.run(shlex.split(bril2json), input=text.encode(), capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"{bril2json} failed on {what}: {done.stderr.decode().strip()}")
    return done.stdout


def to_json(path, bril2json="bril2json"):
    """The JSON (bytes) of a Bril text file, via a bril2json command."""
    return to_json_text(Path(path).read_text(), bril2json, what=str(path))


@dataclass
class Run:
    """One interpreter run: exit code, outputs, dynamic count (None if absent), wall seconds."""

    returncode: int
    stdout: str
    stderr: str
    dyn: int | None
    seconds: float

    @property
    def error(self):
        """The first stderr line that is not the profile line, if the run failed."""
        if self.returncode == 0:
            return None
        lines = [ln for ln in self.stderr.splitlines() if not _DYN_RE.search(ln)]
        return lines[0] if lines else f"exit code {self.returncode}"


def run_interp(command, program_json, args, profile=True, timeout=600, env=None):
    """Run an interpreter command on JSON text with @main args; time it end to end."""
    argv = shlex.split(command) + (["-p"] if profile else []) + list(args)
    start = time.perf_counter()
    done = subprocess.run(argv, input=program_json, capture_output=True, timeout=timeout,
                          env=env)
    seconds = time.perf_counter() - start
    stderr = done.stderr.decode(errors="replace")
    return Run(done.returncode, done.stdout.decode(errors="replace"), stderr,
               dyn_count(stderr), seconds)


def best(runs):
    """The first run that failed, else the fastest."""
    return next((r for r in runs if r.error), None) or min(runs, key=lambda r: r.seconds)


def best_run(command, program_json, args, repeat, env=None):
    """The best (`best`) of `repeat` runs of an interpreter command."""
    return best([run_interp(command, program_json, args, env=env) for _ in range(repeat)])


def medians_in_turn(sides, repeat):
    """[(median wall seconds, the last run's CompletedProcess)] of each side, a side
    being (argv, stdin bytes, environment or None): the sides run in turn, in the
    other order every other round (A B B A ...: here the first of two identical
    runs was up to 15% slower or faster, depending on the program), so a burst of
    load on a shared machine hits them alike."""
    times = [[] for _ in sides]
    last = [None] * len(sides)
    for r in range(max(1, repeat)):
        order = list(enumerate(sides))
        for k, (argv, stdin, env) in (order if r % 2 == 0 else order[::-1]):
            t = time.perf_counter()
            last[k] = subprocess.run(argv, input=stdin, capture_output=True, env=env)
            times[k].append(time.perf_counter() - t)
    return [(statistics.median(ts), done) for ts, done in zip(times, last)]
