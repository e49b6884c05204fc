"""Native code through LLVM (llvmlite): optimisation, object files, executables,
and an in-process JIT with a compile cache.

    optimize(module, level)          -> llvmlite.binding.ModuleRef, verified and optimised
    emit_object(module, level)       -> bytes: an object file for this machine
    build_executable(module, out)    the object linked with the C run-time (brilrt.c)
    JIT(level).compile(module)       in-process machine code: {function name: address}

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

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .errors import BrilError

RUNTIME_SOURCE = Path(__file__).resolve().parent / "runtime" / "brilrt.c"

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


def optimize(module, level=2, tm=None):
    """Parse, verify and optimise (new pass manager, `default<O{level}>`)."""
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
    if level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=min(level, 3))
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
    return ref


def emit_object(module, level=2):
    """An object file (bytes) for this machine."""
    tm = target_machine(level)
    return tm.emit_object(optimize(module, level, tm))


def emit_llvm(module, level=2):
    """The IR text after optimisation at `level` (the input's text at level 0)."""
    if level == 0:
        return ir_text(module)
    return str(optimize(module, level))


# --- the C side: run-time library and linking -----------------------------------------------

def c_compiler():
    """The C compiler command, or None if there is none."""
    cc = os.environ.get("CC")
    if cc:
        return cc
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    return None


def _cache_dir():
    base = os.environ.get("BRIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bril-speculate")
    try:
        os.makedirs(base, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    fallback = os.path.join(tempfile.gettempdir(), f"bril-speculate-{os.getuid()}")
    os.makedirs(fallback, exist_ok=True)
    return fallback


def _run(argv, what):
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise BrilError(f"cannot run {argv[0]}: {e.strerror}") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[:300]
        raise BrilError(f"{what} failed: {detail}")


_runtime_lock = threading.Lock()


def runtime_object():
    """Path of brilrt.o, compiled once per runtime source and compiler (cached on disk)."""
    cc = c_compiler()
    if cc is None:
        raise BrilError("no C compiler found (install cc or set CC)")
    source = RUNTIME_SOURCE.read_bytes()
    key = hashlib.sha256(source + b"\0" + cc.encode()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"brilrt-{key}.o")
    with _runtime_lock:
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            _run([cc, "-O2", "-c", "-o", tmp, str(RUNTIME_SOURCE)],
                 "compiling the run-time library")
            os.replace(tmp, path)
    return path


def link_executable(object_path, out_path):
    """Link an object file of a lowered program with the run-time library."""
    _run([c_compiler(), "-o", str(out_path), str(object_path), runtime_object(),
          "-lm", "-pthread"], "linking")


def build_executable(module, out_path, level=2):
    """Compile a lowered program (`bril.llvm_lower`) to an executable at out_path."""
    obj = emit_object(module, level)
    runtime_object()
    fd, tmp = tempfile.mkstemp(suffix=".o")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(obj)
        link_executable(tmp, out_path)
    finally:
        os.unlink(tmp)


# --- in-process compilation (for the tracing JIT) -----------------------------------------------

class JIT:
    """MCJIT in this process.  `compile(module)` returns {function name: address}
    for the module's externally visible functions; compiling the same IR text
    twice returns the cached addresses (the code stays alive as long as the
    JIT).  Machine code calls back into Python only through addresses given to
    `add_symbol`, whose ctypes callbacks are kept alive in `self.callbacks`."""

    def __init__(self, level=2):
        llvm = binding()
        self.level = level
        self.tm = target_machine(level, jit=True)
        backing = llvm.parse_assembly("", context=llvm.create_context())
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        # The engine owns the modules, but each module's LLVM context lives only
        # as long as its Python ModuleRef: keep them all.
        self.modules = [backing]
        self.cache = {}
        self.callbacks = []
        self._lock = threading.Lock()

    def add_symbol(self, name, address, keep=None):
        """Make `name` resolve to `address` in code compiled later; `keep` (e.g. the
        ctypes callback object behind the address) is kept alive with the JIT."""
        binding().add_symbol(name, address)
        if keep is not None:
            self.callbacks.append(keep)

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
