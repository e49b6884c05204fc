"""The native run-time library in this process, and shared objects of compiled code.

What running native code needs -- brilrt loaded (`runtime_library`), a
compiled unit loaded from the code cache (`load_unit`), the digest its cache
key starts from (`native_digest`) -- without importing llvmlite, subprocess
or tempfile: a run whose native code is all in the code cache starts at once.
Building (compiling brilrt with the C compiler, LLVM) imports what it needs
when it happens.
"""

import os

from ..ir.errors import BrilError
# (what native code depends on, and the C compiler: `bril.warm_start`'s, on a warm
# run's path)
from ..warm_start import c_compiler, native_digest, native_sources, on_path  # noqa: F401

RUNTIME_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "brilrt.c")


def run_tool(argv, what):
    import subprocess
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise BrilError(f"cannot run {argv[0]}: {e.strerror}") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[:300]
        raise BrilError(f"{what} failed: {detail}")


def _built(kind, flags, suffix, build=True):
    """A build of brilrt.c with these compiler flags: its path, from the code cache
    (made there on first use), or in a private temporary folder when there is no
    usable cache.  The key: the source and the messages as the file system
    describes them (`source_digest`: reading brilrt.c and generating the messages'
    header for it took a run that loads the library 1-1.5 ms), $CC and the flags
    (not which compiler `cc` finds: any builds the same library, and looking one
    up on the PATH costs every run that finds the build in the cache)."""
    from ..cache.codecache import CodeCache, hasher, source_digest
    from ..ir import messages
    key = hasher(source_digest(b"brilrt-2", [RUNTIME_SOURCE, os.path.abspath(messages.__file__)])
                 + os.environ.get("CC", "").encode() + b"\0"
                 + " ".join(flags).encode()).hexdigest()
    cache = CodeCache()
    path = cache.entry_path(kind, key)
    if path is not None or not build:
        return path
    header = messages.c_header()
    cc = c_compiler()
    if cc is None:
        raise BrilError("no C compiler found (install cc or set CC)")
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="bril-runtime-")
    out = os.path.join(folder, "brilrt" + suffix)
    try:
        with open(os.path.join(folder, "brilrt_messages.h"), "w") as fh:
            fh.write(header)            # the runtime's messages (bril.ir.messages)
        run_tool([cc, *flags, "-I", folder, "-o", out, RUNTIME_SOURCE,
                  *(["-lm"] if suffix == ".so" else [])], "compiling the run-time library")
        with open(out, "rb") as fh:
            data = fh.read()
        if cache.put(kind, key, data):
            path = cache.entry_path(kind, key)
            if path is not None:
                shutil.rmtree(folder, ignore_errors=True)
                return path
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # No cache: the build is used from the folder until this process ends (a
    # loaded library may be unlinked, an object is still to be linked).
    import atexit
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return out


_runtime_paths = {}


def runtime_object():
    """Path of brilrt.o (for executables), compiled once per source and compiler."""
    if "o" not in _runtime_paths:
        _runtime_paths["o"] = _built("runtime", ["-O2", "-c"], ".o")
    return _runtime_paths["o"]


_JIT_RUNTIME_FLAGS = ["-O2", "-shared", "-fPIC", "-DBRT_JIT"]


