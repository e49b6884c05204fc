"""The Bril interpreter (public API): link, compile to Python, run.

    run(prog, argv=(), *, out=None, base_dir=None, lib_dirs=()) -> int
    run_capture(prog, argv=(), timeout=None) -> (stdout text, count)

`run` links imports (`bril.linker`), turns every function reachable from
@main into Python source (`bril.codegen`, guided by `bril.typecheck`),
compiles it once, and calls @main with its command-line arguments parsed by
their declared types (`bril.values`).  It returns the number of dynamic
instructions (what `brili -p` prints) and raises `BrilError` with the
reference interpreter's message for every Bril error; output printed before
an error has been written to `out` (and flushed) when the error is raised.

Semantics beyond the reference interpreter (all documented in the team brief):

* Integers are exact signed 64-bit values (wrapping), also in JSON constants
  and in @main arguments (read exactly, not through a double).
* Speculation nests as the spec says: `commit` ends the innermost
  speculation and returns to its parent.  An abort (failed `guard`) restores
  the variables, *including ssa2 shadow variables* (`set`), to their values
  at the matching `speculate` (the reference does not roll back shadow
  variables); the heap and the output are not rolled back.
* The classic SSA `phi` picks the argument whose label is the
  second-most-recently executed label (docs/lang/ssa.md).
* Deep recursion runs in a thread with a large stack and a high recursion
  limit; a runaway recursion ends in a one-line error.

For a tracer or a native engine: `compile_program(prog, ...)` returns the
`CompiledProgram`, whose `codes` map function indices to `FunctionCode`
objects (blocks in layout order, variables at block entry, generated source,
`entry_source()` to start a function at any block with given variables); see
`bril.codegen`.  `run(..., recorder=R)` (or `run_recording`) runs the
functions' recording variants, which report entries, blocks and returns to R
(`brili --trace`).
"""

import io
import re
import sys
import threading

from .errors import BrilError
from . import codegen
from . import heap as heapmod
from .linker import link
from .ops import HELPERS as OP_HELPERS
from .values import UNDEF, MISSING, format_float, format_value, kind_of, parse_main_args

# Nested Bril calls allowed before "recursion too deep" (the reference, on a 1 MB
# JavaScript stack, stops far earlier).
MAX_CALL_DEPTH = 200_000
THREAD_STACK = 512 * 1024 * 1024


# --- helpers the generated code calls --------------------------------------------------

def _cint(v, msg):
    if type(v) is int:
        return v
    raise BrilError(msg)


def _cbool(v, msg):
    if type(v) is bool:
        return v
    raise BrilError(msg)


def _cfloat(v, msg):
    if type(v) is float:
        return v
    raise BrilError(msg)


def _cchar(v, msg):
    if type(v) is str:
        return v
    raise BrilError(msg)


def _cptr(v, msg):
    if type(v) is tuple:
        return v
    raise BrilError(msg)


def _unknown_type(v, text):
    raise BrilError(f"unknown type {text}")


def _phi_error(prev, label_ids):
    if prev is None:
        raise BrilError("phi: no predecessor label has been executed")
    name = next((k for k, v in label_ids.items() if v == prev), prev)
    raise BrilError(f"phi has no argument for label {name}")


def _fact_violated(what, value):
    """Checking mode (`bril.codegen._Emitter.emit_fact_checks`): a range fact the
    generated code relied on does not hold -- a bug of the tool, not of the program."""
    raise BrilError(f"internal error: range fact violated: {what} (got {value!r})")


class _Unbound:
    __slots__ = ()


_BASE_NAMESPACE = dict(OP_HELPERS)
_BASE_NAMESPACE.update(heapmod.HELPERS)
_BASE_NAMESPACE.update({
    "_E": BrilError,
    "_cint": _cint, "_cbool": _cbool, "_cfloat": _cfloat, "_cchar": _cchar, "_cptr": _cptr,
    "_unknown_type": _unknown_type,
    "_phi_error": _phi_error,
    "_RF": _fact_violated,
    "_ff": format_float,
    "_fv": format_value,
    "_kind": kind_of,
    "_UNDEF": UNDEF,
    "_UNB": _Unbound(),
    "_INF": float("inf"),
    "_NAN": float("nan"),
})


# --- compiling a program -----------------------------------------------------------------

