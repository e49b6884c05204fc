"""What a warm run reads: `brili` becoming its program's executable, before anything else.

A program `brili` ran long enough before is kept compiled whole in the code cache
(`bril.backend.program_exe` builds it).  A later `brili` of the same bytes reads
them, hashes them, finds the executable built by today's compiler and executes it
in its own place (`bril.cli.brili_start`).  Such a run is Python's start-up and
little more: a run of a program the reference interprets in 0.2-2 s lasts 14-16
ms, and each module it imported would cost it 0.3-0.5 ms more.  So the facts that
path reads are here, in one module of the standard library alone, the bottom of
the library's stages, and the modules that own the rest take them from here:

- where the code cache is, whether it may be used, and its entries' format and
  check (`bril.cache.codecache` writes, evicts and counts them);
- what native code depends on besides the program (`native_digest`: the JIT's
  units and the executables are keyed on it);
- the executable's key, its stamp, and how it is executed;
- what `BRIL_JIT_PRECOMPILE` asks of the builds a run leaves (a warm run too
  waits for them when asked);
- how a command reads its program's bytes.
"""

import os

# --- the code cache: where, and its entries ---------------------------------------------

MAGIC = b"\nBRILCC3"
DIGEST_SIZE = 32
TOUCH_INTERVAL = 60.0           # seconds; a hit refreshes an older entry's time


def default_directory():
    d = os.environ.get("BRIL_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bril-speculate")


def enabled_by_environment():
    return os.environ.get("BRIL_CACHE", "1") not in ("0", "no", "off", "false")


def directory_usable(directory):
    """Does the cache's directory exist (made if need be) private to us and writable?
    (Loading an entry runs its code: a directory others can write to is never used.)"""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.stat(directory)
        return st.st_uid == os.getuid() and not st.st_mode & 0o022 \
            and os.access(directory, os.R_OK | os.W_OK | os.X_OK)
    except (OSError, AttributeError):
        return False


def hasher(data=b""):
    """The code cache's hash (its keys and its entries' checksums): BLAKE2b with a
    32-byte digest, from the builtin module (`hashlib` loads OpenSSL, a few ms of
    start-up); three times faster here than the builtin SHA-256, and a warm run
    hashes our sources, the run-time library's and every entry it reads."""
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    return blake2b(data, digest_size=DIGEST_SIZE)


def source_digest(salt, paths):
    """The digest of our own source files for the cache keys, as the file system
    describes them: path, size, modification time (stats, not reads: hashing the
    generator's 220 KB cost every run that used the cache 0.6 ms, their stats 0.06 ms;
    an edited file has a new size or time).  OSError if one is missing."""
    h = hasher(salt)
    for path in paths:
        st = os.stat(path)
        h.update(repr((path, st.st_size, st.st_mtime_ns)).encode())
    return h.digest()


def entry_file(directory, kind, key):
    """Where the entry (kind, key) of the cache in `directory` is kept."""
    return os.path.join(directory, kind, key[:2], key)


def sealed(payload):
    """An entry's bytes: the payload, then its checksum and the magic word (the check
    trails the payload, so that a shared object or an executable stored as an entry
    is still one)."""
    return payload + hasher(payload).digest() + MAGIC


def verified(data):
    """The payload of an entry's bytes, or None if they are not a whole, intact entry."""
    tail = len(MAGIC) + DIGEST_SIZE
    if len(data) < tail or data[-len(MAGIC):] != MAGIC:
        return None
    payload = data[:-tail]
    if hasher(payload).digest() != data[-tail:-len(MAGIC)]:
        return None
    return payload


