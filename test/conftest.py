"""Every test runs with a code cache of its own session (never the user's), and
without background processes after `brili --jit` runs (tests that want the JIT's
precompiler ask for it with BRIL_JIT_PRECOMPILE=wait).

The tracer charges nothing for the code a trace adds (BRIL_TRACE_GROWTH_PRICE=0):
the tests exercise traces on runs far too short for any to pay its growth at the
default price (`bril.tracing.trace_cost.GROWTH_PRICE`); the tests of the price set it, and
the turnt snapshots of traced programs are taken at the default, as users run it."""

import atexit
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="bril-test-cache-")
os.environ["BRIL_CACHE_DIR"] = _CACHE
os.environ.setdefault("BRIL_JIT_PRECOMPILE", "0")
os.environ.setdefault("BRIL_TRACE_GROWTH_PRICE", "0")
atexit.register(shutil.rmtree, _CACHE, True)
