"""`brili --jit` until something could be hot: the JIT (`bril.backend.jit`) is imported and
attached only once a look of its sampler finds the run in generated code (not only in
the cold tier), or at once if an earlier run left a profile (then what was hot enters
native code at its first arrival).  A run over before that -- most Bril runs --
pays for a profile look-up and a sleeping thread, no more than that: it runs
exactly as plain `brili` does, in the jit variants, whose loop flags no one
raises.

    run(prog, argv, jit=DeferredJit(cache, **options))

takes the place of `Jit(cache=cache, pay_back=jit_policy.PAY_BACK, **options)`, the JIT in
sampled mode; `attach` returns that `Jit` when a profile makes it needed from
the start.
"""

import _thread
import time

from . import jit_policy
from .jitprofile import load_profile, profile_key
from ..warm_start import after_run_builds


class DeferredJit:
    eager = False                   # (sampled mode: bril.interpreter.interp.run asks)

    def __init__(self, cache, detach=False, **options):
        self.cache = cache
        # (the `brili` command: work after the run goes to a child it forks, and the
        # run exits at once -- see `_in_a_child`)
        self.detach = detach
        self.options = options      # for bril.backend.jit.Jit, with `cache` and `pay_back`
        self.source = None          # set by bril.interpreter.interp.run, handed on
        self.jit = None             # the real one, once attached
        self.stopped = False
        self.lock = _thread.allocate_lock()
        self.compiled = self.looked_up = self.main_thread = None
        self.began = None           # when the program began running (attach)

    def _make(self):
        from .jit import Jit
        jit = Jit(cache=self.cache, pay_back=jit_policy.PAY_BACK, **self.options)
        jit.source = self.source
        return jit

    def attach(self, compiled):
        looked_up = None
        if self.cache is not None:
            key = profile_key(compiled.linked)
            looked_up = (key, load_profile(self.cache, key, compiled.linked))
            if looked_up[1] is not None:
                self.jit = self._make()
                return self.jit.attach(compiled, looked_up)
        if self.options.get("shared_heap", True) is not False \
                and jit_policy.SHARED_HEAP_FROM_START:
            self._share_heap(compiled)
        self.compiled, self.looked_up = compiled, looked_up
        self.began = time.perf_counter()
        self.main_thread = _thread.get_ident()
        _thread.start_new_thread(jit_policy.looking, (self._later,))
        return self

    @staticmethod
    def _share_heap(compiled):
        """The heap in the run-time library's table from the start, if the program
        allocates and the library is built (never built here: a first run ever
        leaves that to its compile server), so that loops over memory can turn
        native in this run: the heap cannot move once pointers exist."""
        if not compiled.linked.allocates():
            return
        from ..native_runtime.nativert import runtime_library
        from ..ir.errors import BrilError
        try:
            rt = runtime_library(build=False)
        except (BrilError, OSError):
            return
        if rt is not None:
            compiled.use_native_heap(rt)

    def _later(self):
        # The JIT comes in once its looks have found the program in generated code
        # (what its sampler charges and compiles) for jit_policy.EARLY_HOT, when the
        # loop running then is worth asking for: a run still in the cold tier -- a
        # function run once, however big -- has nothing for it, and a run over by
        # then is spared the JIT's imports, sampler and after-run work (a rerun of
        # fizz-buzz 20000, 20 ms in generated code: 10-15 ms of its 45).
        import sys
        own = _thread.get_ident()
        seen, last = 0.0, time.perf_counter()
        while True:
            time.sleep(jit_policy.SAMPLE_INTERVAL)
            # (each look under the lock: once `finish` has set `stopped`, this thread
            # imports nothing -- a fork then finds no import of it half done, whose
            # module lock the child would wait on for ever)
            with self.lock:
                if self.stopped:
                    return
                now = time.perf_counter()
                elapsed = min(max(now - last, jit_policy.SAMPLE_INTERVAL),
                              jit_policy.MAX_CHARGE)
                last = now
                try:
                    hot = any(_in_generated_code(frame)
                              for tid, frame in sys._current_frames().items()
                              if tid not in (own, self.main_thread))
                except Exception:   # (never disturb the program)
                    return
            if hot:
                seen += elapsed
                if seen >= jit_policy.EARLY_HOT:
                    break
        with self.lock:
            if self.stopped:
                return
            try:
                # (the JIT's imports read files: each read gives the GIL up, and the
                # program's thread keeps it a whole switch interval before giving it
                # back -- 5 ms each, the JIT's first looks 30 ms late)
                with jit_policy.ShortSwitches():
                    jit = self._make()
                    jit.began = self.began
                    jit.attach(self.compiled, self.looked_up, sampler_thread=self.main_thread)
            except Exception:       # (never disturb the program: it runs as plain brili)
                return
            self.jit = jit
        jit._sample_loop(seen)      # this thread goes on as its sampler

    def finish(self):
        """After the run (see `bril.backend.jit.Jit.finish`).  A run the JIT never came
        into that ran jit_policy.EXE_AFTER_INSTRS instructions still has its program
        compiled whole for the next plain run (the JIT imported for that only)."""
        with self.lock:
            self.stopped = True
            jit = self.jit
        if jit is not None:
            jit.finish()
        elif self._executable_wanted():
            if not (self.detach and _in_a_child(self._ask_for_executable, self.cache)):
                self._ask_for_executable()

    def _ask_for_executable(self):
        """Have a compile server build the program whole, for the next plain run."""
        try:
            jit = self._make()
            jit.began = self.began
            jit.attach(self.compiled, self.looked_up, sampler_thread=self.main_thread)
            jit.after_unattached_run()
        except Exception:       # (the run is over and exact: nothing more to do)
            pass

    def _executable_wanted(self):
        """Is the run long enough (counted) for its program to be compiled whole, and
        is that possible and not done yet?  Looked at before the JIT is imported,
        which then checks the rest (`bril.backend.jit.Jit._executable_wanted`)."""
        key = self.options.get("exe_key")
        compiled = self.compiled
        mode = after_run_builds()
        if key is None or compiled is None or self.source is None or mode == "none":
            return False
        if compiled.instructions_run() < jit_policy.EXE_AFTER_INSTRS:
            return False
        from . import program_exe
        if not program_exe.eligible(self.source[0]) or program_exe.cached(self.cache, key):
            return False
        if mode == "wait":
            return True     # (the JIT decides once the builds in flight are done)
        # (being built, or left to a server at work for another run: the JIT would
        # be imported to ask for nothing)
        profile_key = self.looked_up[0] if self.looked_up is not None else None
        return not program_exe.build_pending(self.cache, key, profile_key)

    def report(self):
        """The JIT's report (`bril.backend.jit.Jit.report`); nothing ran natively if it never
        attached."""
        if self.jit is not None:
            return self.jit.report()
        return {"setup_seconds": 0.0, "refused": None, "cache_hits": 0, "regions": [],
                "functions": [], "instructions": None, "server": False,
                "note": "the run ended before the JIT's first look at generated code"}


