"""The JIT behind `brili --jit`: hot loops and hot functions of the running program
become native code, entered at loop headers and function entries, left at any
block boundary.

How a run goes (`bril.interpreter.interp.run(..., jit=Jit())`; `brili --jit` starts with a
`bril.backend.jit_deferred.DeferredJit`, which brings this module in only once the run
has spent `jit_policy.EARLY_HOT` in generated code, or at once when a profile exists):

1. Every function runs in its *jit variant* (`bril.interpreter.codegen`): the interpreter's
   normal code plus a counter at the function's entry and at each loop header.
2. When a loop header has been reached `hot` times, the hook hands the frame's
   variables to `Jit.enter`.  The first time, the JIT chooses the region: the
   outermost loop around that header whose blocks native code can run --
   every path through the loop nest, not only the recorded one, so a loop
   whose branch changes direction stays native; blocks that return, phi
   code and speculation still open where control would leave are left out.
   It lowers the region with `bril.backend.jit_lower` (the AOT compiler's per-op
   lowering: one definition of each op), optimizes it at LLVM -O2 and
   compiles it in this process (`bril.backend.native.JIT`).  A region is compiled
   once per run and can be entered at each of its loop headers; functions it
   calls are compiled whole, once per run, and shared by later modules.
3. Native code runs until control leaves the region: at an edge to a block
   outside it (a loop exit, an excluded path) it writes back the variables
   and returns that block.  That is exactly the interpreter's state there
   (the frame is the "resume data"), so nothing is rolled back: the
   interpreter goes on at that block in the function's `jitx` variant, where
   every block is reachable.  A region whose entries do too little work is
   given back to the interpreter for good.
4. A function called `hot_calls` times is compiled whole and from then on
   called natively from the interpreter (so recursion runs natively too).
5. Native code shares the interpreter's heap (`bril.interpreter.heap.NativeHeap`: regions
   live in the C runtime's table), prints into the runtime's buffer, drained
   into the interpreter's output after each native call (so the order is
   kept), and counts the instructions it stands for into the runtime's
   counter, added to the interpreter's `-p` count after each call.  A run-time
   error in native code comes back as the interpreter's `BrilError`.

Speculation in the program (from `brili --trace`) runs natively inside a
region: `speculate` snapshots the variables, a failing `guard` restores them
and jumps to its label, as in the interpreter.  Programs native code cannot
handle at all (`any`, a variable of two types, ...) simply run interpreted.
"""

import itertools
import os
import sys
import time

from ..ir.errors import BrilError
from . import jit_policy
from .jit_policy import ShortSwitches
from .jit_policy import DEFAULT_HOT
from .regions import select_region
from ..ir.support import PY_TYPES
from ..ir.values import UNDEF
from ..warm_start import after_run_builds
from ..native_runtime.pynames import function_index
from ..native_runtime.resume import (Slots, decode_result, encode_arguments, get_tagged, json_type,
                                     put_tagged)

# Native code entered from the interpreter must do enough at each entry to pay
# for crossing over: a region's entry (the frame handed over, the interpreter
# going on where it left) costs about 10 us, a call's (its arguments encoded,
# the result decoded) about 5 us, where the generated Python runs a Bril
# instruction in 0.025-0.04 us.  Measured: a region entered 20,000 times for 50
# instructions each made that run 6x slower than interpreting it (eight-queens'
# `valid` loop on a rerun: 0.23 s against 0.06 s), for 600 each about even.  A
# region or call whose first ENTRY_SAMPLE entries average fewer native
# instructions than these -- half what would pay, since later entries may do
# more (check-primes' calls grow with their argument) -- goes back to the
# interpreter, and the sampler looks for a unit further out (`_sample`).
MIN_WORK_PER_ENTRY = 200
MIN_WORK_PER_CALL = 100
ENTRY_SAMPLE = 64
NEVER = 1 << 62
# While a region or function compiles in the background, its hook looks again
# after this many more arrivals.
RECHECK = 64
# Predicted cost of compiling (seconds), for deciding when it pays: importing
# LLVM and making the target machine once, linking a shared object for the code
# cache, and per unit a base and a part per Bril instruction (measured here at
# -O2: 10-60 ms a region).
SETUP_COST = 0.15
LINK_COST = 0.03
COMPILE_BASE = 0.01
COMPILE_PER_INSTR = 0.0005
# (A cold run compiles once a unit has paid back `jit_policy.PAY_BACK` times.)
# The sampler looks at the running program's stack every `jit_policy.SAMPLE_INTERVAL`
# seconds, this many frames deep.
SAMPLE_DEPTH = 64
# With a profile: compile at once what an earlier run saw hot for this many times
# the predicted cost.
PREDICTED_PAY_BACK = 3
# Hot code an earlier run did not compile is compiled after the run (for the
# next one) if a sample saw it (seconds: one interval).  Compiling once
# (0.05-0.2 s, in a process of its own) pays back within a few dozen runs
# even at this, and short runs are where most of a warm run is interpreted
# (mat-mul 80: its printing loop, one sample, was 10 of a warm run's 40 ms).
PRECOMPILE_HOT = jit_policy.SAMPLE_INTERVAL
# A function becomes native code, whole, after this many times `hot` calls
# (compiling one costs about as much as interpreting a few thousand calls).
CALLS_PER_HOT = 5
_NOT_NATIVE = object()
# A loop turning hot in a function called at least this many times makes the
# JIT compile the whole function first.
CALLS_FOR_WHOLE = 8
# A loop gets regions for this many sets of kinds (`_other_version`: the kinds of
# its phases), then one assuming none.
MAX_KIND_VERSIONS = 2
# The kind of a value by its Python type (the interpreter's values, `PY_TYPES`).
KIND_OF_TYPE = {t: k for k, t in PY_TYPES.items() if k != "ptr"}





class NativeCall:
    """A function compiled whole, called natively from the interpreter."""

    def __init__(self, index, name):
        self.index = index
        self.name = name
        self.unit = None                # its bril.backend.jitcache.LoadedUnit, if kept in the cache
        self.unit_key = None
        self.address = None
        self.pending = None             # a background compilation (Future)
        self.symbol = None
        self.types = ()
        self.result = None
        self.buffers = None
        self.compile_seconds = 0.0
        self.asked_at = self.arrived_at = None  # (seconds into the run: compile server)
        self.entries = 0
        self.native_instrs = 0
        self.dropped = None
        self.light = False              # (dropped: too little work per call)
        self.sampled = 0                # calls that decide `light` (`Jit.call`),
        self.sampled_instrs = 0         # and their native instructions
        self.error = None
        self.upgraded_at = None         # (a quick unit's full build swapped in then,
        self.quick_unit = None          # the quick unit, kept loaded)


class LoopRegion:
    """One compiled loop region and its statistics."""

    def __init__(self, index, fc, header, blocks, entries):
        self.index = index              # the function
        self.fc = fc                    # its FunctionCode (None for a unit from the cache)
        self.unit = None                # its bril.backend.jitcache.LoadedUnit, if kept in the cache
        self.unit_key = None
        self.instrs = 0
        self.header = header            # the header of the loop the region is
        self.blocks = blocks            # block indices that run natively
        self.entry_blocks = entries     # loop headers where native code can be entered
        self.address = None
        self.pending = None             # a background compilation (Future)
        self.symbol = None
        self.slots = None               # bril.backend.jit_lower.Slots
        self.enter_fn = self.leave_fn = None
        self.lids = {}                  # exit block index -> layout id
        self.compile_seconds = 0.0
        self.asked_at = self.arrived_at = None  # (seconds into the run: compile server)
        self.entries = 0
        self.exits = {}                 # exit block index -> times
        self.native_instrs = 0
        self.dropped = None             # why the region went back to the interpreter
        self.light = False              # (dropped: too little work per entry)
        self.error = None               # the run-time error raised in it, if any
        # The kinds asked for its `any` variables at its loop headers (its key's:
        # `jitcache.region_kinds`), those its code assumes (`jit_lower.RegionLowering.
        # assumed`: {header: {variable: kind}}), and the tests of them where the
        # interpreter enters it: header -> [(frame key, Python type)].
        self.kinds = None
        self.assumed = {}
        self.kind_tests = {}
        self.upgraded_at = None         # (a quick unit's full build swapped in then,
        self.quick_unit = None          # the quick unit, kept loaded)


_ENGINES = {}
_REGION_NAMES = itertools.count()
_RUNS = itertools.count()


def _engine(level):
    """The process's MCJIT engine for this optimization level: one for all runs (an
    engine and its modules must live as long as the process, and compiled regions
    are cached by their IR across runs)."""
    from . import native
    engine = _ENGINES.get(level)
    if engine is None:
        engine = _ENGINES[level] = native.JIT(level)
    return engine


