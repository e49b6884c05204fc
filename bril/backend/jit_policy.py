"""When the JIT looks and when compiling pays: the numbers both halves of the JIT
read (`bril.backend.jit_deferred`, which starts the sampler, and `bril.backend.jit`, which
compiles).  A light module: importing it imports nothing.

Read them as attributes (`jit_policy.PAY_BACK`), so that a test or a tool that
changes one here changes it for both halves.
"""

# The JIT's sampler looks at the running program this often (seconds); the JIT
# comes in at the first look.
SAMPLE_INTERVAL = 0.005
# A cold run compiles a loop or function only once it has run interpreted for
# this many times the predicted cost: at worst 1/PAY_BACK slower than without.
PAY_BACK = 12
# Under the JIT, a program that allocates keeps its heap in the run-time library's
# table from the start (`bril.interpreter.heap.NativeHeap`), so that loops over
# memory can turn native in their first run (the heap cannot move once pointers
# exist); False: only where an earlier run's profile asks for it.
SHARED_HEAP_FROM_START = True
# Arrivals at a loop header (or calls, times `bril.backend.jit.CALLS_PER_HOT`) that make
# it hot when counting (`brili --jit --hot N`).
DEFAULT_HOT = 1000
