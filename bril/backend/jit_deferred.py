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
        # (the `brili` command: work after the run goes to a helper process it
        # starts, and the run exits at once -- see `_in_a_helper`)
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
            if self.stopped:
                return
            now = time.perf_counter()
            elapsed = min(max(now - last, jit_policy.SAMPLE_INTERVAL), jit_policy.MAX_CHARGE)
            last = now
            try:
                if any(_in_generated_code(frame) for tid, frame in sys._current_frames().items()
                       if tid not in (own, self.main_thread)):
                    seen += elapsed
                    if seen >= jit_policy.EARLY_HOT:
                        break
            except Exception:       # (never disturb the program)
                return
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
        compiled whole for the next plain run (asked by a helper process, the JIT not
        imported: `_in_a_helper`)."""
        with self.lock:
            self.stopped = True
            jit = self.jit
        if jit is not None:
            jit.finish()
        elif self._executable_wanted():
            try:
                from ..interpreter import type_profile
                # (the kinds its first tier saw: no earlier profile, or the JIT would
                # have come in at the start)
                request = (self.cache.directory, self.options["exe_key"], self.source,
                           self.compiled.main_args,
                           type_profile.merged(None, type_profile.seen(self.compiled)),
                           self.options.get("level", 2))
                if not (self.detach and _in_a_helper(request, self.cache)):
                    ask_for_executable(*request)
            except Exception:       # (the run is over and exact: nothing more to do)
                pass

    def _executable_wanted(self):
        """Is the run long enough (counted) for its program to be compiled whole, and
        is that possible and not done yet?  (`ask_for_executable` looks again, after
        the builds in flight with BRIL_JIT_PRECOMPILE=wait.)"""
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
            return True     # (decided once the builds in flight are done)
        # (being built, or left to a server at work for another run: nothing to ask)
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


def ask_for_executable(cache_dir, exe_key, source, main_args, kinds, level):
    """Have a compile server (an idle one claimed, else one started) build the
    program of `source` (as `bril.interpreter.interp.run` was given it) whole under
    `exe_key`, for the kinds of the type profile `kinds`: what the next plain run
    of it executes (`bril.backend.program_exe`).  With BRIL_JIT_PRECOMPILE=wait,
    the builds in flight are waited for first (one may be this executable's) and
    this one after."""
    from ..cache.buildlocks import wait_for_builds
    from ..cache.codecache import CodeCache
    from ..ir.linker import link
    from . import program_exe
    from .jit_client import CompileServer
    from .jitprofile import program_key, profile_key
    cache = CodeCache(cache_dir)
    wait = after_run_builds() == "wait"
    if wait:
        wait_for_builds(cache)
    prog, base_dir, lib_dirs, filename = source
    linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
    key = profile_key(linked)
    if program_exe.cached(cache, exe_key) or program_exe.build_pending(cache, exe_key, key):
        return
    server = CompileServer(cache, key, program_key(linked), level)
    if server.start(source, main_args):
        server.finish([], wait=wait, exe=exe_key, profile=kinds)
    if wait:
        wait_for_builds(cache)


def _in_a_helper(request, cache):
    """`ask_for_executable(*request)` in a process of its own, started now (`python
    -m bril.backend.jit_deferred FILE`, the request marshalled in FILE), and return
    at once: True, or False if that cannot be (then nothing was done).  Asking a
    compile server costs a run that ends 7-13 ms (claiming or starting a server,
    storing the program); forking a child to ask, 1.1-2.2 ms of a 40 ms run (the
    fork of the whole process, its locks); this, a file written and a process
    spawned, 0.6-0.9 ms (the spawn 0.1-0.2 ms, whatever the run's size) -- and no
    fork of a process whose other threads may hold locks.  The helper runs in a
    session of its own, its standard streams on /dev/null (a reader of the run's
    output sees it end with the run).  It holds a `server-` lock (fd 3) taken here, from before
    it starts until its work is done (the server it started holds its own by
    then): `BRIL_JIT_PRECOMPILE=wait` (never handed to a helper: that run waits
    itself) finds the build in flight at every moment."""
    import marshal
    import os
    import sys
    if after_run_builds() == "wait" or not hasattr(os, "posix_spawn") or not sys.executable:
        return False
    from ..cache.buildlocks import lock_path, open_lock
    name = f"server-after-run-{os.getpid()}"
    lock = open_lock(cache, name)
    if lock is None:
        return False
    path = os.path.join(cache.directory, f".after-run-{os.getpid()}")     # (not an entry)
    try:
        import fcntl
        fcntl.flock(lock, fcntl.LOCK_EX)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            marshal.dump(request, fh)
        # (-P: the helper imports the installed bril, as this run did)
        os.posix_spawn(sys.executable,
                       [sys.executable, "-P", "-m", "bril.backend.jit_deferred",
                        cache.directory, path, name],
                       os.environ, setsid=True, file_actions=[
                           (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                           (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                           (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                           (os.POSIX_SPAWN_DUP2, lock, 3)])
    except (OSError, ValueError, TypeError):
        for leftover in (path, lock_path(cache, name)):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        return False
    finally:
        os.close(lock)                      # (the helper's copy holds it)
    return True


def _helper(argv):
    """The helper of `_in_a_helper`: argv = [the cache's directory, the request's
    file, its lock's name]."""
    import marshal
    import os
    from ..cache.buildlocks import lock_path
    from ..cache.codecache import CodeCache
    directory, path, name = argv
    try:
        with open(path, "rb") as fh:
            request = marshal.load(fh)
        os.unlink(path)
        ask_for_executable(*request)
    except Exception:               # (nobody to tell: the next run asks again)
        pass
    finally:
        try:
            os.unlink(lock_path(CodeCache(directory), name))
        except OSError:
            pass


def _in_generated_code(frame, depth=64):
    """Is this stack (its innermost `depth` frames) running generated code?"""
    from ..native_runtime.pynames import function_index
    while frame is not None and depth:
        if function_index(frame.f_code) is not None:
            return True
        frame = frame.f_back
        depth -= 1
    return False


if __name__ == "__main__":
    import os
    import sys
    _helper(sys.argv[1:])
    os._exit(0)             # (nothing of the run's to flush; no atexit work)
