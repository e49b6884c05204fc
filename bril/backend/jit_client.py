"""The running JIT's side of the compile server (`bril.backend.jit_server`): start it,
ask it for units, pick up what it built.

The server is started when the JIT first wants native code (not before: most runs
never do), with `os.posix_spawn` (importing `subprocess` would cost a short run
several ms), two pipes and a session of its own.  Asking never waits: a request is
a few bytes into a pipe.  Replies are read without waiting, at the sampler's looks
(`poll`).  At the end of the run `finish` tells it what else was hot; the run
does not wait for it unless asked (`BRIL_JIT_PRECOMPILE=wait`).
"""

import os
import sys

from ..cache.buildlocks import AFTER_RUN, open_lock
from .jit_protocol import Reader, frame


def cores():
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_UNREAPED = []                  # servers let go while this process goes on (tests)


def _reap():
    for pid in list(_UNREAPED):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except OSError:
            pass
        _UNREAPED.remove(pid)


class CompileServer:
    def __init__(self, cache, key, program, level):
        # (key: the program's profile key; program: the digest of the whole program)
        self.cache, self.key, self.program, self.level = cache, key, program, level
        self.pid = None             # (a server started for this run)
        self.sock = None            # (an idle server claimed: one socket both ways)
        self.out = None             # our end of its input
        self.reader = None          # of its replies
        self.broken = False
        self.started = False        # (connected now)
        self.used = False           # (this run had a server)
        self.next_rid = 0

    def start(self, source, main_args=None):
        """A server for the program `source` (stored in the cache for it): an idle one
        claimed, else one started, told the run's @main arguments (`main_args`: a
        region of @main is built for them); False if there can be none."""
        if self.started:
            return not self.broken
        _reap()
        if self.broken or not self.cache.put_marshalled("program", self.program, source):
            self.broken = True
            return False
        from .jit_protocol import claim
        sock = claim(self.cache, self.level)
        if sock is not None:
            self.sock = sock
            self.out = sock.fileno()
            os.set_blocking(self.out, False)
            self.reader = Reader(self.out)
            self.started = self.used = True
            return self._send(("program", self.key, self.program)) and self._args(main_args)
        return self._spawn() and self._args(main_args)

    def _args(self, main_args):
        return not main_args or self._send(("args", main_args))

    def _spawn(self):
        # The server's lock, taken here and handed to it (fd 3): from this moment
        # until its first session ends, a run waiting for builds in flight sees it.
        name = f"server-{os.getpid()}-{id(self)}"
        lock = open_lock(self.cache, name)
        if lock is not None:
            try:
                import fcntl
                fcntl.flock(lock, fcntl.LOCK_EX)
            except OSError:
                pass
        # The program's after-run lock (`bril.cache.buildlocks.AFTER_RUN`), taken here
        # and handed to it (fd 4) for its first session: the server takes 0.1 s to
        # start, and a run of the program started in that time (the next one, when
        # this run spawns its server as it ends) would start a second server for the
        # same work.
        after = open_lock(self.cache, "build-" + AFTER_RUN + self.key)
        if after is not None:
            try:
                import fcntl
                fcntl.flock(after, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:         # (another server has it: the server goes without)
                os.close(after)
                after = None
        to_server, from_us = os.pipe()
        to_us, from_server = os.pipe()
        # (-P: the server imports the installed bril, as this run did -- not one in
        # the folder it was started from, which `-m` would put first on its path)
        argv = [sys.executable, "-P", "-m", "bril.backend.jit_server", self.cache.directory,
                self.key, self.program, str(self.level), name]
        actions = [(os.POSIX_SPAWN_DUP2, to_server, 0), (os.POSIX_SPAWN_DUP2, from_server, 1),
                   (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_RDWR, 0)]
        if lock is not None:
            actions.append((os.POSIX_SPAWN_DUP2, lock, 3))
        if after is not None:
            actions.append((os.POSIX_SPAWN_DUP2, after, 4))
        try:
            self.pid = os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions,
                                      setsid=True)
        except (OSError, AttributeError, TypeError):     # (no posix_spawn, or no setsid)
            self.pid = None
            self.broken = True
        for fd in (to_server, from_server) + (() if lock is None else (lock,)) + (
                () if after is None else (after,)):
            os.close(fd)
        if self.pid is None:
            os.close(from_us)
            os.close(to_us)
            return False
        self.started = self.used = True
        self.out = from_us
        os.set_blocking(to_us, False)
        self.reader = Reader(to_us)
        return True

    def _send(self, message):
        try:
            os.write(self.out, frame(message))
            return True
        except OSError:
            self.broken = True
            return False

    def request(self, what, candidates, kinds=None, quick=False):
        """Ask for a unit (see `bril.backend.jit_server`; `quick`: its quick build
        first); its request id, or None."""
        if not self.started or self.broken:
            return None
        rid = self.next_rid
        self.next_rid += 1
        return rid if self._send(("build", rid, what, candidates, kinds, quick)) else None

    def exit_code(self, index, key, native_heap, variant="jitx"):
        """Ask for function `index`'s `variant` in the code cache under `key`, for the
        next run (see `bril.backend.jit_server`)."""
        if self.started and not self.broken:
            self._send(("exitcode", index, key, native_heap, variant))

    def whole(self, exe, profile=None):
        """Ask for the program compiled whole under the key `exe` (for the kinds of
        the type profile `profile`), when the server has nothing else to build
        (`bril.backend.program_exe`)."""
        if self.started and not self.broken:
            self._send(("exe", exe, profile))

    def poll(self):
        """The replies that have come, without waiting."""
        if self.reader is None:
            return []
        return [m for m in self.reader.ready() if m and m[0] == "built"]

    def finish(self, todo, wait=False, exe=None, profile=None):
        """The run is over: tell the server what else to build (and the key of the
        program's executable to build, if any, with the run's type profile) and let
        it go (or wait until it has built everything)."""
        if not self.started:
            return
        if not self.broken and self._send(("finish", list(todo), wait, exe, profile)) \
                and wait:
            os.set_blocking(self.reader.fd, True)
            while True:
                message = self.reader.read()
                if message is None or message[0] == "finished":
                    break
        if self.sock is not None:
            self.sock.close()
        else:
            for fd in (self.out, self.reader.fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            _UNREAPED.append(self.pid)
        self.started = False
        self.broken = True