def read_entry(path):
    """The verified payload of the entry file at `path`, or None: a missing entry, or
    a truncated or corrupt one, which is removed (never used)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    payload = verified(data)
    if payload is None:
        try:
            os.unlink(path)
        except OSError:
            pass
    return payload


def touch(path):
    """Mark an entry as recently used (its modification time), at most once a minute:
    the cache evicts the least recently used."""
    try:
        import time
        now = time.time()
        if now - os.stat(path).st_mtime > TOUCH_INTERVAL:
            os.utime(path, (now, now))
    except OSError:
        pass


# --- what native code depends on --------------------------------------------------------

# What shapes machine code and a unit's data (paths in the bril package); not
# bril.backend.jit, which only decides what to compile and how to call it.
NATIVE_SOURCES = (
    "backend/llvm_lower.py", "backend/jit_lower.py", "backend/jitcache.py",
    "native_runtime/resume.py", "backend/native.py", "native_runtime/nativert.py",
    "ir/ops.py", "interpreter/heap.py", "ir/tracelabels.py",
    "analysis/typecheck.py", "analysis/blocks.py", "ir/values.py", "ir/support.py",
    "native_runtime/brilrt.c")
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_native_digest = None


def native_sources():
    """The paths of NATIVE_SOURCES (the real modules' files: never an alias's at an
    old path)."""
    return [os.path.join(_PACKAGE, *name.split("/")) for name in NATIVE_SOURCES]


def native_digest(level):
    """What machine code depends on besides the program, hashed without importing
    llvmlite: our lowering and run-time library sources (`source_digest`: as the
    file system describes them), llvmlite's version (it ships its LLVM), the
    optimisation level, the C compiler, and this machine (architecture, CPU model
    and features as the kernel reports them).  OSError if a source is missing."""
    global _native_digest
    if _native_digest is None:
        h = hasher(b"bril-native-3")
        h.update(source_digest(b"sources", native_sources()))
        h.update(_llvmlite_version().encode())
        h.update((c_compiler() or "").encode())
        h.update(_host_identity().encode())
        _native_digest = h.digest()
    return hasher(_native_digest + b"level %d" % level).digest()


def c_compiler():
    """The C compiler command, or None if there is none."""
    cc = os.environ.get("CC")
    if cc:
        return cc
    for name in ("cc", "gcc", "clang"):
        if on_path(name):
            return name
    return None


def on_path(name):
    """Is there an executable `name` on $PATH?  (What `shutil.which` answers, but
    importing shutil costs a run that loads cached native code more than this.)"""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


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


# --- the program's executable -----------------------------------------------------------

EXE_KIND = "exe"
EXE_STAMP_KIND = "exestamp"     # (beside it: `exe_stamp()` of the compiler that built it)
EXE_LEVEL = 2
# Larger programs keep to the JIT's units: compiling one whole takes seconds.
EXE_MAX_INSTRS = 20_000
# Bytes of program text beyond which it is taken to have more than EXE_MAX_INSTRS
# instructions, unread: its executable is neither looked for nor built (hashing a
# 26 MB, 400,000-instruction program's text took 42 ms of every run of it).  Our
# programs average 40-70 bytes an instruction as JSON; this allows 400.
EXE_MAX_BYTES = EXE_MAX_INSTRS * 400
# Bytes beyond which the instructions are counted before the bytes are hashed, this
# many at a time (a count costs a third of a hash; below this, a hash costs under 2 ms).
EXE_COUNT_BYTES = EXE_MAX_INSTRS * 60


def too_big(data, as_text):
    """Does a program read as `data` (bytes; Bril text if `as_text`, else JSON) have
    more than EXE_MAX_INSTRS instructions, judged before parsing?  Every instruction
    has an `"op"` key in JSON and ends with `;` in text; a string holding either is
    counted too, so that a program is never taken for a smaller one (a 6.5 MB,
    100,000-instruction JSON program: decided in its first 1.2 MB, in 1 ms, where
    its hash took 10-16 ms)."""
    if len(data) > EXE_MAX_BYTES:
        return True
    if len(data) <= EXE_COUNT_BYTES:
        return False
    mark = b";" if as_text else b'"op"'
    count = 0
    for start in range(0, len(data), EXE_COUNT_BYTES):     # (most are decided by a chunk)
        count += data.count(mark, start, start + EXE_COUNT_BYTES + len(mark) - 1)
        if count > EXE_MAX_INSTRS:
            return True
    return False


def exe_key(data, as_text):
    """The key of the executable of a program read as `data` (bytes; Bril text if
    `as_text`, else JSON): a hash of the bytes alone, so that looking for it costs
    a run without one nothing more (the compiler it was built by is checked only
    when there is one: `exe_stamp`)."""
    h = hasher(b"bril-exe-1 text\0" if as_text else b"bril-exe-1 json\0")
    h.update(data)
    return h.hexdigest()


def exe_stamp():
    """What an executable's machine code depends on besides the program, cheaply
    (stats, not reads: this is on the path of every warm run): `native_digest` at
    the level, and the modules that build and find executables."""
    try:
        return hasher(b"bril-exe-2" + native_digest(EXE_LEVEL) + source_digest(b"", [
            os.path.join(_PACKAGE, "backend", "program_exe.py"),
            os.path.abspath(__file__)])).digest()
    except OSError:
        return None


def find_executable(directory, key):
    """The path of the executable stored under `key` in the cache in `directory` if
    it was built by today's compiler and is intact, else None."""
    stamp_path = entry_file(directory, EXE_STAMP_KIND, key)
    if not os.path.exists(stamp_path) or not directory_usable(directory):
        return None             # (the common miss: one stat)
    built_by = read_entry(stamp_path)
    if built_by is None or built_by != exe_stamp():
        return None
    path = entry_file(directory, EXE_KIND, key)
    if read_entry(path) is None:
        return None
    touch(path)
    return path