class CompiledProgram:
    """The generated Python code of a linked program, with its run-time namespace."""

    def __init__(self, linked, out, native_heap=False, check_facts=None):
        self.linked = linked
        # Checking mode: the generated code asserts the range facts it relies on
        # (`check_facts`, else the environment variable BRIL_CHECK_FACTS, read here once).
        self.check_facts = codegen.check_facts_requested() if check_facts is None \
            else bool(check_facts)
        self.native_heap = False
        self.heap = heapmod.Heap()
        self.ns = dict(_BASE_NAMESPACE)
        self.ns["_N"] = 0
        self.ns["_P"] = out.write
        self.ns["_alloc"] = self.heap.alloc
        self.ns["_free"] = self.heap.free
        self.codes = {}             # global function index -> FunctionCode
        self._consts = {}
        if native_heap:
            from .native import runtime_library
            self.use_native_heap(runtime_library())
        self.jit_headers = {}       # (function index, header block index) -> hook number
        self.jit_threshold = 0
        self.ns["_JC"] = []         # per hook: arrivals left before it calls _JX

    def use_native_heap(self, rt):
        """Keep the heap in brilrt's region table (`bril.heap.NativeHeap`), shared
        with native code; before any code is generated.  Returns the heap."""
        assert not self.codes, "the heap must be chosen before code is generated"
        self.native_heap = True
        self.heap = heapmod.NativeHeap(rt)
        self.ns.update(heapmod.NATIVE_HELPERS)
        self.ns["_hpair"] = self.heap.from_pair
        self.ns["_hregs"] = self.heap.regions
        self.ns["_alloc"] = self.heap.alloc
        self.ns["_free"] = self.heap.free
        return self.heap

    # used by the code generator
    def resolve_call(self, caller_index, name):
        r = self.linked.resolve_call(caller_index, name)
        return r if isinstance(r, str) else self.codes[r]

    def constant(self, obj):
        """A global name bound to obj in the generated code's namespace."""
        key = id(obj)
        name = self._consts.get(key)
        if name is None:
            name = f"_K{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = obj
        return name

    def generic_name(self, index):
        """Global name of the generic variant of a function (compiled on first call)."""
        name = f"_G{index}"
        if name not in self.ns:
            def compile_generic(*args):
                fc = self.codes[index]
                src = fc.generic_source()
                self._dump_more(src)
                exec(compile(src, f"<bril @{fc.name} generic>", "exec"), self.ns)
                fn = self.ns[name] = self.ns[f"{fc.pyname}__generic"]
                return fn(*args)
            self.ns[name] = compile_generic
        return name

    def _dump_more(self, src):
        dump = codegen.dump_requested()
        if dump:
            _dump(src, dump)

    def function_code(self, index):
        fc = self.codes.get(index)
        if fc is None:
            fc = self.codes[index] = codegen.FunctionCode(index, self.linked.functions[index], self)
        return fc

    def jit_header_id(self, index, header):
        """A program-wide number for the loop of function `index` headed by block
        `header` (the jit variant's hooks index `_JC` with it)."""
        key = (index, header)
        k = self.jit_headers.get(key)
        if k is None:
            k = self.jit_headers[key] = len(self.jit_headers)
            self.ns["_JC"].append(self.jit_threshold)
        return k

    def prepare(self, root_index, record=False, jit=False):
        """Type-check every function reachable from root_index, then generate and
        compile their code (their recording variants if `record`; with `jit`, the
        jit variant of every function that has a loop, under the normal name)."""
        todo = [root_index]
        seen = {root_index}
        while todo:
            fc = self.function_code(todo.pop())
            for b in fc.blocks_by_index:
                for instr in b.instrs:
                    if instr["op"] == "call" and instr.get("funcs"):
                        r = self.linked.resolve_call(fc.index, instr["funcs"][0])
                        if isinstance(r, int) and r not in seen:
                            seen.add(r)
                            todo.append(r)
        dump = codegen.dump_requested()
        sources = []
        for index in sorted(self.codes):
            fc = self.codes[index]
            use_jit = jit
            src = fc.record_source() if record else fc.jit_source() if use_jit else fc.source()
            sources.append(src)
            code = compile(src, f"<bril @{fc.name}>", "exec")
            exec(code, self.ns)
            if use_jit:
                self.ns[fc.pyname] = self.ns[fc.pyname + "__jit"]
        if dump:
            _dump("\n".join(sources), dump)

    def entry_function(self, index):
        """The `__entry(_b, _vars)` variant of a function (compiled on demand)."""
        fc = self.codes[index]
        name = f"{fc.pyname}__entry"
        if name not in self.ns:
            src = fc.entry_source()
            self._dump_more(src)
            exec(compile(src, f"<bril @{fc.name} entry>", "exec"), self.ns)
        return self.ns[name]


def _dump(text, where):
    """BRIL_DUMP_PY=1 (or - or stderr): to stderr; otherwise appended to that file."""
    if where in ("1", "-", "stderr"):
        sys.stderr.write(text)
    else:
        with open(where, "a") as fh:
            fh.write(text)


def compile_program(prog, *, out=None, base_dir=None, lib_dirs=(), filename=None,
                    native_heap=False, check_facts=None):
    """Link and compile prog; returns (CompiledProgram, index of @main).  With
    `native_heap`, the heap lives in brilrt's region table (`bril.heap.NativeHeap`).
    `check_facts`: the checking mode (see `run`)."""
    linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
    main = linked.main_index()
    compiled = CompiledProgram(linked, out if out is not None else sys.stdout,
                               native_heap=native_heap, check_facts=check_facts)
    return compiled, main


# --- running ---------------------------------------------------------------------------

_NAME_RE = re.compile(r"'([^']+)'")


