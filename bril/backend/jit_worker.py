"""The JIT's background compiler (`brili --jit-background`): one thread turning IR
text into machine code, imported only when asked for."""

import atexit
import queue
import threading
import time
from concurrent.futures import Future


class _Worker:
    """One background thread turning IR text into machine code (object files),
    in submission order.  It touches no engine: loading the code into the
    engine happens on the interpreter's thread (`Jit._collect`).  ctypes
    releases the GIL during LLVM's work, so the interpreter goes on running on
    the other core meanwhile."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.unfinished = 0
        self.idle = threading.Condition()
        threading.Thread(target=self._loop, name="bril-jit-compiler", daemon=True).start()
        # LLVM's static destructors run when the process exits: not while this
        # thread is inside LLVM.  (`brili` itself leaves with os._exit instead.)
        atexit.register(self.wait, 60)

    def submit(self, text, level):
        job = Future()
        job.seconds = 0.0
        with self.idle:
            self.unfinished += 1
        self.jobs.put((job, text, level))
        return job

    def wait(self, timeout=None):
        """Until every submitted job is done (or timeout seconds)."""
        with self.idle:
            self.idle.wait_for(lambda: self.unfinished == 0, timeout)

    def _loop(self):
        from . import native
        while True:
            job, text, level = self.jobs.get()
            t0 = time.perf_counter()
            try:
                result = native.compile_object(text, level)
            except BaseException as e:          # handed to the interpreter's thread
                job.seconds = time.perf_counter() - t0
                job.set_exception(e)
            else:
                job.seconds = time.perf_counter() - t0
                job.set_result(result)
            with self.idle:
                self.unfinished -= 1
                self.idle.notify_all()


_WORKER = None
_WORKER_LOCK = threading.Lock()


def worker():
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
    return _WORKER