def execute(path, profile, args):
    """Replace this process by the executable at `path` (`profile`: -p), with the
    arguments as given; returns only if it cannot be run (evicted meanwhile)."""
    try:
        os.execv(path, [path] + (["-p"] if profile else []) + ["--"] + list(args))
    except OSError:
        return


# --- the builds a run leaves -----------------------------------------------------------------

def after_run_builds():
    """What `BRIL_JIT_PRECOMPILE` asks of the builds a run leaves behind: "wait" (the
    run waits before it exits for every build in flight for its code cache, its
    own or another run's: benchmarks, tests, scripts whose next command should find
    them), "none" (`0`: nothing is built once the run is over) or "background" (the
    default: they finish after the run has exited)."""
    mode = os.environ.get("BRIL_JIT_PRECOMPILE", "1")
    return "wait" if mode == "wait" else "none" if mode == "0" else "background"


# --- a command's input ----------------------------------------------------------------------

def read_input(file=None, text=False, meanwhile=None):
    """(bytes, read as text?): what a command reads (`bril.ir.program.read_program`) --
    FILE's bytes (Bril text unless it ends in .json, or `text`), else standard
    input's (JSON unless `text`).  OSError if it cannot be read (the commands
    report `bril.ir.program.unreadable`).  `meanwhile`: a function called before
    waiting for standard input when it is a pipe with nothing in it yet (see
    `_stdin_bytes`)."""
    if file is not None:
        with open(file, "rb") as fh:
            return fh.read(), text or not file.endswith(".json")
    return _stdin_bytes(meanwhile), text


def _stdin_bytes(meanwhile):
    """Standard input's bytes.  On a pipe with nothing in it yet -- `bril2json <
    p.bril | brili`, whose first command is still converting -- `meanwhile()` runs
    first, overlapping the writer's work instead of following it.  Input that is
    there already (a file, a pipe its writer has filled) is read at once."""
    import stat             # (imported by os already)
    import sys
    first = b""
    if meanwhile is not None:
        try:
            if stat.S_ISFIFO(os.fstat(0).st_mode):
                was = os.get_blocking(0)
                os.set_blocking(0, False)
                try:
                    first = os.read(0, 1 << 16)
                except BlockingIOError:
                    first = None
                finally:
                    os.set_blocking(0, was)
        except OSError:
            first = b""
        if first is None:
            meanwhile()
            first = b""
    if sys.stdin is None:           # (started with it closed)
        import errno
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return first + sys.stdin.buffer.read()
