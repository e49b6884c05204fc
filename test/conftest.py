"""Every test runs with a code cache of its own session (never the user's), and
without background processes after `brili --jit` runs (tests that want the JIT's
precompiler ask for it with BRIL_JIT_PRECOMPILE=wait) but idle compile servers,
which wait 10 s (BRIL_JIT_SERVER_IDLE) instead of a minute.

The tracer charges nothing for the code a trace adds (BRIL_TRACE_GROWTH_PRICE=0):
the tests exercise traces on runs far too short for any to pay its growth at the
default price (`bril.tracing.trace_cost.GROWTH_PRICE`); the tests of the price set it, and
the turnt snapshots of traced programs are taken at the default, as users run it.

The package is compiled to bytecode first, as `pip install` does for a regular
install: where Python writes none (PYTHONDONTWRITEBYTECODE) an editable install
recompiles every module it imports at each start, and the suite starts thousands
of `brili`s (0.07 s each with bytecode here, 0.14 s without)."""

import atexit
import compileall
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

# `python -m pytest` puts the checkout first on the path, where `bril/` lacks the
# folders installed into it (`cli/`, `passes/`): the tests import the installed
# package (a strict editable install's links under build/, or the default kind's hook).
_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _ROOT]

_CACHE = tempfile.mkdtemp(prefix="bril-test-cache-")
os.environ["BRIL_CACHE_DIR"] = _CACHE
os.environ.setdefault("BRIL_JIT_PRECOMPILE", "0")
os.environ.setdefault("BRIL_TRACE_GROWTH_PRICE", "0")
# Idle compile servers wait 10 s for a later run, not a minute: the suite's tests
# start servers in caches of their own, each left idle (tests of the wait set theirs).
os.environ.setdefault("BRIL_JIT_SERVER_IDLE", "10")
atexit.register(shutil.rmtree, _CACHE, True)

for _folder in ("bril", "cli", "passes"):
    compileall.compile_dir(_ROOT / _folder, quiet=2)
# (a strict editable install imports the package from its tree of links under build/)
_installed = importlib.util.find_spec("bril")
if _installed is not None and _installed.submodule_search_locations:
    compileall.compile_dir(_installed.submodule_search_locations[0], quiet=2)
