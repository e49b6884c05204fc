"""What `brili --jit` remembers about a program between runs, in the code cache.

A *profile* belongs to a program (keyed by all its functions): which regions
and functions were hot in earlier runs, how long they ran interpreted, which
units they have, whether native code needed the shared heap, and the kinds the
runs' first tier saw `any` values hold ("types", for the program's executable).  A run that
finds one enters native code at the first arrival instead of counting first.

Kept apart from `bril.backend.jitcache` (the units) because every `--jit` run looks
its profile up at start, before it knows whether anything will be hot: this
much and no more is imported then (`bril.backend.jit_deferred`).
"""

import os
from itertools import repeat

from ..cache.codecache import hasher

FORMAT = b"bril-jit-2"


def _serialized(obj):
    # (repr, not marshal: marshal's bytes depend on which strings are shared or
    # interned, which differs between the run and its compile server)
    return repr(obj).encode("utf-8", "surrogatepass")


def program_key(linked):
    """The identity of a linked program (every function, in order, whole); computed
    once per linked program (a 3,000-function program: 38 ms, which every profile
    read, write and server start paid again)."""
    key = getattr(linked, "program_key_memo", None)
    if key is None:
        h = hasher(FORMAT + b"program")
        for i, func in enumerate(linked.functions):
            h.update(b"\0function %d\0" % i)
            h.update(_serialized(func))
        key = linked.program_key_memo = h.hexdigest()
    return key


def profile_key(linked):
    """Where a program's profile is kept: a digest of its outline (its functions'
    names in order, their numbers of parameters and of instructions in all), cheap
    to make at every start.  The profile itself holds the full `program_key`,
    checked when one is found (`load_profile`), so that hashing every instruction
    is paid only by programs that have a profile (and a program with the same
    outline only finds no profile)."""
    key = getattr(linked, "profile_key_memo", None)
    if key is None:
        # (read in C, by map: the arguments' types repr'd one function at a time
        # made this 45 ms of every run of a 12,000-function program, each
        # function's sizes in a list 15-18 ms, these totals 5-7 ms)
        functions = linked.functions
        h = hasher(FORMAT + b"outline-3")
        h.update("\0".join(map(str, map(dict.get, functions, repeat("name")))).encode(
            "utf-8", "surrogatepass"))
        h.update(b"%d %d" % (sum(len(a) for a in map(dict.get, functions, repeat("args")) if a),
                             sum(len(i) for i in map(dict.get, functions, repeat("instrs"))
                                 if i)))
        key = linked.profile_key_memo = h.hexdigest()
    return key


def load_profile(cache, key, linked=None):
    """The profile kept under `key` (`profile_key`), if it is this program's (with
    `linked`: its full `program_key` is checked)."""
    profile = cache.get_marshalled("profile", key)
    if not isinstance(profile, dict):
        return None
    if linked is not None and profile.get("program") != program_key(linked):
        return None                 # another program with the same outline
    return profile


def store_profile(cache, key, profile, linked=None):
    if linked is not None:
        profile = dict(profile, program=program_key(linked))
    cache.put_marshalled("profile", key, profile)


def empty_profile():
    return {"regions": {}, "calls": {}, "heap": False, "hot": {}, "tried": [],
            "tried_for": None, "kinds": {}}


def update_profile(cache, key, change, linked):
    """Read, change and write the program's profile under a lock, so that runs and
    compile servers writing at once lose nothing of each other's: `change(profile)`
    (a copy, or an empty profile) returns the profile to store, or None to keep it."""
    fd = None
    try:
        import fcntl
        folder = os.path.join(cache.directory, "locks")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, "profile-" + key), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except (OSError, ImportError):
        pass                        # (unlocked: at worst, one writer's news is lost)
    try:
        old = load_profile(cache, key, linked)
        profile = empty_profile()
        if old is not None:
            profile.update({k: v for k, v in old.items() if k != "program"})
            profile["regions"], profile["calls"] = dict(profile["regions"]), dict(profile["calls"])
            profile["hot"], profile["tried"] = dict(profile["hot"]), list(profile["tried"])
            profile["kinds"] = dict(profile.get("kinds", {}))
        new = change(profile)
        if new is not None:
            store_profile(cache, key, new, linked)
        return new
    finally:
        if fd is not None:
            os.close(fd)
