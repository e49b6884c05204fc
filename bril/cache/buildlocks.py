"""Locks on files of the code cache (`locks/` in its folder), held with `flock` --
released when their process dies, so none goes stale: a unit or executable being
built (`building`, `being_built`), a compile server at work, a program's after-run
work (`AFTER_RUN`).  A light module (the standard library's os, time and fcntl
only): a run asks whether a build is in flight, or waits for them all, without
importing the compile server (`bril.backend.jit_server`)."""

import os
import time

# The lock a server holds, under the program's profile key, from the start of a
# run's session until it has built what the run found hot: a run ending meanwhile
# leaves that work to it instead of starting a second server for the same units
# (`bril.backend.jit.Jit._precompile`, `program_exe.build_pending`), and a run
# without a server of its own asking for a unit meanwhile waits for it
# (`bril.backend.jit.Jit._in_cache`).  The run that spawns a server takes it and
# hands it over (fd 4); a claimed server takes it when the session learns its
# program.  Taken later (when the server read `finish`, between builds, or began,
# 0.1 s after its spawn) it left a gap: a run started as the one before ended asked
# in it and started a second server, every time.  Taken without waiting: a server
# holding unit locks that waited for it could wait for a server waiting for one of
# those units.
AFTER_RUN = "after-"


def lock_path(cache, name):
    return os.path.join(cache.directory, "locks", name)


def open_lock(cache, name):
    """A file descriptor of the lock file `name` (made if need be), or None."""
    folder = os.path.join(cache.directory, "locks")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


class building:
    """`with building(cache, key):` holds the lock of a unit being built (released
    when the build ends, or when the process dies).  wait=False: only if no other
    process holds it (else nothing is held) -- for a lock that only marks work in
    progress, which a process holding unit locks must never wait for."""

    def __init__(self, cache, key, prefix="build-", wait=True):
        self.cache, self.name, self.wait = cache, prefix + key, wait
        self.fd = None

    def __enter__(self):
        import fcntl
        self.fd = open_lock(self.cache, self.name)
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if not self.wait:       # (another process holds it: leave it be)
                    os.close(self.fd)
                    self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            try:
                os.unlink(lock_path(self.cache, self.name))
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None          # (released once: a second exit does nothing)


def being_built(cache, key, prefix="build-"):
    """Is another process building unit `key` now (holding the lock PREFIX+KEY)?"""
    import fcntl
    path = lock_path(cache, prefix + key)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def wait_for_builds(cache, timeout=600.0):
    """Wait until no compile server is at work for this cache and no unit is being
    built (any process's), at most `timeout` seconds."""
    import fcntl
    folder = os.path.join(cache.directory, "locks")
    deadline = time.monotonic() + timeout
    waited = True
    # (again until no lock was held: a server that ends its session has first handed
    # its executable's build to a process of its own, under a lock made after the
    # first look at the folder)
    while waited:
        waited = False
        try:
            names = [n for n in os.listdir(folder) if n.startswith(("server-", "build-"))]
        except OSError:
            return
        for name in names:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            return
                        waited = True
                        time.sleep(0.01)
            finally:
                os.close(fd)
