"""The native run-time library in this process, and shared objects of compiled code.

What running native code needs -- brilrt loaded (`runtime_library`), a
compiled unit loaded from the code cache (`load_unit`), the digest its cache
key starts from (`native_digest`) -- without importing llvmlite, subprocess
or tempfile: a run whose native code is all in the code cache starts at once.
Building (compiling brilrt with the C compiler, LLVM) imports what it needs
when it happens.
"""

import os

from .errors import BrilError

RUNTIME_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime", "brilrt.c")


def c_compiler():
    """The C compiler command, or None if there is none."""
    cc = os.environ.get("CC")
    if cc:
        return cc
    for name in ("cc", "gcc", "clang"):
        if _on_path(name):
            return name
    return None


def _on_path(name):
    """Is there an executable `name` on $PATH?  (What `shutil.which` answers, but
    importing shutil costs a run that loads cached native code more than this.)"""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


def run_tool(argv, what):
    import subprocess
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise BrilError(f"cannot run {argv[0]}: {e.strerror}") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[:300]
        raise BrilError(f"{what} failed: {detail}")


def _runtime_source():
    with open(RUNTIME_SOURCE, "rb") as fh:
        return fh.read()


def _built(kind, flags, suffix):
    """A build of brilrt.c with these compiler flags: its path, from the code cache
    (made there on first use), or in a private temporary folder when there is no
    usable cache.  The key: the source, the messages, $CC and the flags (not which
    compiler `cc` finds: any builds the same library, and looking one up on the
    PATH costs every run that finds the build in the cache)."""
    from .codecache import CodeCache, sha256
    from .messages import c_header
    header = c_header()
    key = sha256(_runtime_source() + b"\0" + header.encode() + b"\0"
                 + os.environ.get("CC", "").encode() + b"\0"
                 + " ".join(flags).encode()).hexdigest()
    cache = CodeCache()
    path = cache.entry_path(kind, key)
    if path is not None:
        return path
    cc = c_compiler()
    if cc is None:
        raise BrilError("no C compiler found (install cc or set CC)")
    import tempfile
    folder = tempfile.mkdtemp(prefix="bril-runtime-")
    out = os.path.join(folder, "brilrt" + suffix)
    with open(os.path.join(folder, "brilrt_messages.h"), "w") as fh:
        fh.write(header)                # the runtime's messages (bril.messages)
    run_tool([cc, *flags, "-I", folder, "-o", out, RUNTIME_SOURCE,
              *(["-lm"] if suffix == ".so" else [])], "compiling the run-time library")
    with open(out, "rb") as fh:
        data = fh.read()
    if cache.put(kind, key, data):
        path = cache.entry_path(kind, key)
        if path is not None:
            return path
    return out


_runtime_paths = {}


def runtime_object():
    """Path of brilrt.o (for executables), compiled once per source and compiler."""
    if "o" not in _runtime_paths:
        _runtime_paths["o"] = _built("runtime", ["-O2", "-c"], ".o")
    return _runtime_paths["o"]


_JIT_RUNTIME_FLAGS = ["-O2", "-shared", "-fPIC", "-DBRT_JIT"]


def runtime_shared_object():
    """Path of the in-process build of brilrt (`-DBRT_JIT`: output to a buffer, errors
    jump back to `brt_jit_call`), compiled once per source and compiler."""
    if "so" not in _runtime_paths:
        _runtime_paths["so"] = _built("runtime", _JIT_RUNTIME_FLAGS, ".so")
    return _runtime_paths["so"]


