"""Native code through LLVM (llvmlite): optimisation, object files, executables,
and an in-process JIT with a compile cache.

    optimize(module, level)          -> llvmlite.binding.ModuleRef, verified and optimised
    emit_object(module, level)       -> bytes: an object file for this machine
    build_executable(module, out)    the object linked with the C run-time (brilrt.c)
    JIT(level).compile(module)       in-process machine code: {function name: address}
    runtime_library()                brilrt in this process (-DBRT_JIT), for JIT code

`module` is an `llvmlite.ir.Module` or LLVM IR text.  llvmlite is imported on
first use only, so importing this module costs nothing at `brili` start-up.

Notes for llvmlite 0.50 / LLVM 22: `llvm.initialize()` raises (only the native
target and asm printer are initialised); the legacy pass manager is gone, the
pipeline is the new pass manager's `default<O2>` built by `create_pass_builder`.
Each parse uses its own LLVM context, so modules can be compiled in several
threads at once (llvmlite releases the GIL in LLVM calls).

The system C compiler (`$CC`, else `cc`, `gcc` or `clang`) is used only to
compile the small run-time library once (cached by its source's hash) and to
link.
"""

import errno
import hashlib
import os
import sys
import tempfile
import threading

from ..ir.errors import BrilError


_init_lock = threading.Lock()
_llvm = None
_local = threading.local()


def binding():
    """llvmlite.binding, with the native target initialised (once)."""
    global _llvm
    if _llvm is None:
        with _init_lock:
            if _llvm is None:
                import llvmlite.binding as llvm
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                _llvm = llvm
    return _llvm


def target_machine(level=2, jit=False):
    """A TargetMachine for this host (one per thread, optimisation level and use)."""
    key = (level, jit)
    cache = getattr(_local, "machines", None)
    if cache is None:
        cache = _local.machines = {}
    tm = cache.get(key)
    if tm is None:
        llvm = binding()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=min(level, 3), reloc="default" if jit else "pic",
            codemodel="jitdefault" if jit else "default")
        cache[key] = tm
    return tm


def ir_text(module, tm=None):
    """IR text of a module, for this machine's triple and data layout."""
    if isinstance(module, str):
        return module
    tm = tm or target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    return str(module)


def optimize(module, level=2, tm=None, light=False):
    """Parse, verify and optimise (new pass manager, `default<O{level}>`; with
    `light`, only SROA, instcombine and simplifycfg: see `LIGHT_LOOP_DEPTH`)."""
    llvm = binding()
    tm = tm or target_machine(level)
    text = ir_text(module, tm)
    try:
        ref = llvm.parse_assembly(text, context=llvm.create_context())
        ref.verify()
    except RuntimeError as e:
        detail = " ".join(str(e).split()) or "invalid IR"
        raise BrilError(f"internal error: LLVM rejected the generated IR: {detail}") from None
    ref.triple = tm.triple
    ref.data_layout = str(tm.target_data)
    if level > 0 and light:
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_sroa_pass()
        mpm.add_instruction_combine_pass()
        mpm.add_simplify_cfg_pass()
        mpm.run(ref, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(0)))
    elif level > 0:
        bounded = _bounded_inlining(ref)
        pto = llvm.create_pipeline_tuning_options(speed_level=min(level, 3))
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
        if bounded:
            _drop_unused(ref, bounded, tm)
    return ref


# Programs with more functions than this are optimised with bounded inlining.
BOUNDED_FUNCTIONS = 64
# ... and with more than this, with none: inlining thousands of small callees into
# one caller makes LLVM's pipeline superlinear (24,000 functions called from @main:
# 47 s at -O2, 2.7x the time of 12,000).  Only generated programs are this large.
NOINLINE_FUNCTIONS = 4096

# A program with loops nested deeper than this is compiled with a light pipeline
# (`optimize(light=True)`) and the code generator's -O0: LLVM's loop passes and
# its optimising code generator take time quadratic in the nesting depth (a
# nest of 960 loops: 34 s in code generation alone, 0.1 s at -O0).  No program
# written by hand nests loops this deep.
LIGHT_LOOP_DEPTH = 32


def light_for(prog):
    """Does `prog` nest loops deeper than LIGHT_LOOP_DEPTH (then it is compiled light)?"""
    return deepest_loop_nest(prog) > LIGHT_LOOP_DEPTH


def deepest_loop_nest(prog):
    """The deepest nesting of loops in any function of the program (linear time)."""
    from ..analysis.cfg import CFG, LoopForest
    deepest = 0
    for func in prog.get("functions", ()):
        if not any(i.get("op") in ("jmp", "br") for i in func.get("instrs", ())):
            continue
        forest = LoopForest(CFG.from_function(func))
        depth = {}
        for h in forest.headers:                # outer loops first
            p = forest.parent.get(h)
            depth[h] = depth.get(p, 0) + 1 if p is not None else 1
            deepest = max(deepest, depth[h])
    return deepest