def _translate(exc):
    """A BrilError for an exception escaping generated code."""
    if isinstance(exc, BrilError):
        return exc
    if isinstance(exc, NameError):      # includes UnboundLocalError
        m = _NAME_RE.search(str(exc))
        who = codegen.bril_name_of(m.group(1)) if m else None
        if who is not None:
            kind, name = who
            if kind == "var":
                return BrilError(f"undefined variable {name}")
            return BrilError(f"get without corresponding set for {name}")
    if isinstance(exc, ZeroDivisionError):
        # `div` on operands known to be non-negative compiles to a bare `//`
        # (ops.py's py_nonneg template), which lets Python catch the zero.
        return BrilError("division by zero")
    if isinstance(exc, RecursionError):
        return BrilError(f"recursion too deep (more than {MAX_CALL_DEPTH} nested calls)")
    if isinstance(exc, TimeLimit):
        return BrilError("time limit exceeded")
    if isinstance(exc, MemoryError):
        return BrilError("out of memory")
    if isinstance(exc, OSError):
        return BrilError(f"cannot write the output: {exc.strerror or exc}")
    return BrilError(f"internal error: {type(exc).__name__}: {exc}")


class TimeLimit(Exception):
    """Raised inside a run that outlived its `timeout` (see `run`)."""


def _call_in_big_thread(fn, timeout=None):
    """Run fn() in a thread with a large C stack and a high recursion limit.

    With a `timeout` (seconds), a run still going after it is stopped by
    raising TimeLimit inside its thread (delivered at the next bytecode)."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:          # re-raised in the caller's thread
            result["error"] = e

    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size()
    try:
        sys.setrecursionlimit(MAX_CALL_DEPTH + 200)
        threading.stack_size(THREAD_STACK)
        # A daemon thread, so that Ctrl-C (delivered to the main thread) ends
        # the process even if the program loops forever.
        t = threading.Thread(target=target, name="bril-main", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            import ctypes
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident),
                                                       ctypes.py_object(TimeLimit))
            t.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def run(prog, argv=(), *, out=None, base_dir=None, lib_dirs=(), filename=None,
        recorder=None, jit=None, native_heap=False, timeout=None, check_facts=None):
    """Run @main of prog with string arguments; return the dynamic instruction count.

    With a `timeout` (seconds), a run that takes longer ends in a BrilError
    ("time limit exceeded"); `brili --trace` bounds its checking runs so.

    With `native_heap`, the heap lives in brilrt's region table, shared with
    native code (`bril.heap.NativeHeap`; statically typed programs only).

    With a `recorder` (a `bril.trace_record.Recorder`), the functions run in
    their recording variants, reporting function entries, basic blocks and
    returns to it (slower; used by `brili --trace`).

    With `check_facts` (default: the environment variable BRIL_CHECK_FACTS=1), the
    generated code asserts every range fact of `bril.typecheck` it relies on (no
    wrap-around where a test was dropped, the sign of `div` operands compiled to
    `//`, each int variable's inferred range at block entry); a violated one is a
    BrilError "internal error: range fact violated: ...".  Off, it costs nothing."""
    out = out if out is not None else sys.stdout
    compiled, main = compile_program(prog, out=out, base_dir=base_dir, lib_dirs=lib_dirs,
                                     filename=filename, native_heap=native_heap,
                                     check_facts=check_facts)
    mfunc = compiled.linked.functions[main]
    values = parse_main_args(mfunc.get("args") or [], list(argv))
    try:
        if recorder is not None:
            compiled.ns.update(_RE=recorder.enter, _RB=recorder.block, _RL=recorder.leave)
        if jit is not None:
            jit = jit.attach(compiled)      # None if the program is beyond native code
        compiled.prepare(main, record=recorder is not None, jit=jit is not None)
        if recorder is not None and not any(v is MISSING for v in values):
            fn = compiled.ns[compiled.codes[main].pyname + "__record"]
            call = lambda: fn(*values)       # noqa: E731
        elif any(v is MISSING for v in values):
            # Parameters of types the reference does not parse stay unset.
            entry = compiled.entry_function(main)
            names = [p["name"] for p in mfunc.get("args") or []]
            state = {n: v for n, v in zip(names, values) if v is not MISSING}
            call = lambda: entry(0, state)   # noqa: E731
        else:
            fn = compiled.ns[compiled.codes[main].pyname]
            call = lambda: fn(*values)       # noqa: E731
        try:
            _call_in_big_thread(call, timeout)
        except (KeyboardInterrupt, BrokenPipeError):
            raise                       # the command's business (exit quietly)
        except BaseException as e:
            raise _translate(e) from None
        if jit is not None:
            jit.finish()
        if compiled.heap.leaked():
            raise BrilError("Some memory locations have not been freed by end of execution.")
        return compiled.ns["_N"]
    finally:
        flush = getattr(out, "flush", None)
        if flush is not None:
            flush()


def run_recording(prog, argv, out, recorder):
    """Run prog reporting to `recorder` (see `run`); returns the dynamic count."""
    return run(prog, argv, out=out, recorder=recorder)


def run_capture(prog, argv=(), timeout=None):
    """(stdout text, dynamic instruction count); raises BrilError."""
    buf = io.StringIO()
    count = run(prog, argv, out=buf, timeout=timeout)
    return buf.getvalue(), count