def runtime_shared_object(build=True):
    """Path of the in-process build of brilrt (`-DBRT_JIT`: output to a buffer, errors
    jump back to `brt_jit_call`), compiled once per source and compiler; without
    `build`, None unless it is in the code cache already."""
    if "so" not in _runtime_paths:
        path = _built("runtime", _JIT_RUNTIME_FLAGS, ".so", build)
        if path is None:
            return None
        _runtime_paths["so"] = path
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
    `take_output()`.  `call` syncs the current `bril.interpreter.heap.NativeHeap` (drops
    its views of regions native code freed); code that runs native code any
    other way must call `NativeHeap.sync()` before Python touches the heap again.
    The heap, counters and buffer are global to the process (one program at a
    time; a new NativeHeap resets them)."""

    def __init__(self, path):
        from . import ffi
        self.path = path
        self.ffi = ffi
        # Global: shared objects of compiled code resolve brt_* against it (and MCJIT,
        # see JIT, once llvmlite is loaded: not before, a cached unit needs none).
        self.handle = ffi.dlopen(path, ffi.RTLD_GLOBAL)
        i64, vp = ffi.c_int64, ffi.c_void_p
        lib = self.lib = _Functions()
        for name, restype, argtypes in (
                ("brt_jit_call", i64, (vp, vp)),
                ("brt_error_message", ffi.c_char_p, ()),
                ("brt_out_take", vp, (vp,)),
                ("brt_py_alloc", i64, (i64, i64, vp)),
                ("brt_py_free", i64, (i64, i64)),
                ("brt_live_regions", i64, ()),
                ("brt_region_count", i64, ()),
                ("brt_heap_reset", None, ())):
            setattr(lib, name, ffi.function(self.address_of(name), restype, *argtypes))
        self._call = lib.brt_jit_call
        self._take = lib.brt_out_take
        self._out_len = ffi.c_size_t()
        self._out_len_ref = ffi.byref(self._out_len)
        self._pending = self.variable("brt_out_len", ffi.c_size_t)
        self._dyn = self.variable("brt_dyn_count", i64)
        self._depth = self.variable("brt_depth", i64)
        self.heap_owner = None      # the NativeHeap using the region table (bril.interpreter.heap)

    def address_of(self, name):
        return self.ffi.symbol(self.handle, name)

    def variable(self, name, ctype):
        """The C variable `name` of the library, as a `ctype` (read and write .value)."""
        return ctype.from_address(self.address_of(name))

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

    def _taken(self):
        """The bytes native code printed since the last call (and the buffer emptied)."""
        if not self._pending.value:
            return b""
        p = self._take(self._out_len_ref)
        n = self._out_len.value
        return self.ffi.string_at(p, n) if n else b""

    def take_output(self):
        """The output printed by native code since the last call, as text."""
        return self._taken().decode("utf-8", "surrogatepass")

    def write_output(self, write, stream=None):
        """Hand the output printed by native code since the last call on: to
        `stream`'s binary buffer as it is, when `stream` is a UTF-8 text stream
        (`write` is its `write`: a program's print of megabytes is not decoded
        and encoded again), else to `write` as text.  Output with a byte 0xED
        (which may begin an encoded lone surrogate, which the text stream's
        error handler replaces) goes as text."""
        data = self._taken()
        if not data:
            return
        buffer = getattr(stream, "buffer", None)
        if buffer is not None and b"\xed" not in data and getattr(stream, "write", None) == write \
                and (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8":
            stream.flush()          # (what was printed before this, in order)
            buffer.write(data)
        else:
            write(data.decode("utf-8", "surrogatepass"))

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


class _Functions:
    """The run-time library's functions Python calls, by name."""


_runtime_library = None
_RUNTIME_LOCK = None


def runtime_library(build=True):
    """The process's RuntimeLibrary (built and loaded on first use); without `build`,
    None unless it is built already (in the code cache)."""
    global _runtime_library
    if _runtime_library is None:
        global _RUNTIME_LOCK
        if _RUNTIME_LOCK is None:
            import _thread
            _RUNTIME_LOCK = _thread.allocate_lock()
        path = runtime_shared_object(build)
        if path is None:
            return None
        with _RUNTIME_LOCK:
            if _runtime_library is None:
                _runtime_library = RuntimeLibrary(path)
    return _runtime_library


def load_unit(path):
    """The handle of a shared object of compiled code, loaded (its own symbols kept
    to itself; its brt_* references resolve against the run-time library)."""
    from . import ffi
    runtime_library()
    return ffi.dlopen(path, ffi.RTLD_LOCAL)


def symbol_address(handle, name):
    from . import ffi
    return ffi.symbol(handle, name)


if __name__ == "__main__":
    # The run-time library object, for linking `brilc -c` output by hand.
    print(runtime_object())