def _bounded_inlining(ref):
    """For a module of many functions, make its internal functions external (and
    hidden) for the optimiser: LLVM then inlines a call only by its cost, never
    for the bonus of a callee's last call site, which on a chain of functions each
    calling the next (a call stack n deep) inlines the whole chain into one
    function and re-simplifies it after each step: quadratic (a 1,000-function
    chain took 48 s at -O2, 1 s this way).  Returns the functions changed (to be
    made internal again after optimisation), or [] for a small module, which
    keeps the full pipeline unchanged."""
    internal = _internal_functions(ref)
    if len(internal) <= BOUNDED_FUNCTIONS:
        return []
    llvm = binding()
    no_inlining = len(internal) > NOINLINE_FUNCTIONS
    for f in internal:
        f.linkage = llvm.Linkage.external
        f.visibility = llvm.Visibility.hidden
        if no_inlining:
            f.add_function_attribute("noinline")
    return [f.name for f in internal]


def _internal_functions(ref):
    """The module's own functions (the program's; not the run time's)."""
    return [f for f in ref.functions if not f.is_declaration and f.linkage.name == "internal"]


def _drop_unused(ref, names, tm):
    """Make the functions internal again and delete those no call is left to
    (inlined everywhere), so the code generator does not compile them."""
    llvm = binding()
    for name in names:
        f = ref.get_function(name)
        f.visibility = llvm.Visibility.default
        f.linkage = llvm.Linkage.internal
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
    mpm.run(ref, pb)


def emit_object(module, level=2, light=False, quick=False):
    """An object file (bytes) for this machine (`light`: see `LIGHT_LOOP_DEPTH`;
    `quick`: the light pipeline, then the code generator at `level` -- a JIT's quick
    unit, `bril.backend.jitcache.QUICK`: a third to a half of -O2's time, code
    within 2x of -O2's where -O0's code generator made it 3-8x slower)."""
    ref = optimize(module, level, target_machine(level), light=light or quick)
    return target_machine(_codegen_level(ref, level, light)).emit_object(ref)


def _codegen_level(ref, level, light):
    """The code generator's level for an optimised module: -O0 (fast instruction
    selection and register allocation) for a light one and for one of more than
    NOINLINE_FUNCTIONS functions, where the optimising code generator's fixed cost
    per function dominates (6,000 small functions: 4.2 s at -O2, 0.4 s at -O0;
    the IR is optimised at `level` all the same)."""
    if light:
        return 0
    return 0 if len(_internal_functions(ref)) > NOINLINE_FUNCTIONS else level


def emit_llvm(module, level=2, light=False):
    """The IR text after optimisation at `level` (the input's text at level 0)."""
    if level == 0:
        return ir_text(module)
    return str(optimize(module, level, light=light))


# --- the C side: linking with the run-time library (bril.native_runtime.nativert) -----

from ..native_runtime.nativert import (c_compiler, on_path, run_tool, runtime_object,
                                       runtime_shared_object)


def link_executable(object_path, out_path):
    """Link an object file of a lowered program with the run-time library."""
    run_tool([c_compiler(), "-o", str(out_path), str(object_path), runtime_object(),
          "-lm", "-pthread"], "linking")


