"""Whole-program executables: what `brili` runs for a program it has run before.

A program that ran hot under the JIT (the run wanted native code, or found code
worth building for the next run) and imports nothing is also compiled whole, as
`brilc` compiles it, by the compile server (`bril.backend.jit_server`: once it has
nothing the run asked for to build, during the run or after it), in a process of
its own at the lowest CPU priority.  The executable goes into the code cache under a key
of the program's bytes exactly as `brili` read them, beside the `stamp` of what
its machine code depends on.  The next `brili` of the same bytes whose command
line asks for nothing the interpreter alone does (only `-p`, `-f`, `--text`, `-L`
and arguments; not `--jit-report`, `--hot`, `--tier`, `--no-jit`, `--no-cache`)
finds it before parsing anything and executes it in its own place (`os.execv`):
of the interpreter, only Python's start-up, a read and a hash remain.  Output,
`-p` counts and errors are the executable's, which the tests hold to the
interpreter's (`brilc` is the same compiler).

The executable is compiled for the kinds the runs of the program so far saw each
function's `any` parameters and each loop header's `any` variables hold (kept in
its JIT profile, `bril.interpreter.type_profile.merged`; as `brilc --profile`
compiles; a call passing others takes the generic code): a dynamic program's warm
runs gain what a profile gains its executable.

This is the tier for the short runs that dominate Bril use: a warm run of a
program the reference interprets in 0.2-2 s spends most of its time starting up,
and a loaded region of native code cannot help there (the run-time library's
load and the cold tier's first steps cost more than the loop).
"""

import os

# (the executable's key, stamp, look-up and execution are `bril.warm_start`'s: the path
# of a warm run, which finds and executes it before importing anything else)
from ..warm_start import (EXE_COUNT_BYTES as COUNT_BYTES, EXE_KIND as KIND,  # noqa: F401
                          EXE_LEVEL as LEVEL, EXE_MAX_BYTES as MAX_BYTES,
                          EXE_MAX_INSTRS as MAX_INSTRS, EXE_STAMP_KIND as STAMP_KIND,
                          exe_key as key_of, exe_stamp as stamp, execute, find_executable,
                          too_big)


def build_lock(key):
    """The name of the lock (`bril.cache.buildlocks.building`'s, without its
    "build-") a process holds while it builds the executable of `key`."""
    return KIND + "-" + key


def build_pending(cache, key, profile_key, own_server=False):
    """Is the executable of `key` being built, or left to a server that will build it
    (one at work for another run of the program, holding its after-run lock:
    `bril.cache.buildlocks.AFTER_RUN` under the program's `profile_key`) -- so that
    a run ending now asks for nothing?  `own_server`: the run has a server of its
    own (what it asks goes to that one)."""
    from ..cache.buildlocks import AFTER_RUN, being_built
    return being_built(cache, build_lock(key)) or (
        not own_server and profile_key is not None
        and being_built(cache, AFTER_RUN + profile_key))


def find(cache, key):
    """The path of the executable stored under `key` if it was built by today's
    compiler, else None."""
    return find_executable(cache.directory, key)


def cached(cache, key):
    """Is the executable of `key`, built by today's compiler, in the cache?"""
    return find(cache, key) is not None


def eligible(prog):
    """Is `prog` (as read, before linking) one to compile whole?"""
    if prog.get("imports"):
        return False            # (its key would not cover the imported files)
    return sum(len(f.get("instrs") or ()) for f in prog.get("functions") or ()) <= MAX_INSTRS


def build(cache, key, prog, profile=None):
    """Compile `prog` whole into the cache under `key` (as `brilc` would, with
    `--profile` if `profile`, a type profile's JSON data: the kinds the runs so far
    saw, `bril.interpreter.type_profile.merged`); raises BrilError (or LLVM's
    errors) if it cannot be built or kept."""
    from ..ir.errors import BrilError
    from . import llvm_lower, native
    if profile:
        from ..interpreter import type_profile
        profile = type_profile.read_data(profile, "the run's type profile")
    module = llvm_lower.lower_program(prog, count=True, profile=profile or None)
    import tempfile
    fd, out = tempfile.mkstemp(prefix="bril-exe-")
    os.close(fd)
    try:
        native.build_executable(module, out, LEVEL, light=native.light_for(prog))
        with open(out, "rb") as fh:
            data = fh.read()
    finally:
        try:
            os.unlink(out)
        except OSError:
            pass
    # (the executable first: a run that finds the new stamp finds the new executable)
    built_by = stamp()
    if built_by is None or not (cache.put(KIND, key, data, mode=0o700)
                                and cache.put(STAMP_KIND, key, built_by)):
        raise BrilError("the executable could not be kept in the code cache")
