"""Run a function in a forked child process while this one goes on, and take its
result back through a pipe: `brili --trace` runs the original program for the
user's output and count on the machine's other core while it records and
optimizes (a whole run less on the clock).

Only where it is safe and cheap: the platform has `fork` and the process runs no
other thread (a lock another thread held at the fork would stay held in the
child).  Otherwise, and whenever the child does not come back with a result,
the caller runs the function itself.
"""

import marshal
import os
import sys


def can_fork():
    if not hasattr(os, "fork"):
        return False
    threading = sys.modules.get("threading")      # (not imported: no thread of its own)
    return threading is None or threading.active_count() == 1


class Child:
    """A function running in a forked child; `result()` waits for it."""

    def __init__(self, pid, fd):
        self.pid = pid
        self.fd = fd

    def result(self):
        """The function's value, or None if the child raised or died without
        saying (the caller then runs the function itself)."""
        chunks = []
        try:
            while True:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self.fd)
            self._reap()
        try:
            return marshal.loads(b"".join(chunks))[0]
        except Exception:
            return None

    def cancel(self):
        """Stop the child (the caller no longer wants its result)."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass
        self._reap()

    def _reap(self):
        """Collect the child if it has ended; else later (`_reap_ended`): tearing
        a process down takes milliseconds, for which nobody needs to wait."""
        if self.pid is not None:
            _pending.append(self.pid)
            self.pid = None
        _reap_ended()


_pending = []           # children that sent their result and may still be exiting


def _reap_ended():
    for pid in list(_pending):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except OSError:
            done = pid                  # (not our child any more)
        if done:
            _pending.remove(pid)


def start(fn, *args):
    """A Child running `fn(*args)`, or None if forking is not possible here.
    `fn` returns data `marshal` can write (strings, numbers, tuples, None:
    `pickle` would cost more to import than most runs take).  The child never
    runs the parent's exit handlers or flushes its buffers (`os._exit`)."""
    if not can_fork():
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(w)
        return Child(pid, r)
    code = 1
    try:
        os.close(r)
        data = marshal.dumps((fn(*args),))     # (raising: nothing sent)
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os.close(w)                     # (the parent reads on before this process is torn down)
        code = 0
    except BaseException:
        pass
    finally:
        os._exit(code)