def build_executable(module, out_path, level=2, light=False):
    """Compile a lowered program (`bril.backend.llvm_lower`) to an executable at out_path
    (linked beside it under another name, then renamed: never half-written);
    BrilError `cannot write OUT_PATH: reason` if it cannot be written there."""
    given = out_path
    out_path = os.path.abspath(out_path)
    linked = os.path.join(os.path.dirname(out_path),
                          f".{os.path.basename(out_path)}.{os.getpid()}.tmp")
    try:
        # (the place is tried first: the linker would fail only after LLVM's work, in
        # a message naming the temporary file, and a rename onto a folder in none)
        if os.path.isdir(out_path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        os.close(os.open(linked, os.O_WRONLY | os.O_CREAT, 0o700))
    except OSError as e:
        raise BrilError(f"cannot write {given}: {e.strerror}") from None
    tmp = None
    try:
        obj = emit_object(module, level, light=light)
        runtime_object()
        fd, tmp = tempfile.mkstemp(suffix=".o")
        with os.fdopen(fd, "wb") as fh:
            fh.write(obj)
        link_executable(tmp, linked)
        try:
            os.replace(linked, out_path)
        except OSError as e:
            raise BrilError(f"cannot write {given}: {e.strerror}") from None
    finally:
        if tmp is not None:
            os.unlink(tmp)
        if os.path.exists(linked):
            os.unlink(linked)


# --- in-process compilation (for the tracing JIT) -----------------------------------------------

_LIVE_JITS = []


def compile_object(module, level=2):
    """Optimised machine code for a module (IR text or llvmlite module), as object
    file bytes for `JIT.add_object`.  Touches no engine, only a TargetMachine of
    the calling thread's own, so any thread may call it (the JIT's background
    compiler does; ctypes releases the GIL meanwhile)."""
    ref = optimize(module, level, target_machine(level, jit=True))
    return target_machine(_codegen_level(ref, level, False), jit=True).emit_object(ref)


class JIT:
    """MCJIT in this process.  `compile(module)` returns {function name: address}
    for the module's externally visible functions; compiling the same IR text
    twice returns the cached addresses (the code stays alive as long as the
    JIT).  Machine code calls back into Python only through addresses given to
    `add_symbol`, whose ctypes callbacks are kept alive in `self.callbacks`."""

    def __init__(self, level=2):
        llvm = binding()
        llvm.load_library_permanently(runtime_shared_object())
        self.level = level
        self.tm = target_machine(level, jit=True)
        backing = llvm.parse_assembly("", context=llvm.create_context())
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        # The engine owns the modules, but each module's LLVM context lives only
        # as long as its Python ModuleRef: keep them all.
        self.modules = [backing]
        self.cache = {}
        self.objects = []
        self.callbacks = []
        self._lock = threading.Lock()
        # Never destroyed: tearing an MCJIT engine down while (or after) its modules'
        # contexts go away crashes the process, and machine code handed out as
        # addresses must stay valid anyway.
        _LIVE_JITS.append(self)

    def add_symbol(self, name, address, keep=None):
        """Make `name` resolve to `address` in code compiled later; `keep` (e.g. the
        ctypes callback object behind the address) is kept alive with the JIT."""
        binding().add_symbol(name, address)
        if keep is not None:
            self.callbacks.append(keep)

    def add_object(self, data, names):
        """Load machine code made by `compile_object` (its symbols may refer to
        functions of code loaded before); {name: address} for `names`."""
        llvm = binding()
        with self._lock:
            obj = llvm.ObjectFileRef.from_data(data)
            self.engine.add_object_file(obj)
            self.objects.append(obj)
            self.engine.finalize_object()
            return {n: self.engine.get_function_address(n) for n in names}

    def compile(self, module):
        text = ir_text(module, self.tm)
        key = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            found = self.cache.get(key)
            if found is not None:
                return found
            ref = optimize(text, self.level, self.tm)
            names = [f.name for f in ref.functions if not f.is_declaration
                     and f.linkage.name not in ("internal", "private")]
            self.engine.add_module(ref)
            self.modules.append(ref)
            self.engine.finalize_object()
            addresses = {n: self.engine.get_function_address(n) for n in names}
            self.cache[key] = addresses
            return addresses


# --- compiled code as shared objects (kept in the code cache across runs) -------------------

_UNIT_LINK_FLAGS = ["-shared", "-Wl,-Bsymbolic"]


def _unit_linker():
    """The system linker, where the C compiler is the system's own on Linux (no $CC):
    a unit needs no C start-up files, and `cc -shared` spends 17 ms starting its
    driver around the 4.5 ms of `ld`'s work (the JIT's units are on a first run's
    path: asked for, compiled, then used); else None."""
    if sys.platform.startswith("linux") and not os.environ.get("CC") and on_path("ld"):
        return "ld"
    return None


def build_shared_object(module, level=2, quick=False):
    """A shared object (bytes) of a lowered module: position-independent machine
    code linked by the system linker or the C compiler, its brt_* references left
    to the run-time library already loaded in the process (`runtime_library`).
    `quick`: a JIT's quick unit (see `emit_object`)."""
    cc = c_compiler()
    if cc is None:
        raise BrilError("no C compiler found (install cc or set CC)")
    obj = tempfile.NamedTemporaryFile(suffix=".o", delete=False)
    out = obj.name[:-2] + ".so"
    try:
        with obj:
            obj.write(emit_object(module, level, quick=quick))
        ld, linked = _unit_linker(), False
        if ld is not None:
            try:
                # (no -lm: a unit calls no libm function, and the run-time library,
                # loaded globally, links it; reading libm's linker script was 5-7 ms
                # of the 11 ms link, on a first run's path)
                run_tool([ld, "-shared", "-Bsymbolic", "-o", out, obj.name], "linking")
                linked = True
            except BrilError:
                pass                # (the C compiler's driver may know better)
        if not linked:
            run_tool([cc, *_UNIT_LINK_FLAGS, "-o", out, obj.name, "-lm"], "linking compiled code")
        with open(out, "rb") as fh:
            return fh.read()
    finally:
        for path in (obj.name, out):
            try:
                os.unlink(path)
            except OSError:
                pass
