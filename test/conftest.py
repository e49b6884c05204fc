"""Every test runs with a code cache of its own session (never the user's), and
without background processes after `brili --jit` runs (tests that want the JIT's
precompiler ask for it with BRIL_JIT_PRECOMPILE=wait)."""

import atexit
import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="bril-test-cache-")
os.environ["BRIL_CACHE_DIR"] = _CACHE
os.environ.setdefault("BRIL_JIT_PRECOMPILE", "0")
atexit.register(shutil.rmtree, _CACHE, True)
