"""Keys of the code cache: everything generated code is compiled from, hashed.

The generated Python of a function depends on
- its own Bril, and its number in the linked program (its Python name);
- how each of its calls resolves, and for every function it calls: the
  parameters and types (checks at the call), what the body can return
  (checks on the result), and, if the callee is small enough to be inlined,
  its whole body, and the same again for what that body calls (inlining goes
  two levels deep, so three levels of callees can matter);
- our own code generator and everything it reads (the op table, the heap
  templates, the range analysis...), the Python version (bytecode and
  marshal format), the variant, the heap representation and the options that
  change code generation.
All of it goes into the key, by content (never modification times): editing
a function changes the keys of that function, of its callers (their code
embeds what its body can return) and of the functions it may be inlined into,
and of nothing else.
"""

import os
import sys

from .codecache import hasher, source_digest
from ..ir.ops import STATEFUL_OPS, TERMINATORS

FORMAT = "bril-py-1"
# Our modules whose text decides what code is generated.
GENERATOR_MODULES = ("analysis/blocks", "interpreter/codegen", "analysis/typecheck", "ir/ops",
                     "interpreter/heap", "ir/values", "ir/support", "interpreter/interp",
                     "native_runtime/pynames", "cache/codekeys")
# Options read by the code generator from the environment.
GENERATOR_OPTIONS = ("BRIL_CHECK_FACTS", "BRIL_SPECULATE_TYPES")
# A callee with more instructions than this (labels included) cannot be inlined
# (codegen.INLINE_MAX_INSTRS operations in at most INLINE_MAX_BLOCKS blocks).
_INLINE_SIZE_BOUND = 48
_INLINE_LEVELS = 2

_generator_digest = None


def check_facts_requested():
    """True if BRIL_CHECK_FACTS asks for the checking mode (`_Emitter.emit_fact_checks`)."""
    return os.environ.get("BRIL_CHECK_FACTS", "") not in ("", "0")


def type_speculation_requested():
    """False if BRIL_SPECULATE_TYPES=0 asks for generated code that assumes no kinds
    (`CompiledProgram.speculate_types`: to measure what speculation gains)."""
    return os.environ.get("BRIL_SPECULATE_TYPES", "") != "0"


def generator_digest():
    """A digest of our code generator's source and the Python that runs it."""
    global _generator_digest
    if _generator_digest is None:
        # (the real modules' files: never an alias's at an old path)
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _generator_digest = source_digest(
            (FORMAT + "\0" + sys.version).encode(),
            [os.path.join(package, *name.split("/")) + ".py" for name in GENERATOR_MODULES])
    return _generator_digest


_NOT_INLINED = STATEFUL_OPS     # (the code generator never inlines them)


def _may_inline(func):
    """False if the code generator certainly does not inline func: too big, an op it
    never inlines, or not tree-shaped (a label reached from two places, counting
    fall-through, or the entry reached by a jump).  Cheap: no analysis."""
    instrs = func.get("instrs") or ()
    if len(instrs) > _INLINE_SIZE_BOUND:
        return False
    preds = {}
    falls = False               # the previous instruction falls through to the next
    first = True
    for ins in instrs:
        if "label" in ins and "op" not in ins:
            if first:
                preds[ins["label"]] = 1     # the entry: any jump to it is a second way in
            elif falls:
                preds[ins["label"]] = preds.get(ins["label"], 0) + 1
            falls = True
            continue
        first = False
        op = ins.get("op")
        if op in _NOT_INLINED:
            return False
        if op in ("jmp", "br"):
            for lab in dict.fromkeys(ins.get("labels") or ()):
                preds[lab] = preds.get(lab, 0) + 1
        falls = op not in TERMINATORS
    return all(n <= 1 for n in preds.values())


def function_key(linked, index, variant, osr, settings):
    """The cache key (hex) of one variant of function `index` of a linked program;
    None if the key cannot be made (then the code is not cached)."""
    try:
        h = hasher(generator_digest())
    except OSError:
        return None
    options = tuple(os.environ.get(o, "") for o in GENERATOR_OPTIONS)
    h.update(repr((variant, osr, settings, options)).encode())
    # The function, its callees, and below callees that may be inlined.
    h.update(call_graph_digest(linked, index, inlined_only=True))
    return h.hexdigest()


def call_graph_digest(linked, index, inlined_only):
    """The digest of function `index` and what is compiled into it: its callees'
    interfaces and, below them, callees that may be inlined (inlined_only), or
    everything it calls transitively.  Memoized on the linked program: a function
    with many loops asks once per loop, and hashing it again each time would cost
    its size per loop."""
    memo = linked.__dict__.setdefault("_call_graph_digests", {})
    digest = memo.get((index, inlined_only))
    if digest is None:
        h = hasher()
        if inlined_only:
            hash_call_graph(linked, index, h, lambda func, depth: depth == 0 or (
                depth <= _INLINE_LEVELS and _may_inline(func)))
        else:
            hash_call_graph(linked, index, h, lambda func, depth: True)
        digest = memo[(index, inlined_only)] = h.digest()
    return digest


def hash_call_graph(linked, index, h, expand):
    """Hash function `index` and the functions it calls, breadth first (each at its
    smallest depth), each with how its calls resolve; the calls of a function are
    followed if expand(function, depth) says so."""
    seen = {index}
    todo = [(index, 0)]
    for j, depth in todo:
        func = linked.functions[j]
        h.update(b"\0function %d\0" % j)
        h.update(repr(func).encode("utf-8", "surrogatepass"))
        if not expand(func, depth):
            continue            # only its interface and body count, not its callees
        for instr in func.get("instrs") or ():
            funcs = instr.get("funcs") if instr.get("op") == "call" else None
            if not funcs or not isinstance(funcs, list):
                continue
            r = linked.resolve_call(j, funcs[0])
            h.update(repr((j, funcs[0], r)).encode("utf-8", "surrogatepass"))
            if isinstance(r, int) and r not in seen:
                seen.add(r)
                todo.append((r, depth + 1))