class Jit:
    """One run's JIT state.  `attach(compiled)` is called by `bril.interpreter.interp.run`.

    Two ways to find hot code:
    - *sampled* (`pay_back` > 0, what `brili --jit` does): a sampler thread looks
      at the running program's stack every `jit_policy.SAMPLE_INTERVAL` seconds.  A loop or
      function seen hot for `pay_back` times the predicted cost of compiling it
      is compiled on that thread, while the interpreter goes on (LLVM runs
      without the GIL); then the loop's flag is raised (its header hands the
      frame over at the next arrival) or the function's name is bound to a
      native call.  The interpreter pays nothing per call and one flag test
      per loop iteration, so a run is never more than about 1/pay_back slower
      than without the JIT, whatever comes next (ski rental).
    - *eager* (`pay_back` <= 0: `--hot N` given, and tests): every loop header
      calls the JIT, which compiles at the `hot`-th arrival; functions are
      counted by a stand-in and compiled at `hot_calls` calls.  Deterministic.

    `cache`: a `bril.cache.codecache.CodeCache` where compiled units and the program's
    profile are kept across runs (None: nothing is kept, code is compiled in
    process with MCJIT).  `shared_heap`: the interpreter keeps a program's heap
    in the runtime's region table, so that native code can touch memory: True
    always (it slows interpreted memory access somewhat), None when the profile
    says native code needed it last time."""

    def __init__(self, hot=DEFAULT_HOT, level=2, hot_calls=None, background=False,
                 cache=None, pay_back=0, shared_heap=True, exe_key=None):
        self.hot = max(1, hot)
        self.hot_calls = max(1, hot_calls if hot_calls is not None else CALLS_PER_HOT * hot)
        self.level = level
        # Compile on another thread while the interpreter goes on (eager mode; the
        # result is the same either way, only how soon native code takes over).
        self.background = background
        self.cache = cache
        self.pay_back = pay_back
        self.eager = pay_back <= 0
        self.shared_heap = shared_heap
        # The key of the program's whole executable (`bril.backend.program_exe`), built
        # after a hot run; None: this run's command line was not the executable's.
        self.exe_key = exe_key
        self.exe_asked = False
        self.compiled = None
        self.regions = {}               # (function, header) -> LoopRegion (or None: interpreted)
        self.all_regions = []           # in order of compilation
        self.prefix = f"jit{next(_RUNS)}"   # symbols of this run's native functions
        self.native_functions = set()   # indices of functions compiled whole (MCJIT modules)
        self.calls = {}                 # function index -> NativeCall (or None)
        self.all_calls = []
        self.queue = []                 # compiling in the background, in order
        self.failed = set()             # indices of functions whose module failed
        self.rt = None
        self.engine = None
        self.heap = None
        self.setup_seconds = 0.0
        self.refused = None             # why nothing can run natively
        self.profile = None             # what earlier runs learned (bril.backend.jitcache)
        self.profile_key = None
        self.wanted_heap = False        # a unit needed the shared heap it did not have
        self.run_keys = None            # (`_run_keys`: units' keys and constants)
        self.cache_hits = 0
        self.missing = set()            # profile entries whose units did not load
        self.source = None              # how to rebuild the program elsewhere (compile server)
        self.arrivals = _Counter()      # eager: loop -> arrivals, function -> calls
        self.hot_seconds = _Counter()   # loop or function -> seconds seen hot
        self.fast = {}                  # function index -> its generated code (promoted)
        self.sampler = None
        self.stopped = False
        self.lock = None                # guards compilation (sampler vs interpreter)
        self.server = None              # the compile server (bril.backend.jit_client)
        self.use_server = None          # decided at the first compile (`_with_server`)
        self.asked = {}                 # request id -> _Ask, while the server builds
        self.asking = {}                # what -> its _Ask (what: (index, header) or index)
        self.exit_code_asked = set()    # (function, variant)s the server makes (`_ask_exit_code`)
        self.waiting = {}               # what -> (candidates, unit keys another process
                                        # is building, seconds into the run it began
                                        # waiting, the kinds asked for)
        # Regions of one loop for other kinds (a phase of the run): (function, its
        # region's header) -> every region compiled or loaded for it, in order, and
        # loop -> the kinds its next region is asked for (None: none).
        self.versions = {}
        self.next_kinds = {}
        # Units running their quick build (`jitcache.QUICK`): the full build's key ->
        # the LoopRegion or NativeCall it goes into when it lands (`_upgrade`), and
        # the full builds a server of this run's will make (`_ask_full`).
        self.upgrading = {}
        self.upgrade_asked = set()
        self.start_time = time.perf_counter()
        self.run_seconds = None         # (the run's length, once it is over)
        # When the program began running (the JIT may come in later: jit_deferred);
        # the report's times count from then.
        self.began = self.start_time

    def _clock(self):
        """Seconds since the program began running."""
        return time.perf_counter() - self.began

    # --- set-up ------------------------------------------------------------------------

    def attach(self, compiled, looked_up=None, sampler_thread=None):
        """Prepare to JIT this program, cheaply: native code is set up when the first
        unit is compiled or loaded.  With a profile from earlier runs, the loops
        and functions that were compiled then enter native code at once.

        From `bril.backend.jit_deferred`: `looked_up`, the (key, profile or None) it found;
        `sampler_thread`, the main thread's id when attaching late, from the
        thread that then goes on as the sampler (`_sample_loop`)."""
        import _thread
        self.compiled = compiled
        self.lock = _thread.RLock()
        # Functions promoted before (a late attach) are there already.
        self.fast = compiled.jit_promoted
        compiled.jit_flag_start = self._flag_start
        compiled.jit_wrap = self._wrap
        compiled.ns["_JX"] = self.enter
        if looked_up is not None:
            self.profile_key, self.profile = looked_up
        elif self.cache is not None:
            from .jitprofile import load_profile, profile_key
            self.profile_key = profile_key(compiled.linked)
            self.profile = load_profile(self.cache, self.profile_key, compiled.linked)
        profile = self.profile or {}
        main = compiled.linked.main_index()
        for index in profile.get("calls", {}):
            if index != main:
                compiled.eager_functions.add(index)
        for index, _ in profile.get("regions", {}):
            compiled.eager_functions.add(index)
        if compiled.native_heap:
            # (chosen at the start of the run, before the JIT came in: jit_deferred)
            self.heap, self.rt = compiled.heap, compiled.heap.rt
        elif (self.shared_heap or profile.get("heap")
              or (self.shared_heap is None and jit_policy.SHARED_HEAP_FROM_START)) \
                and compiled.linked.allocates() and sampler_thread is None:
            # (not when attaching late: the program may hold pointers already)
            # The interpreter's heap moves into the runtime's region table from the
            # start (pointers cannot move later), so that both sides see the same
            # cells.
            if self._setup_runtime():
                self.heap = compiled.use_native_heap(self.rt)
        if sampler_thread is not None:
            self.main_thread = sampler_thread
        elif not self.eager:
            self.main_thread = _thread.get_ident()
            self.sampler = _thread.start_new_thread(jit_policy.looking, (self._sample_loop,))
        return self

    def _flag_start(self, index, header):
        """Loops call the JIT from the start in eager mode, and where a profile says
        native code ran last time."""
        return self.eager or (index, header) in (self.profile or {}).get("regions", {})

    def _wrap(self, index, fn):
        """What a promoted function is bound to: a native call when a unit for it is
        ready (or in the profile), a counting stand-in in eager mode, else itself."""
        self.fast[index] = fn
        if index == self.compiled.linked.main_index():
            return fn
        native = self.calls.get(index, False)
        if native is False and index in (self.profile or {}).get("calls", {}):
            native = self._cached_call(index)
            if native:
                self.calls[index] = native
        if native:
            return self._native_stand_in(index, native, fn)
        if self.eager:
            return self._counting_stand_in(index, fn)
        return fn

    def _bind(self, index, fn):
        """Bind function `index`'s name (and the cold tier's entry) to fn."""
        from ..native_runtime.pynames import function_name
        name = function_name(index, self.compiled.linked.functions[index].get("name", ""))
        self.compiled.ns[name] = fn
        cold = self.compiled.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        if cf is not None and cf.fast is not None:
            cf.fast = fn

    def _counting_stand_in(self, index, fn):
        def counted(*args):
            self.arrivals[index] += 1
            if self.arrivals[index] >= self.hot_calls:
                self._bind(index, fn)
                native = self.calls.get(index, False)
                if native is False:
                    native = self.calls[index] = self._compile_call(index)
                if native is not None:
                    self._bind(index, self._native_stand_in(index, native, fn))
                    return self._bound(index)(*args)
            return fn(*args)
        return counted

    def _bound(self, index):
        from ..native_runtime.pynames import function_name
        return self.compiled.ns[function_name(
            index, self.compiled.linked.functions[index].get("name", ""))]

    def _native_stand_in(self, index, native, fn):
        call = self.call

        def native_call(*args):
            r = call(native, args)
            return fn(*args) if r is _NOT_NATIVE else r
        return native_call

    def _setup_runtime(self):
        """The run-time library in this process (no LLVM); False if unavailable."""
        if self.rt is not None:
            return True
        if self.refused is not None:
            return False
        t0 = time.perf_counter()
        try:
            from ..native_runtime.nativert import runtime_library
            self.rt = runtime_library()
            self.rt.lib.brt_heap_reset()        # a new run: empty heap, buffers, counters
        except BrilError as e:
            self.refused = str(e)
            self.rt = None
            return False
        finally:
            self.setup_seconds += time.perf_counter() - t0
        return True

    def _setup_compiler(self):
        """LLVM, for compiling (not needed to load a cached unit)."""
        if not self._setup_runtime():
            return False
        if self.engine is None and self.cache is None:
            t0 = time.perf_counter()
            try:
                self.engine = _engine(self.level)
            except BrilError as e:
                self.refused = str(e)
                return False
            finally:
                self.setup_seconds += time.perf_counter() - t0
        return True

    def finish(self):
        """After the run: the sampler stops, nothing is left in the runtime's
        buffers, what was learned goes into the profile."""
        self.run_seconds = self._clock()
        # (under the lock: a sampler asking for a unit right now has its server
        # started before this, so the server is told the run is over -- else a
        # BRIL_JIT_PRECOMPILE=wait run waited for a server nobody would finish)
        if self.lock is not None:
            with self.lock:
                self.stopped = True
        self.stopped = True
        self._drain()
        self._store_profile()

    # --- the sampler ------------------------------------------------------------------

    def _sample_loop(self, seen=0.0):
        """The sampler's thread, from now to the run's end.  `seen`: seconds the
        run has spent in generated code before the JIT came in, charged to what
        runs now (`bril.backend.jit_deferred`, whose looks saw it)."""
        import _thread
        own = _thread.get_ident()
        # The first look comes after a fraction of an interval that differs from
        # run to run: at a fixed phase, a loop that always runs between the same
        # two looks (mat-mul's first, 3 ms from the start) would never be seen,
        # however many runs the profile learns from.
        first = 0 if seen else (time.perf_counter_ns() // 1000 % 997 + 1) / 998
        with ShortSwitches():
            self._with_server()         # (its imports now, not at the first hot look)
        last = time.perf_counter()
        while not self.stopped:
            if first:
                time.sleep(jit_policy.SAMPLE_INTERVAL * first)
            first = 1
            if self.asked or self.waiting or self.upgrading:
                try:
                    with ShortSwitches():
                        self._land()
                except Exception:   # (a unit that cannot be used is interpreted)
                    pass
            # A look is charged the time since the last one, not one interval:
            # looks come late (this thread waits for the GIL the interpreter
            # holds), and charged an interval each, a loop took about six times
            # PAY_BACK to turn hot (primes-between: 0.4 s charged in 2.4 s).
            now = time.perf_counter()
            if seen:
                elapsed, seen = seen + (now - last), 0.0
            else:
                elapsed = min(max(now - last, jit_policy.SAMPLE_INTERVAL), jit_policy.MAX_CHARGE)
            last = now
            try:
                for tid, frame in sys._current_frames().items():
                    if tid not in (own, self.main_thread):
                        self._sample(frame, elapsed)
            except Exception:       # the sampler must never disturb the program
                pass

    def _sample(self, frame, elapsed=None):
        """Charge `elapsed` seconds to the innermost loop running generated code and
        to every function on the stack; compile what has become worth it."""
        if elapsed is None:
            elapsed = jit_policy.SAMPLE_INTERVAL
        seen = set()
        frames = []                 # (function, frame, code), the innermost first
        depth = 0
        while frame is not None and depth < SAMPLE_DEPTH:
            code = frame.f_code
            index = function_index(code)
            if index is not None:
                frames.append((index, frame, code))
                seen.add(index)
            frame = frame.f_back
            depth += 1
        for index in seen:
            self.hot_seconds[index] += elapsed
        rec = self._recursion_on_stack(frames) if len(frames) > len(seen) else None
        if rec is not None:
            if self.calls.get(rec, False) is False and self._worth(rec, rec):
                self._compile_call_in_sampler(rec)
            return
        # The innermost loop is charged -- or, if its native code did too little per
        # entry to pay for crossing over (`light`), the loop around it, in this
        # function or in its caller: a unit that takes the light one in.
        for index, frame, code in frames:
            headers = self._loops_at(code, frame.f_lineno)
            for header in reversed(headers):
                key = (index, header)
                region = self.regions.get(key, False)
                if getattr(region, "light", False):
                    continue
                self.hot_seconds[key] += elapsed
                if region is False and self._worth(key, index):
                    self._compile_in_sampler(index, header)
                return
            if headers:
                continue            # (every loop here is light)
            native = self.calls.get(index, False)
            if getattr(native, "light", False):
                continue
            if native is False and index != self.compiled.linked.main_index() \
                    and self._worth(index, index):
                # Hot without a loop of its own: many calls (recursion, a callee).
                self._compile_call_in_sampler(index)
            return

    def _recursion_on_stack(self, frames):
        """The outermost function (not @main) the sampled stack holds more than once,
        with a compile server, unless its unit failed or was light: the unit to ask
        for.  Compiled whole, a recursive function takes in what it calls -- the hot
        loop of a callee (eight-queens' @valid under @queen) runs inside it, where a
        region of its own would be entered once per call for a few instructions and
        dropped, and the recursion is native too."""
        if not self._with_server():
            return None
        counts = {}
        for index, _, _ in frames:
            counts[index] = counts.get(index, 0) + 1
        main = self.compiled.linked.main_index()
        for index, _, _ in reversed(frames):
            if counts[index] > 1 and index != main:
                native = self.calls.get(index, False)
                if native is None or getattr(native, "light", False):
                    return None
                return index
        return None

    def _loops_at(self, code, line):
        """The headers of the loops around `line` of generated code, the innermost
        last."""
        loops = self.compiled.jit_code_loops.get(code.co_name)
        if not loops:
            return ()
        return [header for first, last, header in loops if first <= line <= last]

    def _worth(self, what, index):
        """Ski rental: has `what` been hot for pay_back times what compiling costs?
        With a compile server, compiling costs the interpreter nothing: hot for a
        few looks is enough."""
        if what in self.asking or what in self.waiting:
            return False
        if self._with_server():
            profile = self.profile or {}
            if what in profile.get("tried", ()):
                from . import jitcache
                if what in jitcache.tried_here(profile, self.level):
                    return False    # (this compiler could not build it before)
            earlier = profile.get("hot", {}).get(what, 0.0)
            return self.hot_seconds[what] >= jit_policy.EARLY_HOT or earlier >= jit_policy.EARLY_HOT
        cost = COMPILE_BASE + COMPILE_PER_INSTR * self._size(index)
        if self.rt is None or (self.engine is None and self.cache is None):
            cost += SETUP_COST
        if self.cache is not None:
            cost += LINK_COST
        earlier = (self.profile or {}).get("hot", {}).get(what, 0.0)
        if earlier >= PREDICTED_PAY_BACK * cost:
            return True
        return self.hot_seconds[what] >= self.pay_back * cost

    def _size(self, index):
        return len(self.compiled.linked.functions[index].get("instrs") or ())

    def _compile_in_sampler(self, index, header):
        if self._with_server():
            with ShortSwitches():
                self._ask_region(index, header)
            return
        with self.lock, ShortSwitches():
            if self.regions.get((index, header), False) is not False:
                return
            region = self._cached_region(index, header)
            if region is False:
                region = self._compile(index, header)
        if region is not None and region.address is not None:
            self._raise_flags(region)

    def _compile_call_in_sampler(self, index):
        if self._with_server():
            with ShortSwitches():
                self._ask_call(index)
            return
        with self.lock, ShortSwitches():
            if index in self.calls:
                return
            native = self.calls[index] = self._compile_call(index)
        fn = self.fast.get(index)
        if native is not None and fn is not None:
            self._bind(index, self._native_stand_in(index, native, fn))

    # --- the compile server ---------------------------------------------------------------

    def _with_server(self):
        """Compile in a compile server (`bril.backend.jit_client`) while the program
        runs on: sampled mode, with a code cache (units come back through it), and a
        second core to compile on (else the pay-back rule, compiling here)."""
        if self.use_server is None:
            from .jit_client import cores
            self.use_server = (not self.eager and self.cache is not None and cores() >= 2
                               and os.environ.get("BRIL_JIT_SERVER", "1") != "0")
        return self.use_server and (self.server is None or not self.server.broken)

    def _server(self):
        """The compile server, started on first use; None if it cannot be."""
        if self.server is None:
            from .jit_client import CompileServer
            from .jitprofile import program_key
            self.server = CompileServer(self.cache, self.profile_key,
                                        program_key(self.compiled.linked), self.level)
        if self.source is None or not self.server.start(self.source, self.compiled.main_args):
            return None
        return self.server

    def _ask(self, what, candidates, kinds=None):
        """Ask the server for `what`'s unit (candidates: a region's, widest first;
        `kinds`: the kinds its headers assume, `_loop_kinds`); False if it cannot be
        asked."""
        if self.stopped:
            return False                # (the run is over: `_precompile` decides)
        server = self._server()
        quick = jit_policy.QUICK_UNITS
        rid = server.request(what, candidates, kinds, quick) if server is not None else None
        if rid is None:
            return False
        ask = _Ask(what, self._clock())
        ask.kinds = kinds
        ask.kinds_at = {e for _, entries in (candidates or ()) for e in entries}
        # (the keys its unit may have: a reply with another is refused, never run)
        kind, index = ("region", what[0]) if isinstance(what, tuple) else ("call", what)
        ask.keys = {self._unit_key(kind, index, blocks, entries, kinds, quick)
                    for blocks, entries in (candidates or [(None, None)])}
        self.asked[rid] = self.asking[what] = ask
        self._ask_exit_code(server, index, kind == "region")
        if not self.exe_asked:
            # (a run hot enough to ask: the server compiles the program whole when it
            # has nothing else to do, so that a run right after this one is it)
            self.exe_asked = True
            exe = self._executable_wanted(self.profile) \
                if after_run_builds() != "none" else None
            if exe is not None:
                server.whole(exe, self._exe_profile())
        return True

    def _in_cache(self, kind, index, candidates, kinds=None):
        """A unit for one of the candidates already in the cache (another run built
        it), loaded: (unit, key, blocks, entries); or the keys being built by
        another process (wait for them) -- or, for a run without a server of its
        own, the lock of a compile server serving another run of the program or
        building what it found hot (most often this same unit: a second server
        started for it would spend 0.1 s of the machine starting up, and the first
        finishes sooner); or None."""
        from . import jitcache
        from ..cache.buildlocks import AFTER_RUN, being_built
        keys = []
        # (a unit in the cache means the run-time library is built: load it then)
        for blocks, entries in candidates:
            ukey = self._unit_key(kind, index, blocks, entries, kinds)
            if jitcache.stored_meta(self.cache, ukey) is None:
                # (its quick build, if that is all there is yet: its full one swapped in
                # when it lands, `_upgrade`)
                quick = self._unit_key(kind, index, blocks, entries, kinds, True)
                if jitcache.stored_meta(self.cache, quick) is None:
                    keys += [ukey, quick]       # (a server may be building either)
                    continue
                ukey = quick
            unit = jitcache.load_unit(self.cache, ukey) if self._setup_runtime() else None
            if unit is not None:
                if unit.meta.get("heap") and self.heap is None:
                    self.wanted_heap = True
                    return None
                self.cache_hits += 1
                return unit, ukey, blocks, entries
            keys.append(ukey)
        building = [k for k in keys if being_built(self.cache, k)]
        # (a server of this run's own holds that lock for its session: ask it)
        if not building and self.profile_key is not None and self.server is None \
                and being_built(self.cache, AFTER_RUN + self.profile_key):
            building = [AFTER_RUN + self.profile_key]
        return building or None

    def _ask_region(self, index, header):
        key = (index, header)
        with self.lock:
            if self.regions.get(key, False) is not False or key in self.asking \
                    or key in self.waiting:
                return
            if self._cached_region(index, header) is not False:
                return                  # (in the profile and the cache: flags raised)
        # The region's blocks, from the function's blocks and loops alone (no type
        # analysis: a run whose code came from the cache has none to reuse), and
        # outside the lock, which `finish` takes.
        shape = self.compiled.function_shape(index)
        candidates = [(sorted(b), sorted(e)) for b, e in select_region(shape, header)]
        kinds = self._loop_kinds(index, header)
        with self.lock:
            if self.stopped or self.regions.get(key, False) is not False \
                    or key in self.asking or key in self.waiting:
                return
            if not candidates:
                self.regions[key] = None
                return
            found = self._in_cache("region", index, candidates, kinds)
            if isinstance(found, tuple):
                self._region_from_unit(key, *found, kinds=kinds)
            elif found:
                self.waiting[key] = (candidates, found, self._clock(),
                                     kinds)
            elif not self._ask(key, candidates, kinds):
                self.use_server = False     # (compile here, when it pays)

    def _ask_call(self, index):
        with self.lock:
            if index in self.calls or index in self.asking or index in self.waiting:
                return
            cached = self._cached_call(index)
            if cached:
                self._use_native_call(index, cached)
                return
            found = self._in_cache("call", index, [(None, None)])
            if isinstance(found, tuple):
                native = NativeCall(index, self.compiled.linked.functions[index].get("name", ""))
                native.unit_key = found[1]
                self._use_call_unit(native, found[0])
                self.all_calls.append(native)
                self._use_native_call(index, native)
            elif found:
                self.waiting[index] = ([(None, None)], found,
                                       self._clock(), None)
            elif not self._ask(index, None):
                self.use_server = False

    def _region_from_unit(self, key, unit, ukey, blocks, entries, ask=None, kinds=None):
        from .jitcache import region_kinds
        index, header = key
        region = LoopRegion(index, None, header, set(blocks), set(entries))
        region.unit_key = ukey
        region.kinds = region_kinds(ask.kinds if ask is not None else kinds, entries)
        region.arrived_at = self._clock()
        if ask is not None:
            region.asked_at, region.arrived_at = ask.asked_at, ask.arrived_at
            region.compile_seconds = ask.seconds
        self._use_region_unit(region, unit)
        self._register_region(region)
        return region

    def _use_native_call(self, index, native):
        self.calls[index] = native
        fn = self.fast.get(index)
        if fn is not None:
            self._bind(index, self._native_stand_in(index, native, fn))

    def _land(self):
        """Use what the server built, and what other processes finished building."""
        from . import jitcache
        from ..cache.buildlocks import being_built
        replies = self.server.poll() if self.server is not None else []
        with self.lock:
            for _, rid, ukey, seconds, blocks, entries, error in replies:
                ask = self.asked.pop(rid, None)
                if ask is None:
                    continue
                self.asking.pop(ask.what, None)
                ask.seconds = seconds
                ask.arrived_at = self._clock()
                unit = None
                if ukey is not None and ukey not in ask.keys:
                    error, ukey = "the compile server built another program's unit", None
                if ukey is not None and self._setup_runtime():
                    unit = jitcache.load_unit(self.cache, ukey)
                    if unit is None:
                        error = "the compiled code could not be loaded"
                if unit is not None and unit.meta.get("heap") and self.heap is None:
                    self.wanted_heap = True
                    error, unit = "pointers need the shared heap", None
                if unit is not None and unit.meta.get("full"):
                    self.upgrade_asked.add(unit.meta["full"])   # (the server's next build)
                self._landed(ask, unit, ukey, blocks, entries, error)
            for what, (candidates, keys, _, kinds) in list(self.waiting.items()):
                if any(being_built(self.cache, k) for k in keys):
                    continue
                del self.waiting[what]
                kind, index = ("region", what[0]) if isinstance(what, tuple) else ("call", what)
                found = self._in_cache(kind, index, candidates, kinds)
                if isinstance(found, tuple):
                    ask = _Ask(what, None)
                    ask.kinds = kinds
                    ask.arrived_at = self._clock()
                    self._landed(ask, found[0], found[1], found[2], found[3], None)
                # (else the other build failed: asked again if it stays hot)
            for full, obj in list(self.upgrading.items()):
                if jitcache.stored_meta(self.cache, full) is not None:
                    del self.upgrading[full]
                    self._upgrade(obj, full)
                elif full not in self.upgrade_asked and not self.stopped:
                    self._ask_full(full, obj)

    def _ask_full(self, full, obj):
        """A unit this run took quick from the cache, whose full build nobody is making
        (the server of the run that asked for it ended first, or the cache evicted
        it), is asked of this run's server, once -- unless a process builds it, or a
        server does the after-run work of the program, which makes it (asked again
        at a later look, or after the run, `_precompile`).  The look that finds it in
        the cache swaps it in."""
        from ..cache.buildlocks import AFTER_RUN, being_built
        if not self._with_server() or being_built(self.cache, full) or (
                self.server is None and being_built(self.cache, AFTER_RUN + self.profile_key)):
            return
        self.upgrade_asked.add(full)
        server = self._server()
        if server is None:
            return
        if isinstance(obj, LoopRegion):
            server.request((obj.index, obj.header),
                           [(sorted(obj.blocks), sorted(obj.entry_blocks))], obj.kinds)
        else:
            server.request(obj.index, None)

    def _upgrade(self, obj, ukey):
        """The full build `ukey` of the unit a LoopRegion or NativeCall runs quick
        (`jitcache.QUICK`) is in the cache: later entries and calls run it.  A
        region running its quick code now leaves at its next back edge (told by the
        slot after its entry slot) and is entered again there, in the full code.
        The quick unit stays loaded: a call into it may be under way."""
        from . import jitcache
        if obj.address is None or obj.unit is None:
            return                      # (dropped: interpreted)
        unit = jitcache.load_unit(self.cache, ukey)
        if unit is None:
            return
        meta, quick = unit.meta, obj.unit.meta
        if any(meta.get(k) != quick.get(k) for k in ("slots", "lids", "types", "result")):
            return                      # (never: both are lowered alike)
        obj.quick_unit, obj.unit, obj.unit_key = obj.unit, unit, ukey
        obj.address = unit.address
        obj.upgraded_at = self._clock()
        if isinstance(obj, LoopRegion):
            obj.buffers[0][obj.slots.size + 1] = 1

    def _landed(self, ask, unit, ukey, blocks, entries, error):
        what = ask.what
        if isinstance(what, tuple):
            if unit is None:
                fc = self.compiled.function_code(what[0])
                region = LoopRegion(what[0], fc, what[1], set(), set())
                region.dropped = error or "could not be built"
                region.asked_at, region.arrived_at = ask.asked_at, ask.arrived_at
                region.compile_seconds = ask.seconds
                self.all_regions.append(region)
                self.regions[what] = None
                return
            self._region_from_unit(what, unit, ukey, blocks, entries, ask)
            return
        native = NativeCall(what, self.compiled.linked.functions[what].get("name", ""))
        native.asked_at, native.arrived_at = ask.asked_at, ask.arrived_at
        native.compile_seconds = ask.seconds
        self.all_calls.append(native)
        if unit is None:
            native.dropped = error or "could not be built"
            self.calls[what] = None
            return
        native.unit_key = ukey
        self._use_call_unit(native, unit)
        self._use_native_call(what, native)

    def _raise_flags(self, region):
        ns = self.compiled.ns
        for h in region.entry_blocks:
            ns[f"_JQ{region.index}_{h}"] = True

    # --- the loop hook -----------------------------------------------------------------

    def enter(self, index, header, frame):
        key = (index, header)
        region = self.regions.get(key, False)
        if region is False:
            with self.lock:
                region = self.regions.get(key, False)
                if region is False:
                    region = self._cached_region(index, header)
                if region is False:
                    if not self.eager:
                        self.compiled.ns[f"_JQ{index}_{header}"] = False
                        return None
                    self.arrivals[key] += 1
                    if self.arrivals[key] < self.hot or self._whole_function_instead(index,
                                                                                      header):
                        return None
                    region = self._compile(index, header)
        if region is None or not self._ready(region):
            if region is None or region.pending is None:
                self.compiled.ns[f"_JQ{index}_{header}"] = False
            return None
        tests = region.kind_tests.get(header)
        if tests and not all(type(frame.get(name)) is typ for name, typ in tests):
            region = self._other_version(region, header, frame)
            if region is None:
                return None
        S, D = region.buffers
        if not region.enter_fn(frame, S, D):
            return None                 # a value of another kind: let the interpreter fail
        S[region.slots.size] = header
        ns = self.compiled.ns
        region.entries += 1
        try:
            t = self.rt.call(region.address, S)
        except BrilError as e:
            region.error = e.message
            raise
        finally:
            self._drain()
            if self.heap is not None:
                self.heap.sync()
        region.exits[t] = region.exits.get(t, 0) + 1
        work = ns["_native_last"]
        region.native_instrs += work
        if region.entries == ENTRY_SAMPLE and \
                region.native_instrs < MIN_WORK_PER_ENTRY * ENTRY_SAMPLE:
            region.dropped = (f"{region.native_instrs / region.entries:.0f} instructions "
                              "per entry")
            region.light = True
            region.address = None
            for h in region.entry_blocks:
                ns[f"_JQ{index}_{h}"] = False
        # The whole frame: the interpreter may go on in another frame (jitx).
        frame.update(region.leave_fn(S, D))
        return region.lids[t], frame

    def _loop_kinds(self, index, header):
        """{header: {variable: kind}} a region of this loop assumes: the kinds the
        function's generated code assumes at its loop headers (its own type
        speculation, `FunctionCode.header_kinds`), else (its code came from the
        cache) those a region of the loop assumed first in an earlier run (the
        profile's); once a region of the loop found others, those
        (`_other_version`); None: none."""
        if (index, header) in self.next_kinds:
            return self.next_kinds[index, header]
        fc = self.compiled.codes.get(index)
        return getattr(fc, "header_kinds", None) or \
            (self.profile or {}).get("kinds", {}).get((index, header)) or None

    def _other_version(self, region, header, frame):
        """A region's entry found other kinds than it assumes (a phase of the run):
        the region of the loop for these kinds (or assuming none) if there is one,
        made the loop's; else None, and the loop's next region is asked for these
        kinds -- once: a third asks for none, so there is no loop of recompiling (in
        the meantime the loop is interpreted)."""
        loop = (region.index, region.header)
        versions = self.versions.get(loop, ())
        for other in versions:
            if other is not region and header in other.entry_blocks and self._ready(other) \
                    and all(type(frame.get(name)) is typ
                            for name, typ in other.kind_tests.get(header, ())):
                self._make_current(other)
                return other
        kinds = None
        if sum(1 for r in versions if r.assumed) < MAX_KIND_VERSIONS:
            from ..native_runtime.pynames import var_name
            seen = {v: KIND_OF_TYPE.get(type(frame.get(var_name(v))))
                    for v in region.assumed.get(header, ())}
            if all(seen.values()):
                kinds = {header: seen}
        with self.lock:
            for h in region.entry_blocks | {region.header}:
                key = (region.index, h)
                self.next_kinds[key] = kinds
                if self.regions.get(key) is region:
                    self.regions[key] = False       # (asked for again)
                    if not self.eager:
                        self.compiled.ns[f"_JQ{region.index}_{h}"] = False
        return None

    def _make_current(self, region):
        """The region its loops enter from now on (one of their `versions`)."""
        with self.lock:
            for h in region.entry_blocks | {region.header}:
                self.regions[(region.index, h)] = region
        self._raise_flags(region)

    def _whole_function_instead(self, index, header):
        """Eager mode: a hot loop in a function called many times already: compile
        the function whole (its later calls run natively) rather than this loop,
        and go on interpreting this call.  Only if the loop stays hot in this same
        call does it get a region of its own."""
        key = (index, header)
        if ("deferred", key) in self.arrivals or index in self.calls:
            return False
        if self.arrivals[index] < CALLS_FOR_WHOLE:
            return False
        self.arrivals[("deferred", key)] = 1
        native = self.calls[index] = self._compile_call(index)
        if native is None:
            return False
        fn = self.fast.get(index)
        if fn is not None:
            self._bind(index, self._native_stand_in(index, native, fn))
        self.arrivals[key] = 0
        return True

    def call(self, native, args):
        """Run a call natively: its result, or _NOT_NATIVE to interpret it."""
        if not self._ready(native):
            return _NOT_NATIVE
        S, D = native.buffers
        heap = self.heap
        if not encode_arguments(native.types, args, S, D, heap.to_pair if heap else None):
            return _NOT_NATIVE          # a value of another kind: let the interpreter report it
        native.entries += 1
        try:
            self.rt.call(native.address, S)
        except BrilError as e:
            native.error = e.message
            raise
        finally:
            self._drain()
        work = self.compiled.ns["_native_last"]
        native.native_instrs += work
        if native.sampled < ENTRY_SAMPLE:
            # (calls from the function's own interpreted frames -- a recursion that
            # was under way when the unit landed, unwinding through its leaves --
            # are not the calls that decide: ackermann's first 64 were all leaves,
            # 6 instructions each, and the run went on interpreted).  (Frame 2: what
            # called the stand-in, `_native_stand_in`, this method's one caller.)
            if function_index(sys._getframe(2).f_code) != native.index:
                native.sampled += 1
                native.sampled_instrs += work
                if native.sampled == ENTRY_SAMPLE and \
                        native.sampled_instrs < MIN_WORK_PER_CALL * ENTRY_SAMPLE:
                    self._drop_light_call(native)
        return decode_result(native.result, S, D, heap.from_pair if heap else None)

    def _drop_light_call(self, native):
        """A function whose calls from the interpreter do too little to pay for
        crossing over (MIN_WORK_PER_CALL) is interpreted again."""
        native.dropped = f"{native.sampled_instrs / native.sampled:.0f} instructions per call"
        native.light = True
        native.address = None
        fn = self.fast.get(native.index)
        if fn is not None:
            self._bind(native.index, fn)

    # --- units from the cache -------------------------------------------------------------

    def _cached_region(self, index, header):
        """The region a profile names for this loop, loaded from the cache without
        LLVM; False if there is none (compile as usual)."""
        from .jitcache import region_kinds
        spec = (self.profile or {}).get("regions", {}).get((index, header))
        if spec is None or (index, header) in self.next_kinds:
            return False                # (none, or its regions found other kinds)
        blocks, entries = spec["blocks"], spec["entries"]
        kinds = region_kinds(spec.get("kinds"), entries)
        unit, ukey = self._load_unit("region", index, blocks, entries, kinds)
        if unit is None:
            self.missing.add((index, header))
            return False
        # (the loop's regions for other kinds, which earlier runs used: entered when
        # their kinds come, `_other_version`)
        for other in spec.get("others", ()):
            o_entries = other["entries"]
            o_kinds = region_kinds(other.get("kinds"), o_entries)
            o_unit, o_key = self._load_unit("region", index, other["blocks"], o_entries,
                                            o_kinds)
            if o_unit is not None:
                version = LoopRegion(index, None, header, set(other["blocks"]), set(o_entries))
                version.unit_key, version.kinds = o_key, o_kinds
                version.arrived_at = self._clock()
                self._use_region_unit(version, o_unit)
                self.all_regions.append(version)
                self.versions.setdefault((index, header), []).append(version)
        region = LoopRegion(index, None, header, set(blocks), set(entries))
        region.unit_key = ukey
        region.kinds = kinds
        region.arrived_at = self._clock()
        self._use_region_unit(region, unit)
        self._register_region(region)
        return region

    def _cached_call(self, index):
        if index not in (self.profile or {}).get("calls", {}):
            return False
        unit, ukey = self._load_unit("call", index, None, None)
        if unit is None:
            self.missing.add(index)
            return False
        native = NativeCall(index, self.compiled.linked.functions[index].get("name", ""))
        native.unit_key = ukey
        native.arrived_at = self._clock()
        self._use_call_unit(native, unit)
        self.all_calls.append(native)
        return native

    def _load_unit(self, kind, index, blocks, entries, kinds=None):
        """(unit, key): a unit from the cache, loaded without LLVM, if there is one this
        run can use (one that touches memory needs the shared heap): its full
        build, else its quick one (`jitcache.QUICK`)."""
        if self.cache is None or not self._setup_runtime():
            return None, None
        from . import jitcache
        ukey = self._unit_key(kind, index, blocks, entries, kinds)
        unit = jitcache.load_unit(self.cache, ukey)
        if unit is None:
            ukey = self._unit_key(kind, index, blocks, entries, kinds, True)
            unit = jitcache.load_unit(self.cache, ukey)
        if unit is None or (unit.meta.get("heap") and self.heap is None):
            return None, None
        self.cache_hits += 1
        return unit, ukey

    def _use_region_unit(self, region, unit):
        meta = unit.meta
        region.slots = Slots.from_data(meta["slots"])
        region.address = unit.address
        region.unit = unit
        region.lids = dict(meta["lids"])
        region.instrs = meta["instrs"]
        region.assumed = meta.get("assumed", {})
        self._marshal_functions(region)
        if meta.get("full"):
            self.upgrading[meta["full"]] = region

    @staticmethod
    def _kind_tests(region):
        """The tests of the kinds a region assumes at its headers, where the
        interpreter enters it (those of variables it holds tagged: see
        `jit_lower.RegionLowering`)."""
        from ..native_runtime.pynames import var_name
        region.kind_tests = {h: [(var_name(v), PY_TYPES[k]) for v, k in sorted(vs.items())]
                             for h, vs in region.assumed.items()}

    def _use_call_unit(self, native, unit):
        meta = unit.meta
        native.address = unit.address
        native.unit = unit
        native.types, native.result = list(meta["types"]), meta["result"]
        self._call_buffers(native)
        if meta.get("full"):
            self.upgrading[meta["full"]] = native

    def _store_profile(self):
        """What this run learned, for the next: every unit it compiled or used,
        how long what was hot ran, whether native code needed the shared heap --
        merged into the profile as it is now (a compile server, or another run, may
        have added to it since this run read it)."""
        if self.cache is None or self.profile_key is None:
            return
        from . import jitcache
        from .jitprofile import update_profile
        mine_regions = {}
        for r in self.all_regions:
            key = (r.index, r.header)
            if _usable(r):
                # (the loop's region at the end of the run, and its other versions)
                main = self.regions.get(key)
                main = main if _usable(main) and main.header == r.header else r
                others = [_region_spec(o) for o in self.versions.get(key, ())
                          if o is not main and _usable(o)]
                mine_regions[key] = dict(_region_spec(main), **({"others": others}
                                                                if others else {}))
            elif (r.unit_key is not None or r.dropped is not None) \
                    and not any(_usable(o) for o in self.versions.get(key, ())):
                mine_regions[key] = None
        mine_calls = {n.index: ({} if n.unit_key is not None and n.dropped is None else None)
                      for n in self.all_calls}
        linked = self.compiled.linked

        def merge(profile):
            before = repr(profile)
            regions, calls = profile["regions"], profile["calls"]
            # Units listed but not loadable this run go, unless they are there now
            # (built meanwhile); they are built again if still hot.
            for what in self.missing:
                spec = regions.get(what) if isinstance(what, tuple) else calls.get(what)
                if spec is None:
                    continue
                kind, index = ("region", what[0]) if isinstance(what, tuple) else ("call", what)
                ukey = self._unit_key(kind, index, spec.get("blocks"), spec.get("entries"),
                                      spec.get("kinds"))
                if jitcache.stored_meta(self.cache, ukey) is None:
                    (regions if kind == "region" else calls).pop(what, None)
            for what, spec in mine_regions.items():
                if spec is None:
                    regions.pop(what, None)
                else:
                    regions[what] = spec
            for what, spec in mine_calls.items():
                if spec is None:
                    calls.pop(what, None)
                else:
                    calls[what] = spec
            # The kinds each loop's first region assumed (a later run whose code
            # comes from the cache asks for those: `_loop_kinds`).
            kinds = profile["kinds"] = dict(profile.get("kinds", {}))
            for loop, versions in self.versions.items():
                first = next((r.kinds for r in versions if r.kinds), None)
                if first:
                    kinds[loop] = first
            for ask in self.asking.values():      # (asked for, still being built)
                if isinstance(ask.what, tuple) and ask.kinds and ask.what not in kinds:
                    kinds[ask.what] = jitcache.region_kinds(ask.kinds, ask.kinds_at)
            # How long each loop and function stayed hot (the longest seen so far).
            hot = profile["hot"]
            for what, seconds in self.hot_seconds.items():
                hot[what] = max(hot.get(what, 0.0), round(seconds, 4))
            profile["heap"] = bool(profile.get("heap") or self.heap is not None
                                   or self.wanted_heap)
            types = self._exe_profile(profile)
            if types is not None and types["functions"]:
                profile["types"] = types
            # Nothing hot, nothing to remember -- except a unit that wanted the heap:
            # a run that counts arrivals (`--hot N`) keeps no other trace of it, and
            # the next run must set the heap up from its start for pointer code to
            # be native at all.
            if not (regions or calls or hot or profile["heap"] or self.profile):
                return None
            return profile if repr(profile) != before or self.profile is None else None

        profile = update_profile(self.cache, self.profile_key, merge, linked)
        if profile is None:
            from .jitprofile import load_profile
            profile = load_profile(self.cache, self.profile_key, linked)
        self._precompile(profile)

    def _precompile(self, profile):
        """After the run: hot code it did not compile (too short a run, or one
        asked too late) is built for the next run by the compile server -- this
        run's, told so as it is let go, or one started now -- so that this run ends
        at once and the next finds native code in the cache.
        BRIL_JIT_PRECOMPILE=0: nothing more is built after the run; =wait: wait
        for it, and for every build in flight for this cache (benchmarks, tests):
        `bril.warm_start.after_run_builds`."""
        mode = after_run_builds()
        if mode == "wait" and self.server is None and self.cache is not None:
            # (what is left to build is decided once every server at work is done: an
            # earlier run's, building what that run asked for late, holds the
            # program's after-run lock -- which tells a run without a server of its
            # own to leave the rest to it -- but was told to build nothing more if its
            # run had BRIL_JIT_PRECOMPILE=0: a benchmark's plain runs, then runs that
            # wait, never had the program's executable built)
            from ..cache.buildlocks import wait_for_builds
            wait_for_builds(self.cache)
        todo = []
        if profile is not None and mode != "none" and self.source is not None:
            from . import jitcache
            tried = jitcache.tried_here(profile, self.level)
            todo = [w for w, seconds in profile["hot"].items() if seconds >= PRECOMPILE_HOT
                    and w not in profile["regions"] and w not in profile["calls"]
                    and w not in self.asking and w not in tried
                    and self.regions.get(w, False) is not None
                    and self.calls.get(w, False) is not None
                    and not getattr(self.regions.get(w) or self.calls.get(w), "light", False)]
        if todo and self.server is None:
            from ..cache.buildlocks import AFTER_RUN, being_built
            if being_built(self.cache, AFTER_RUN + self.profile_key):
                todo = []       # (a server builds what the run before this one found hot)
        exe = self._executable_wanted(profile) if mode != "none" else None
        if mode != "none" and self.cache is not None:
            from . import jitcache
            for full, obj in list(self.upgrading.items()):
                if full not in self.upgrade_asked \
                        and jitcache.stored_meta(self.cache, full) is None:
                    self._ask_full(full, obj)       # (for the next run)
        if self.server is None and (todo or exe):
            self._server()
        if self.server is not None:
            for what in todo:
                region = isinstance(what, tuple)
                self._ask_exit_code(self.server, what[0] if region else what, region)
            self.server.finish(todo, wait=mode == "wait", exe=exe,
                               profile=self._exe_profile(profile) if exe is not None else None)
        if mode == "wait" and self.cache is not None:
            from ..cache.buildlocks import wait_for_builds
            wait_for_builds(self.cache)

    def _ask_exit_code(self, server, index, region):
        """Have the server generate, for the next run, the Python code of function
        `index` (whose unit is asked for) that run needs and this one may not have
        made, as this run would generate it, once: its jit variant (a function a
        profile names is promoted at its first call; one this run entered by
        on-stack replacement has none: 17-29 ms of a rerun of mat-mul or sum-check)
        and, for a `region`, its jitx variant (where the interpreter goes on when
        the region hands back)."""
        for variant in ("jit", "jitx") if region else ("jit",):
            if (index, variant) in self.exit_code_asked:
                continue
            self.exit_code_asked.add((index, variant))
            key = self.compiled.variant_key(index, variant)
            if key is not None:
                server.exit_code(index, key, self.compiled.native_heap, variant)

    def _exe_profile(self, profile=None):
        """The kinds earlier runs (their JIT `profile`, else the one this run read)
        and this run's first tier saw the `any` parameters and the loop headers'
        `any` variables hold, as a type profile for the program's executable
        (`bril.interpreter.type_profile.seen`, `merged`)."""
        if self.compiled is None:
            return None
        from ..interpreter import type_profile
        earlier = (profile if profile is not None else self.profile or {}).get("types")
        return type_profile.merged(earlier, type_profile.seen(self.compiled))

    def _executable_wanted(self, profile):
        """The key of the program's whole executable if the compile server should build
        it: the run was hot (native code was wanted, or is kept for the program), the
        program is one to compile whole, and no build of it failed before."""
        if self.exe_key is None or self.source is None or self.cache is None:
            return None
        hot = self.server is not None or (profile is not None and (
            profile["regions"] or profile["calls"]
            or any(s >= PRECOMPILE_HOT for s in profile["hot"].values()))) \
            or time.perf_counter() - self.began >= jit_policy.EXE_AFTER_RUN
        if not hot:
            return None
        from . import jitcache, program_exe
        if profile is not None and program_exe.KIND in jitcache.tried_here(profile, self.level):
            return None
        if not program_exe.eligible(self.source[0]) or program_exe.cached(self.cache, self.exe_key):
            return None
        if program_exe.build_pending(self.cache, self.exe_key, self.profile_key,
                                     own_server=self.server is not None):
            # (another run's server builds it, or serves a run of the program that
            # asked for it: no server for it -- a rerun started as the first run
            # ended started a second one, which built the executable again)
            return None
        return self.exe_key

    # --- compiling ----------------------------------------------------------------------

    def _compile_call(self, index):
        if not self._setup_compiler():
            return None
        from . import jitcache
        native = NativeCall(index, self.compiled.linked.functions[index].get("name", ""))
        t0 = time.perf_counter()
        try:
            name = f"jit.call.{next(_REGION_NAMES)}"
            try:
                module, meta, defined, used = jitcache.lower_call_unit(
                    self.compiled.linked, index, name, prefix=self.prefix,
                    shared=self._shared_functions(), heap=self.heap is not None)
            except jitcache.NeedsHeap:
                self.wanted_heap = True
                raise BrilError("pointers need the shared heap") from None
            types, result = meta["types"], meta["result"]
            native.compile_seconds = time.perf_counter() - t0
            self._machine_code(native, module, name, defined, used, "call", None, None, meta)
        except BrilError as e:
            native.dropped = str(e)
            self.all_calls.append(native)
            return None
        self.native_functions.update(defined)
        native.types, native.result = types, result
        self._call_buffers(native)
        self.all_calls.append(native)
        return native

    def _call_buffers(self, native):
        from ..native_runtime.ffi import c_double, c_int64
        S = (c_int64 * max(3, 3 * len(native.types)))()
        native.buffers = (S, (c_double * len(S)).from_buffer(S))

    def _shared_functions(self):
        """Functions a new MCJIT module may take from earlier ones (none for units
        kept in the cache: each stands alone)."""
        return set() if self.cache is not None else self.native_functions

    def _unit_key(self, kind, index, blocks, entries, kinds=None, quick=False):
        """The cache key of a unit of this run's (`jitcache.RunKeys`)."""
        return self._run_keys().key(kind, index, blocks, entries, kinds, quick)

    def _run_keys(self):
        if self.run_keys is None:
            from .jitcache import RunKeys
            self.run_keys = RunKeys(self.compiled.linked, self.level, self.compiled.main_args)
        return self.run_keys

    def _machine_code(self, obj, module, name, defined, used, kind, blocks, entries, meta):
        """Compile a lowered module for obj (a LoopRegion or NativeCall): into a shared
        object kept in the code cache (with a cache), else with MCJIT now or on
        the background thread; `obj.address` is set when it is ready."""
        from . import native
        t0 = time.perf_counter()
        if self.cache is not None:
            from . import jitcache
            ukey = self._unit_key(kind, obj.index, blocks, entries, getattr(obj, "kinds", None))
            try:
                unit = jitcache.build_unit(self.cache, ukey, module, meta, self.level)
            finally:
                obj.compile_seconds += time.perf_counter() - t0
            if unit is None:
                raise BrilError("the compiled code could not be kept in the code cache")
            obj.unit, obj.unit_key, obj.address = unit, ukey, unit.address
            return
        text = native.ir_text(module, self.engine.tm)
        obj.compile_seconds += time.perf_counter() - t0
        obj.symbol = name
        obj.defines, obj.uses = set(defined), set(used)
        if self.background:
            from .jit_worker import worker
            obj.pending = worker().submit(text, self.level)
            self.queue.append(obj)
            return
        t0 = time.perf_counter()
        try:
            obj.address = self.engine.compile(text)[name]
        except BrilError:
            self.failed |= obj.defines
            raise
        finally:
            obj.compile_seconds += time.perf_counter() - t0

    def _ready(self, obj):
        """True if obj has machine code; False if not, or not yet (`obj.pending` is
        still set while it compiles in the background)."""
        if obj.pending is not None:
            self._collect()
        return obj.pending is None and obj.address is not None

    def _collect(self):
        """Load finished background compilations into the engine, in submission
        order (later code may call functions earlier code defines)."""
        while self.queue and self.queue[0].pending.done():
            obj = self.queue.pop(0)
            job, obj.pending = obj.pending, None
            obj.compile_seconds += job.seconds
            t0 = time.perf_counter()
            try:
                if obj.uses & self.failed:
                    raise BrilError("a function it calls could not be compiled")
                obj.address = self.engine.add_object(job.result(), [obj.symbol])[obj.symbol]
            except Exception as e:          # (LLVM's own errors included) interpret it
                obj.dropped = str(e)
                self.failed |= obj.defines
            obj.compile_seconds += time.perf_counter() - t0

    def _drain(self):
        rt = self.rt
        if rt is None:
            return
        rt.write_output(self.compiled.ns["_P"], self.compiled.out)
        n = rt.dyn_count
        if n:
            rt.dyn_count = 0
            self.compiled.ns["_N"] += n
        self.compiled.ns["_native_last"] = n

    # --- compiling a region --------------------------------------------------------------

    def _compile(self, index, header):
        key = (index, header)
        if not self._setup_compiler():
            self.regions[key] = None
            return None
        fc = self.compiled.function_code(index)
        from .jitcache import region_kinds
        kinds = self._loop_kinds(index, header)
        region = None
        for blocks, entries in select_region(fc, header):
            region = LoopRegion(index, fc, header, blocks, entries)
            region.kinds = region_kinds(kinds, entries)
            try:
                self._build(region)
                break
            except BrilError as e:      # e.g. an ill-typed instruction: try a smaller one
                region.dropped = str(e)
                region.address = region.pending = None
        if region is None:
            self.regions[key] = None
            return None
        self._register_region(region)
        return region

    def _register_region(self, region):
        """Every loop the region can be entered at tries it at its next visits."""
        self.all_regions.append(region)
        self.versions.setdefault((region.index, region.header), []).append(region)
        for h in region.entry_blocks:
            if not self.regions.get((region.index, h)):
                self.regions[(region.index, h)] = region
        if not self.regions.get((region.index, region.header)):
            self.regions[(region.index, region.header)] = region
        if region.address is not None or region.pending is not None:
            self._raise_flags(region)

    def _build(self, region):
        from . import jitcache
        fc = region.fc
        # Unique in the process: the engine is shared by every run, and a name
        # compiled twice would resolve to its first definition.
        name = f"jit.region.{next(_REGION_NAMES)}"
        t0 = time.perf_counter()
        try:
            module, meta, defined, used, slots = jitcache.lower_region_unit(
                self.compiled.linked, fc.index, fc, region.blocks, region.entry_blocks, name,
                prefix=self.prefix, shared=self._shared_functions(),
                heap=self.heap is not None, constants=self._run_keys().constants(fc.index),
                kinds=region.kinds)
        except jitcache.NeedsHeap:
            self.wanted_heap = True
            raise BrilError("pointers need the shared heap") from None
        region.compile_seconds = time.perf_counter() - t0
        region.lids, region.instrs = meta["lids"], meta["instrs"]
        region.assumed = meta.get("assumed", {})
        self._machine_code(region, module, name, defined, used, "region", region.blocks,
                           region.entry_blocks, meta)
        if self.cache is None:
            self.native_functions.update(defined)
        region.slots = slots
        self._marshal_functions(region)

    def _marshal_functions(self, region):
        """The functions moving variables between the frame and the slot array."""
        from .jitcache import region_marshal_code
        slots = region.slots
        code, heap_names = region_marshal_code(self.cache, slots, region.index, region.header)
        env = {"_M": object(), "_U": UNDEF, "_put": put_tagged, "_get": get_tagged,
               "_to_pair": None, "_from_pair": None}
        if self.heap is not None:
            env["_to_pair"] = self.heap.to_pair
            env["_from_pair"] = self.heap.from_pair
        for typ_repr, pyname in heap_names.items():
            env[pyname] = json_type(eval(typ_repr))
        exec(code, env)
        region.enter_fn, region.leave_fn = env["_in"], env["_out"]
        self._kind_tests(region)
        # slots, then the block to start at, then a quick unit's "leave" (`_upgrade`)
        from ..native_runtime.ffi import c_double, c_int64
        S = (c_int64 * (slots.size + 2))()
        D = (c_double * (slots.size + 2)).from_buffer(S)
        region.buffers = (S, D)

    # --- the report ----------------------------------------------------------------------

    def report(self):
        """JSON-ready summary: per region, where it is, what it covers, compile time,
        native entries and exits."""
        out = {"setup_seconds": round(self.setup_seconds, 4), "refused": self.refused,
               "cache_hits": self.cache_hits, "regions": [], "functions": [],
               "instructions": self.compiled.instructions_run(),
               "run_seconds": None if self.run_seconds is None else round(self.run_seconds, 4),
               "came_in_seconds": round(self.start_time - self.began, 4),
               "server": self.server is not None and self.server.used}
        reported = {(r.index, r.header) for r in self.all_regions}
        for (index, header), region in sorted(self.regions.items()):
            if region is None and (index, header) not in reported:
                fc = self.compiled.function_code(index)
                out["regions"].append({
                    "function": fc.name, "header": _block_name(fc, header),
                    "compiled": False,
                    "why": "its header cannot run natively (a return, phi code, "
                           "or speculation left open)"})
        self._collect()                     # finished background work
        for native in self.all_calls:
            out["functions"].append(dict(_unit_report(native), function=native.name,
                                         calls=native.entries))
        for region in self.all_regions:
            fc = self.compiled.function_code(region.index)
            out["regions"].append(dict(
                _unit_report(region), function=fc.name,
                header=_block_name(fc, region.header),
                entered_at=[_block_name(fc, bi) for bi in sorted(region.entry_blocks)],
                blocks=[_block_name(fc, bi) for bi in sorted(region.blocks)],
                instructions=region.instrs, entries=region.entries,
                exits={_block_name(fc, t): n for t, n in sorted(region.exits.items())},
                kinds={_block_name(fc, h): dict(vs) for h, vs in region.assumed.items()}))
        # (asked of the compile server, or being built by another run's, and not
        # there when the run ended)
        pending = [(ask.what, ask.asked_at, "asked_at") for ask in self.asking.values()]
        pending += [(what, since, "waited_from")
                    for what, (_, _, since, _) in self.waiting.items()]
        for what, at, when in sorted(pending, key=lambda p: p[1]):
            entry = {"compiled": False, "compiling": when == "asked_at",
                     "elsewhere": when == "waited_from", when: round(at, 4)}
            if isinstance(what, tuple):
                fc = self.compiled.function_code(what[0])
                out["regions"].append(dict(entry, function=fc.name,
                                           header=_block_name(fc, what[1])))
            else:
                out["functions"].append(dict(
                    entry, function=self.compiled.linked.functions[what].get("name", "")))
        return out



class _Ask:
    """A unit asked of the compile server: when (seconds into the run), when it came."""

    def __init__(self, what, asked_at):
        self.what = what
        self.keys = ()
        self.kinds = None               # (a region's: the kinds asked for, at the
        self.kinds_at = ()              # candidates' entries)
        self.asked_at = asked_at
        self.arrived_at = None
        self.seconds = 0.0


class _Counter(dict):
    """A dict of counts (`collections.Counter` without importing collections)."""

    def __missing__(self, key):
        return 0


def _usable(region):
    """Is this a region built into a unit, not dropped?"""
    return isinstance(region, LoopRegion) and region.unit_key is not None \
        and region.dropped is None


def _region_spec(region):
    """What a profile keeps of a region: its blocks, entries and kinds."""
    spec = {"blocks": sorted(region.blocks), "entries": sorted(region.entry_blocks)}
    if region.kinds:
        from .jitcache import kinds_data
        spec["kinds"] = kinds_data(region.kinds)
    return spec


def _unit_report(obj):
    """What the report says of any compiled unit (a LoopRegion or a NativeCall)."""
    return {"compiled": obj.address is not None or obj.entries > 0,
            "compiling": obj.pending is not None,
            "asked_at": None if obj.asked_at is None else round(obj.asked_at, 4),
            "arrived_at": None if obj.arrived_at is None else round(obj.arrived_at, 4),
            "from_cache": obj.compile_seconds == 0 and obj.unit is not None,
            "compile_seconds": round(obj.compile_seconds, 4),
            "native_instructions": obj.native_instrs,
            "upgraded_at": None if obj.upgraded_at is None else round(obj.upgraded_at, 4),
            "dropped": obj.dropped, "error": obj.error}


def _block_name(fc, bi):
    b = fc.blocks_by_index[bi]
    return f".{b.label}" if b.label is not None else f"#{bi}"


def _when(unit, total):
    """When a unit was asked for and came, and its share of the run, as text."""
    parts = []
    if unit.get("asked_at") is not None:
        parts.append(f"asked for at {unit['asked_at']:.3f} s")
    if unit.get("waited_from") is not None:
        parts.append(f"waited for from {unit['waited_from']:.3f} s")
    if unit.get("arrived_at") is not None:
        # (a reply that brought no unit -- the build failed -- is no native code)
        parts.append(("native from" if unit.get("compiled") else "answered at")
                     + f" {unit['arrived_at']:.3f} s")
    if unit.get("upgraded_at") is not None:
        # (it came as its quick build: `jitcache.QUICK`)
        parts.append(f"fully optimised from {unit['upgraded_at']:.3f} s")
    if total and unit.get("native_instructions"):
        parts.append(f"{100 * unit['native_instructions'] / total:.0f}% of the run's "
                     "instructions")
    return ("; " + ", ".join(parts)) if parts else ""


def _pending_why(unit):
    if unit.get("compiling"):
        return "still compiling when the program ended"
    if unit.get("elsewhere"):
        return "another run's compile server was building it when the program ended"
    return None


def report_text(report):
    total = report.get("instructions")
    lines = [f"jit: set-up {report['setup_seconds']:.3f} s"
             + (f"; run {report['run_seconds']:.3f} s" if report.get("run_seconds") else "")
             + (f"; the JIT came in at {report['came_in_seconds']:.3f} s"
                if report.get("came_in_seconds", 0) >= 0.0005 else "")
             + (f"; program interpreted: {report['refused']}" if report["refused"] else "")
             + ("; compiling in a compile server" if report.get("server") else "")
             + (f"; {report['note']}" if report.get("note") else "")]
    for r in report["regions"]:
        where = f"@{r['function']} {r['header']}"
        if not r.get("compiled"):
            why = _pending_why(r) or r.get("why") or r.get("dropped")
            lines.append(f"  {where}: not compiled ({why}){_when(r, total)}")
            continue
        exits = ", ".join(f"{k} x{n}" for k, n in r["exits"].items()) or "none"
        kinds = "; ".join(f"{h}: " + ", ".join(f"{v} {k}" for v, k in sorted(vs.items()))
                          for h, vs in r.get("kinds", {}).items())
        lines.append(f"  {where}: {len(r['blocks'])} blocks, {r['instructions']} instrs, "
                     + (f"assuming {kinds}, " if kinds else "")
                     + f"compiled in {r['compile_seconds']:.3f} s; {r['entries']} entries, "
                     f"{r['native_instructions']} native instrs; exits: {exits}"
                     + (f"; dropped: {r['dropped']}" if r["dropped"] else "")
                     + (f"; error: {r['error']}" if r["error"] else "") + _when(r, total))
    for f in report.get("functions", ()):
        where = f"@{f['function']} (whole function)"
        if not f["compiled"]:
            why = _pending_why(f) or f["dropped"]
            lines.append(f"  {where}: not compiled ({why}){_when(f, total)}")
            continue
        lines.append(f"  {where}: compiled in {f['compile_seconds']:.3f} s; {f['calls']} "
                     f"native calls from the interpreter, {f['native_instructions']} native "
                     f"instrs" + (f"; error: {f['error']}" if f["error"] else "")
                     + _when(f, total))
    return "\n".join(lines) + "\n"
