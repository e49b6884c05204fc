"""Where the conformance corpus and our own benchmarks live, and how to read their metadata.

The corpus is used in place from `../shared/conformance` (next to the checkout);
set BRIL_CONFORMANCE to point elsewhere.  Nothing of it is copied here.
"""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = Path(os.environ.get("BRIL_CONFORMANCE", ROOT.parent / "shared" / "conformance"))
BENCHMARKS = ROOT / "benchmarks"
# Bril programs of the unit tests, kept out of their code (programs/README.md).
TEST_PROGRAMS = Path(__file__).resolve().parent / "programs"

_ARGS_RE = re.compile(r"^\s*#\s*ARGS:(.*)$", re.M)


def args_of(path):
    """The `# ARGS:` arguments of a .bril file (empty list if none)."""
    m = _ARGS_RE.search(Path(path).read_text())
    return m.group(1).split() if m else []


_ALT_RE = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)


def alt_args_of(path):
    """The `# ALT-ARGS:` arguments of one of our programs (another input to
    judge traces on), or None."""
    m = _ALT_RE.search(Path(path).read_text())
    return m.group(1).split() if m else None


def smaller_args(path):
    """The input to run a program on where its length does not matter (a tier's
    semantics, a recorder's bookkeeping): our programs' `# ALT-ARGS:`, about 0.6
    times the instructions of their `# ARGS:` (snapshotted in every engine
    elsewhere), else `# ARGS:`."""
    alt = alt_args_of(path)
    return alt if alt is not None else args_of(path)


def program_text(name):
    """The text of test/programs/NAME.bril (NAME may name a folder: "jit/nest")."""
    return (TEST_PROGRAMS / f"{name}.bril").read_text(encoding="utf-8")


def bril_files(*parts, root=CONFORMANCE):
    """Sorted .bril files below root/parts... (recursively)."""
    base = root.joinpath(*parts)
    return sorted(base.rglob("*.bril")) if base.exists() else []


def case_id(path, root=CONFORMANCE):
    """A readable pytest id: the path below the corpus root without suffix."""
    return str(Path(path).relative_to(root).with_suffix(""))


def turnt_run(args, env=None, **kwargs):
    """Run turnt with this Python (`python -m turnt`) and the tools installed next to
    it first on PATH, so that the envs run this checkout's commands (a `turnt` found
    on PATH, e.g. a pyenv shim, would put its own interpreter's tools first)."""
    import subprocess
    import sys
    environment = dict(os.environ if env is None else env)
    environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment.get("PATH", "")
    return subprocess.run([sys.executable, "-P", "-m", "turnt", *args], env=environment,
                          capture_output=True, text=True, **kwargs)


TWINS = BENCHMARKS / "dynamic" / "typed"


def our_programs():
    """Our benchmark programs but the typed twins of the dynamic family
    (benchmarks/dynamic/typed).  The twins are bench_dynamic's baselines, typed
    programs like the others: their snapshots are checked in every engine
    (test_benchmarks_snapshots) and against their dynamic forms, and the tests that
    run each program in many configurations leave them out."""
    return [p for p in bril_files(root=BENCHMARKS) if TWINS not in p.parents]


def benchmark_cases():
    """pytest params of every benchmark program: the corpus's, then ours
    (`our_programs`; ids "core/x", "ours/loops/y")."""
    import pytest
    return ([pytest.param(p, id=case_id(p)) for p in bril_files("benchmarks")]
            + [pytest.param(p, id="ours/" + case_id(p, BENCHMARKS))
               for p in our_programs()])
