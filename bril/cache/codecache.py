"""A persistent, content-addressed store for compiled code, kept across runs.

Generated Python (marshalled code objects) and native objects are expensive to
make and cheap to load; every run of an unchanged program should find them
here.  This module only stores bytes under keys; what a key covers (the
function's Bril, everything compiled into it, our own code, versions, flags)
is the business of the tier that computes it.

Where: `$BRIL_CACHE_DIR`, else `$XDG_CACHE_HOME/bril-speculate`, else
`~/.cache/bril-speculate`; `BRIL_CACHE=0` (or `brili --no-cache`) turns it
off.  Loading an entry runs its code, so the directory is kept private, as pip
and ccache keep theirs: created with mode 0700, and used only if it belongs to
the user and nobody else can write to it.

Trust: an entry is written to a temporary file and renamed into place, so a
reader sees a whole entry or none, whatever number of processes write at once;
it ends with a BLAKE2b digest of its payload and a magic word, checked on every read,
so a truncated or corrupt entry is a miss (and is removed), never run.  (The
check trails the payload so that a shared object stored as an entry is still
one: `entry_path` hands its file, verified, to the dynamic loader.)
Any failure (an unwritable or full disk, a file vanishing under us) is a miss,
never an error: the run goes on without the cache and prints the same.

Size: entries are touched when read; when the store grows past its bound
(`$BRIL_CACHE_SIZE` bytes, default 256 MB) the least recently used are removed
down to 80% of it.  Measuring the store walks every entry (20 ms for a thousand),
so a process measures it at its first write only if no process did in the last
minute (the `.evicted` stamp's time), and after every 64 writes of its own.
"""

import marshal
import os

# (where the cache is, its hash and its entries' format are `bril.warm_start`'s: the
# path of a warm run, which reads an entry before importing anything else)
from ..warm_start import (default_directory, directory_usable, enabled_by_environment,  # noqa: F401
                          entry_file, hasher, read_entry, sealed, source_digest, touch)

DEFAULT_LIMIT = 256 * 1024 * 1024
_CHECK_EVERY = 64               # writes between size checks (per process, plus the first)
_CHECK_INTERVAL = 60.0          # seconds; a process's first write checks if none did since


_serial = [0]


def _temporary_name(folder):
    """A fresh name in folder for this process (no `tempfile`: it imports `random`)."""
    import time
    _serial[0] += 1
    return os.path.join(folder, f".tmp-{os.getpid()}-{_serial[0]}-{time.monotonic_ns()}")


