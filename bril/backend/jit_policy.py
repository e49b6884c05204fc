"""When the JIT looks and when compiling pays: the numbers both halves of the JIT
read (`bril.backend.jit_deferred`, which starts the sampler, and `bril.backend.jit`, which
compiles), and how the sampler's thread takes the GIL when it has work
(`ShortSwitches`).  A light module: importing it imports nothing (`_thread` is
Python's own, loaded before us).

Read them as attributes (`jit_policy.PAY_BACK`), so that a test or a tool that
changes one here changes it for both halves.
"""

import _thread

# The JIT's sampler looks at the running program this often (seconds).
SAMPLE_INTERVAL = 0.005
# The most one look charges (seconds): after a pause (the sampler compiling, the
# process stopped), what ran in between is not all the loop seen now.
MAX_CHARGE = 20 * SAMPLE_INTERVAL
# With a compile server on another core (`bril.backend.jit_client`), compiling costs
# the interpreter nothing: a loop or function is asked for once the sampler has seen
# it hot this long (seconds: a few looks), hot code an earlier run saw at once.  The
# JIT itself comes in once looks have found the run in generated code this long
# (`bril.backend.jit_deferred`): nothing can be asked for before, and a run over by
# then -- most Bril runs -- is spared its imports, its sampler and its after-run work.
EARLY_HOT = 3 * SAMPLE_INTERVAL
# What the compile server builds for a run is built quick first (LLVM's light
# pipeline: a third to a half of the time of -O2), then at the full level, which
# the run swaps in when it lands (`bril.backend.jitcache.QUICK`).
QUICK_UNITS = True
# A cold run compiles a loop or function only once it has run interpreted for
# this many times the predicted cost: at worst 1/PAY_BACK slower than without.
PAY_BACK = 12
# Under the JIT, a program that allocates keeps its heap in the run-time library's
# table from the start (`bril.interpreter.heap.NativeHeap`), so that loops over
# memory can turn native in their first run (the heap cannot move once pointers
# exist); False: only where an earlier run's profile asks for it.
SHARED_HEAP_FROM_START = True
# A run this long (seconds, from when the program began) has its program compiled
# whole for the next plain run, hot loops or not: the JIT of a 50 ms run came in 2 ms
# before its end and found nothing hot (primes-between, eval input: 55 ms, 17 ms with
# the executable).
EXE_AFTER_RUN = 0.02
# A run the JIT never came into (it stayed in the first tier to its end) has its
# program compiled whole if it ran this many instructions (pythagorean_triple 300:
# 357,617 in 22-26 ms, and its warm runs stayed interpreted); counted, not timed, so
# that a tiny run on a busy machine builds nothing.
EXE_AFTER_INSTRS = 100_000
# Arrivals at a loop header (or calls, times `bril.backend.jit.CALLS_PER_HOT`) that make
# it hot when counting (`brili --jit --hot N`).
DEFAULT_HOT = 1000
# The GIL's switch interval while the sampler's thread attaches the JIT, compiles, asks
# the compile server or loads what it built (`ShortSwitches`).
SAMPLER_SWITCH = 0.0002
# The GIL's switch interval while a JIT's sampler looks at the run (before the JIT
# comes in and after): its thread, waking every SAMPLE_INTERVAL, gets the GIL within
# it.  At Python's 5 ms each look came 5-10 ms late, and so did the JIT's coming in
# and its asks: at 1 ms, first runs took 0.97x the time on bench_native's eval inputs
# and 0.95x on its long ones (geometric means; mat-mul and our sieve 0.91), none
# slower beyond noise -- nothing else waits for the GIL: one switch a look.
LOOK_SWITCH = 0.001


class ShortSwitches:
    """While the sampler's thread imports, compiles, asks the compile server or loads
    what it built: the interpreter hands the GIL over every SAMPLER_SWITCH seconds
    (or `interval`: LOOK_SWITCH while the sampler runs at all, `looking`) instead of
    every 5 ms.  The thread drops the GIL at each call into LLVM, each file it reads
    and each import, and waits a whole switch interval to get it back:
    primes-between's region took 1.58 s on the clock for 0.10 s of the thread's own
    time, asking the server for a loop 0.2 s for 10 ms, and the imports of a late
    attach held mat-mul's first looks back by 30 ms.

    The interval is the process's: while several hold one (the samplers of runs
    that overlap in one process, in any order of leaving), it is the shortest any
    of them wants, and Python's own again once the last has left."""

    def __init__(self, interval=None):
        self.interval = SAMPLER_SWITCH if interval is None else interval

    def __enter__(self):
        import sys
        global _before
        with _holding:
            if not _held:
                _before = sys.getswitchinterval()
            _held.append(self.interval)
            sys.setswitchinterval(min([_before] + _held))

    def __exit__(self, *exc):
        import sys
        with _holding:
            _held.remove(self.interval)
            sys.setswitchinterval(min([_before] + _held))


_held = []          # the intervals ShortSwitches in force want
_before = None      # the interval before the first of them
_holding = _thread.allocate_lock()


def looking(work, *args):
    """A sampler's thread: `work(*args)`, the GIL handed to it within LOOK_SWITCH."""
    with ShortSwitches(LOOK_SWITCH):
        return work(*args)