class RuntimeLibrary:
    """brilrt loaded in this process (once: `runtime_library()`), its symbols visible
    to code compiled by `JIT` (brt_print_*, brt_alloc, brt_regions, ...).

        call(address, slots, out=None) -> int   run `int64_t fn(int64_t *slots)`;
                                                 BrilError(message) if it fails
        take_output() -> str                    what native code printed since last time
        dyn_count, depth                         brt_dyn_count, brt_depth (read/write)
        address_of(name) -> int                  a symbol's address

    Native code's output collects in a buffer: `call(..., out=f)` writes it to f
    after the call (also when it fails, before raising); otherwise drain it with
    `take_output()`.  `call` syncs the current `bril.heap.NativeHeap` (drops
    its views of regions native code freed); code that runs native code any
    other way must call `NativeHeap.sync()` before Python touches the heap again.
    The heap, counters and buffer are global to the process (one program at a
    time; a new NativeHeap resets them)."""

    def __init__(self, path):
        import ctypes
        self.path = path
        self.ctypes = ctypes
        # Global: shared objects of compiled code resolve brt_* against it (and MCJIT,
        # see JIT, once llvmlite is loaded: not before, a cached unit needs none).
        lib = self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        lib.brt_jit_call.argtypes = (vp, vp)
        lib.brt_jit_call.restype = i64
        lib.brt_error_message.argtypes = ()
        lib.brt_error_message.restype = ctypes.c_char_p
        lib.brt_out_take.argtypes = (ctypes.POINTER(ctypes.c_size_t),)
        lib.brt_out_take.restype = vp
        lib.brt_py_alloc.argtypes = (i64, i64, vp)
        lib.brt_py_alloc.restype = i64
        lib.brt_py_free.argtypes = (i64, i64)
        lib.brt_py_free.restype = i64
        for name in ("brt_live_regions", "brt_region_count"):
            getattr(lib, name).argtypes = ()
            getattr(lib, name).restype = i64
        lib.brt_heap_reset.argtypes = ()
        lib.brt_heap_reset.restype = None
        self._call = lib.brt_jit_call
        self._take = lib.brt_out_take
        self._out_len = ctypes.c_size_t()
        self._out_len_ref = ctypes.byref(self._out_len)
        self._pending = ctypes.c_size_t.in_dll(lib, "brt_out_len")
        self._dyn = i64.in_dll(lib, "brt_dyn_count")
        self._depth = i64.in_dll(lib, "brt_depth")
        self.heap_owner = None      # the NativeHeap using the region table (bril.heap)

    def address_of(self, name):
        return self.ctypes.cast(getattr(self.lib, name), self.ctypes.c_void_p).value

    def error_message(self):
        return (self.lib.brt_error_message() or b"").decode("utf-8", "replace")

    def call(self, address, slots, out=None):
        """`int64_t fn(int64_t *slots)` at address, through the trampoline: its result,
        or BrilError with the run-time error's message (what brilc prints after
        `error: `).  With `out`, the output printed meanwhile is written to it.
        The current NativeHeap (if any) is synced afterwards (freed regions dropped)."""
        r = self._call(address, slots)
        heap = self.heap_owner
        if heap is not None:
            heap.sync()
        if out is not None:
            text = self.take_output()
            if text:
                out.write(text)
        if r == -1:
            msg = self.lib.brt_error_message()
            if msg:
                raise BrilError(msg.decode("utf-8", "replace"))
        return r

    def take_output(self):
        """The output printed by native code since the last call, as text."""
        if not self._pending.value:
            return ""
        p = self._take(self._out_len_ref)
        n = self._out_len.value
        if not n:
            return ""
        return self.ctypes.string_at(p, n).decode("utf-8", "surrogatepass")

    @property
    def dyn_count(self):
        return self._dyn.value

    @dyn_count.setter
    def dyn_count(self, value):
        self._dyn.value = value

    @property
    def depth(self):
        return self._depth.value

    @depth.setter
    def depth(self, value):
        self._depth.value = value


_runtime_library = None
_RUNTIME_LOCK = None


def runtime_library():
    """The process's RuntimeLibrary (built and loaded on first use)."""
    global _runtime_library
    if _runtime_library is None:
        global _RUNTIME_LOCK
        if _RUNTIME_LOCK is None:
            import _thread
            _RUNTIME_LOCK = _thread.allocate_lock()
        path = runtime_shared_object()
        with _RUNTIME_LOCK:
            if _runtime_library is None:
                _runtime_library = RuntimeLibrary(path)
    return _runtime_library


def load_unit(path):
    """A shared object of compiled code, loaded (its own symbols kept to itself; its
    brt_* references resolve against the run-time library)."""
    import ctypes
    runtime_library()
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)


def symbol_address(lib, name):
    import ctypes
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


_native_digest = None


def native_digest(level):
    """What machine code depends on besides the program, hashed without importing
    llvmlite: our lowering and run-time library sources, llvmlite's version (it
    ships its LLVM), the optimisation level, the C compiler, and this machine
    (architecture, CPU model and features as the kernel reports them)."""
    global _native_digest
    from .codecache import sha256, source_digest
    if _native_digest is None:
        here = os.path.dirname(os.path.abspath(__file__))
        h = sha256(b"bril-native-2")
        # (what shapes machine code and a unit's data; not bril.jit, which only
        # decides what to compile and how to call it)
        h.update(source_digest(b"sources", [os.path.join(here, name) for name in (
            "llvm_lower.py", "jit_lower.py", "jitcache.py", "resume.py", "native.py",
            "nativert.py", "ops.py", "heap.py", os.path.join("runtime", "brilrt.c"))]))
        h.update(_llvmlite_version().encode())
        h.update((c_compiler() or "").encode())
        h.update(_host_identity().encode())
        _native_digest = h.digest()
    return sha256(_native_digest + b"level %d" % level).digest()


def _llvmlite_version():
    import sys
    # The folder import would take llvmlite from: the first entry of sys.path that
    # has it (a look at a few folders; importlib.util.find_spec, the fallback for
    # unusual installs, costs a run that finds its code in the cache ~9 ms).
    for entry in sys.path:
        version = os.path.join(entry or os.curdir, "llvmlite", "_version.py")
        if os.path.isfile(version) and os.path.isfile(
                os.path.join(entry or os.curdir, "llvmlite", "__init__.py")):
            with open(version) as fh:
                return fh.read()
    import importlib.util
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.origin:
        return "none"
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py")) as fh:
            return fh.read()
    except OSError:
        return spec.origin


def _host_identity():
    parts = [os.uname().machine, os.uname().sysname]
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part"):
                    parts.append(line.strip())
                elif not line.strip() and len(parts) > 2:
                    break           # the first processor tells
    except OSError:
        pass
    return "\n".join(parts)


if __name__ == "__main__":
    # The run-time library object, for linking `brilc -c` output by hand.
    print(runtime_object())

