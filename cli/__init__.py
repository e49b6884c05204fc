"""Command-line entry points (installed as `bril.cli`): thin wrappers over the library."""


import contextlib
import gc


@contextlib.contextmanager
def no_cycle_collection():
    """Run a batch command without Python's cyclic garbage collector.

    The commands that translate whole programs (bril2json, bril2txt, bril-opt,
    brilc, bril2dot) build millions of small acyclic objects (instructions)
    that reference counting frees; the collector would only rescan them, ever
    more often as the program grows (a quarter of bril-opt's time on 80,000
    instructions).  Re-enabled afterwards (tests call `main` in-process)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
