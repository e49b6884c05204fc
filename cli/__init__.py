"""Command-line entry points (installed as `bril.cli`): thin wrappers over the library."""

import gc
import sys

# What every command's --help says about plug-in passes.
PLUGIN_HELP = 'Plug-in passes (bril-opt --load FILE.py NAME, module:function or file.py:function specs, passes installed in the `bril.passes` entry-point group) run in bril-opt, brili --trace --trace-pass SPEC and bril-bench runs (`passes = [...]`); see bril-opt --help.'


class no_cycle_collection:
    """Run a batch command (or a phase of one) without Python's cyclic garbage
    collector: `with no_cycle_collection(): ...`.

    The commands that translate whole programs (bril2json, bril2txt, bril-opt,
    brilc, bril2dot) build millions of small acyclic objects (instructions)
    that reference counting frees; the collector would only rescan them, ever
    more often as the program grows (a quarter of bril-opt's time on 80,000
    instructions).  Re-enabled afterwards (tests call `main` in-process).
    (A class, not contextlib: `brili` imports this package at every start.)"""

    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False


def read_input(file=None, text=False, meanwhile=None):
    """`bril.warm_start.read_input` for a command: a BrilError `cannot read FILE:
    REASON` (or `standard input`) where it raises OSError -- the error reporting
    imported only then (brili's warm path has none of it)."""
    from bril.warm_start import read_input as read
    try:
        return read(file, text, meanwhile)
    except OSError as e:
        from bril.ir.program import unreadable
        raise unreadable(file or "standard input", e) from None


def stdin_bytes():
    """Standard input's bytes (`read_input`); a BrilError if it cannot be read
    (closed when the command started)."""
    return read_input()[0]


def run_plain_or_click(plain, command):
    """Run a command that a pipeline runs on every program (bril2json, bril2txt):
    `plain()` -- its work, under run_main, for the argument lists it returns a body
    for, without importing click (27 ms of a 50 ms bril2json) -- else `command()`,
    the click command that handles --help, usage errors and the rest."""
    from bril.ir.errors import run_click, run_main
    body = plain(sys.argv[1:])
    with no_cycle_collection():
        if body is not None:
            run_main(body)
        else:
            run_click(command())