class CodeCache:
    """Entries in `directory`, grouped by kind (a subfolder per kind)."""

    def __init__(self, directory=None, limit=None):
        self.directory = directory or default_directory()
        if limit is None:
            try:
                limit = int(os.environ.get("BRIL_CACHE_SIZE", DEFAULT_LIMIT))
            except ValueError:
                limit = DEFAULT_LIMIT
        self.limit = limit
        self.usable = None          # decided on first use (see `_check_directory`)
        self.writes = 0
        self.hits = self.misses = 0

    # --- the directory ---------------------------------------------------------------

    def _check_directory(self):
        """True if the directory exists (made if need be) and is private to us."""
        if self.usable is None:
            self.usable = directory_usable(self.directory)
        return self.usable

    def usable_now(self):
        """Can entries be kept here (the directory private to us and writable)?"""
        return bool(self._check_directory())

    def _path(self, kind, key):
        return entry_file(self.directory, kind, key)

    # --- entries -------------------------------------------------------------------

    def get(self, kind, key):
        """The bytes stored under (kind, key), or None."""
        if not self._check_directory():
            return None
        path = self._path(kind, key)
        payload = read_entry(path)
        if payload is None:
            self.misses += 1
            return None
        self.hits += 1
        touch(path)
        return payload

    def get_marshalled(self, kind, key):
        """The object marshalled under (kind, key), or None (also for an entry that
        this Python's marshal cannot read: it is checksummed, so it is another
        version's format)."""
        data = self.get(kind, key)
        if data is None:
            return None
        try:
            return marshal.loads(data)
        except Exception:
            return None

    def put_marshalled(self, kind, key, obj):
        """Store obj marshalled under (kind, key); False, and no entry, if marshal
        cannot store it (or the write fails)."""
        try:
            data = marshal.dumps(obj)
        except ValueError:
            return False
        return self.put(kind, key, data)

    def entry_path(self, kind, key):
        """The path of the entry (kind, key) once its content is verified, or None:
        for payloads used as files (a shared object for the dynamic loader)."""
        if self.get(kind, key) is None:
            return None
        return self._path(kind, key)

    def put(self, kind, key, payload, mode=0o600):
        """Store payload under (kind, key); silently nothing if that fails.  (`mode`
        0o700 for an executable: its trailer does not stop it from running.)"""
        if not self._check_directory():
            return False
        path = self._path(kind, key)
        tmp = None
        try:
            folder = os.path.dirname(path)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            tmp = _temporary_name(folder)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(sealed(payload))
            os.replace(tmp, path)
            tmp = None
        except OSError:
            return False
        finally:
            if tmp is not None:
                self._remove(tmp)
        self.writes += 1
        if self.writes % _CHECK_EVERY == 1 and (self.writes > 1 or self._check_due()):
            self.evict()
        return True

    def _check_due(self):
        """Has no process measured the store for a while?  (Then this one will: the
        stamp's time is now.)"""
        stamp = os.path.join(self.directory, ".evicted")     # (not an entry: a dot name)
        try:
            import time
            now = time.time()
            if now - os.stat(stamp).st_mtime < _CHECK_INTERVAL:
                return False
            os.utime(stamp, (now, now))
        except FileNotFoundError:
            try:
                os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT, 0o600))
            except OSError:
                pass
        except OSError:
            pass
        return True

    @staticmethod
    def _remove(path):
        try:
            os.unlink(path)
        except OSError:
            pass

    # --- the whole store ---------------------------------------------------------------

    def entries(self):
        """[(path, size, last use)] of every entry."""
        found = []
        if not self._check_directory():
            return found
        stack = [self.directory]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    for e in it:
                        try:
                            if e.is_dir(follow_symlinks=False):
                                stack.append(e.path)
                            elif e.is_file(follow_symlinks=False) and not e.name.startswith("."):
                                st = e.stat(follow_symlinks=False)
                                found.append((e.path, st.st_size, st.st_mtime))
                        except OSError:
                            pass
            except OSError:
                pass
        return found

    def evict(self, limit=None):
        """Remove the least recently used entries while the store is over its bound
        (down to 80% of it); returns the number removed."""
        limit = self.limit if limit is None else limit
        found = self.entries()
        total = sum(size for _, size, _ in found)
        if total <= limit:
            return 0
        removed = 0
        for path, size, _ in sorted(found, key=lambda e: e[2]):
            if total <= 0.8 * limit:
                break
            self._remove(path)
            total -= size
            removed += 1
        return removed

    def info(self):
        """{'directory', 'entries', 'bytes', 'limit', 'usable'} of the store."""
        found = self.entries()
        return {"directory": self.directory, "usable": bool(self._check_directory()),
                "entries": len(found), "bytes": sum(s for _, s, _ in found),
                "limit": self.limit}

    def clear(self):
        """Remove every entry; returns how many."""
        found = self.entries()
        for path, _, _ in found:
            self._remove(path)
        return len(found)


def compiled_code(cache, kind, src, filename):
    """compile(src, filename, "exec"), its code object kept in `cache` (if any) under
    (kind, a hash of the source, the file name and this Python's version): loading
    it is far cheaper than compiling."""
    if cache is None:
        return compile(src, filename, "exec")
    import sys
    h = hasher(src.encode("utf-8", "surrogatepass"))
    h.update(repr((filename, sys.version, marshal.version)).encode())
    key = h.hexdigest()
    code = cache.get_marshalled(kind, key)
    if code is None:
        code = compile(src, filename, "exec")
        cache.put_marshalled(kind, key, code)
    return code
