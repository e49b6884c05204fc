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

KIND = "exe"
STAMP_KIND = "exestamp"         # (beside it: `stamp()` of the compiler that built it)
# Larger programs keep to the JIT's units: compiling one whole takes seconds.
MAX_INSTRS = 20_000
# Bytes of program text beyond which it is taken to have more than MAX_INSTRS
# instructions, unread: its executable is neither looked for nor built (hashing a
# 26 MB, 400,000-instruction program's text took 42 ms of every run of it).  Our
# programs average 40-70 bytes an instruction as JSON; this allows 400.
MAX_BYTES = MAX_INSTRS * 400
# Bytes beyond which the instructions are counted before the bytes are hashed, this
# many at a time (a count costs a third of a hash; below this, a hash costs under 2 ms).
COUNT_BYTES = MAX_INSTRS * 60
LEVEL = 2


def too_big(data, as_text):
    """Does a program read as `data` (bytes; Bril text if `as_text`, else JSON) have
    more than MAX_INSTRS instructions, judged before parsing?  Every instruction has
    an `"op"` key in JSON and ends with `;` in text; a string holding either is
    counted too, so that a program is never taken for a smaller one (a 6.5 MB,
    100,000-instruction JSON program: decided in its first 1.2 MB, in 1 ms, where
    its hash took 10-16 ms)."""
    if len(data) > MAX_BYTES:
        return True
    if len(data) <= COUNT_BYTES:
        return False
    mark = b";" if as_text else b'"op"'
    count = 0
    for start in range(0, len(data), COUNT_BYTES):     # (most are decided by a chunk)
        count += data.count(mark, start, start + COUNT_BYTES + len(mark) - 1)
        if count > MAX_INSTRS:
            return True
    return False


def key_of(data, as_text):
    """The key of the executable of a program read as `data` (bytes; Bril text if
    `as_text`, else JSON): a hash of the bytes alone, so that looking for it costs
    a run without one nothing more (the compiler it was built by is checked only
    when there is one: `stamp`)."""
    from ..cache.codecache import hasher
    h = hasher(b"bril-exe-1 text\0" if as_text else b"bril-exe-1 json\0")
    h.update(data)
    return h.hexdigest()


def stamp():
    """What an executable's machine code depends on besides the program, cheaply
    (stats, not reads: this is on the path of every warm run): what native code
    depends on (`nativert.native_digest`: our lowering and run-time sources,
    llvmlite, the C compiler, this machine) at the level, and this module."""
    from ..cache.codecache import hasher, source_digest
    from ..native_runtime import nativert
    try:
        return hasher(b"bril-exe-2" + nativert.native_digest(LEVEL)
                      + source_digest(b"", [os.path.abspath(__file__)])).digest()
    except OSError:
        return None


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
    built_by = cache.get(STAMP_KIND, key)
    if built_by is None or built_by != stamp():
        return None
    return cache.entry_path(KIND, key)


def execute(path, profile, args):
    """Replace this process by the executable at `path` (`profile`: -p), with the
    arguments as given; returns only if it cannot be run (evicted meanwhile)."""
    try:
        os.execv(path, [path] + (["-p"] if profile else []) + ["--"] + list(args))
    except OSError:
        return


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
