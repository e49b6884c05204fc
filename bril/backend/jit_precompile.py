"""Compile, after a `brili --jit` run, the hot code it did not compile, for the next run.

    python -m bril.backend.jit_precompile CACHE_DIR PROFILE_KEY LEVEL

A cold run compiles a loop only once it has paid (see `bril.backend.jit_policy.PAY_BACK`), so
a program that runs a second or two mostly ends before; its profile then lists
loops and functions that were hot without native code.  `brili` starts this
process as it leaves (it does not wait), which lowers each of them as the JIT
would, builds its unit into the code cache (`bril.backend.jitcache`) and adds it to the
profile: the next run of the same program enters native code at once.  One
process per program at a time (a lock file in the cache); every failure is
silent -- the next run simply compiles as usual.
"""

import os
import sys
import time

LOCK_STALE = 600            # seconds after which a leftover lock is ignored


def _lock(cache, key):
    folder = os.path.join(cache.directory, "locks")
    path = os.path.join(folder, key)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        return path
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime > LOCK_STALE:
                os.unlink(path)
                return _lock(cache, key)
        except OSError:
            pass
        return None
    except OSError:
        return None


def _unit(cache, ukey, level, lower):
    """The data of unit `ukey`: from the cache if it is there (a unit an earlier run
    could not use, for want of the shared heap), else lowered (`lower()`: module,
    data) and built into it; None if it cannot be kept."""
    from . import jitcache
    meta = jitcache.stored_meta(cache, ukey)
    if meta is not None:
        return meta
    module, meta = lower()
    return meta if jitcache.build_unit(cache, ukey, module, meta, level) is not None else None


def precompile(cache, key, level):
    """Build the units the profile `key` is missing; returns how many were built."""
    from . import jitcache
    from ..ir.errors import BrilError
    from .jitprofile import load_profile, program_key, store_profile
    from ..interpreter.interp import CompiledProgram
    from .jit import PRECOMPILE_HOT, select_region
    from ..ir.linker import link
    source = cache.get_marshalled("program", key)
    profile = load_profile(cache, key)     # (the program is checked below)
    if source is None or profile is None:
        return 0
    prog, base_dir, lib_dirs, filename = source
    linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
    if profile.get("program") != program_key(linked):
        return 0                    # the profile is another program's now
    compiled = CompiledProgram(linked, open(os.devnull, "w"))
    built = 0
    tried = jitcache.tried_here(profile, level)
    for what, seconds in sorted(profile.get("hot", {}).items(), key=lambda kv: -kv[1]):
        if seconds < PRECOMPILE_HOT or what in profile["regions"] or what in profile["calls"] \
                or what in tried:
            continue
        before = built
        try:
            if isinstance(what, tuple):
                index, header = what
                fc = compiled.function_code(index)
                for blocks, entries in select_region(fc, header):
                    ukey = jitcache.unit_key(linked, "region", index, blocks, entries, level)
                    try:
                        meta = _unit(cache, ukey, level, lambda: jitcache.lower_region_unit(
                            linked, fc, blocks, entries, "bril.unit")[:2])
                    except BrilError:
                        continue
                    if meta is not None:
                        profile["regions"][what] = {"blocks": sorted(blocks),
                                                    "entries": sorted(entries)}
                        profile["heap"] = profile.get("heap") or meta["heap"]
                        built += 1
                    break
            else:
                ukey = jitcache.unit_key(linked, "call", what, None, None, level)
                meta = _unit(cache, ukey, level, lambda: jitcache.lower_call_unit(
                    linked, what, "bril.unit")[:2])
                if meta is not None:
                    profile["calls"][what] = {}
                    profile["heap"] = profile.get("heap") or meta["heap"]
                    built += 1
        except BrilError:
            pass
        if built == before:
            # What cannot be built stays so, for this program and compiler; what
            # was built is tried again if its unit leaves the cache (evicted).
            jitcache.mark_tried(profile, what, level)
    store_profile(cache, key, profile, linked)
    return built


def main(argv):
    from ..cache.codecache import CodeCache
    directory, key, level = argv[0], argv[1], int(argv[2])
    cache = CodeCache(directory)
    lock = _lock(cache, key)
    if lock is None:
        return 0
    try:
        precompile(cache, key, level)
    except Exception:           # nothing to report to: the next run compiles as usual
        pass
    finally:
        try:
            os.unlink(lock)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