def _in_a_child(work, cache):
    """Do `work` in a child process forked now, and return at once: True, or False
    if that cannot be (then nothing was done).  Asking a compile server for the
    program's executable costs a run that ends 7-13 ms (the JIT's imports, claiming
    or starting a server) -- a sixth of a 50 ms first run; a fork costs it about
    one.  The child has only this thread (the deferred JIT's looks stopped before:
    see `DeferredJit._later`): it is given what the run knows and
    asks, in a session of its own, its standard streams on /dev/null (a reader of
    the run's output sees it end with the run), and leaves with `os._exit`
    (nothing flushed twice, none of the run's atexit work done twice).  It holds a
    `server-` lock from before the fork until its work is done (the server it
    started holds its own by then): `BRIL_JIT_PRECOMPILE=wait` (never forked: that
    run waits itself) finds the build in flight at every moment."""
    import os
    if after_run_builds() == "wait" or not hasattr(os, "fork"):
        return False
    from ..cache.buildlocks import lock_path, open_lock
    name = f"server-after-run-{os.getpid()}"
    lock = open_lock(cache, name)
    if lock is None:
        return False
    try:
        import fcntl
        import warnings
        fcntl.flock(lock, fcntl.LOCK_EX)
        with warnings.catch_warnings():     # (Python 3.12+ warns of the other threads)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(lock)
        return False
    if pid:
        os.close(lock)                      # (the child's copy holds it)
        return True
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        work()
    except BaseException:
        pass
    finally:
        try:
            os.unlink(lock_path(cache, name))
        except OSError:
            pass
        os._exit(0)


def _in_generated_code(frame, depth=64):
    """Is this stack (its innermost `depth` frames) running generated code?"""
    from ..native_runtime.pynames import function_index
    while frame is not None and depth:
        if function_index(frame.f_code) is not None:
            return True
        frame = frame.f_back
        depth -= 1
    return False
