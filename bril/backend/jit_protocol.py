"""How a run and a compile server talk (`bril.backend.jit_client`,
`bril.backend.jit_server`): messages are a 4-byte length and a marshalled tuple each
way (`frame`, `Reader`; the messages are listed in jit_server's docstring); an idle
server listens on a socket in the code cache's `servers` folder, named by what the
code it builds depends on (`fingerprint`), and a run claims it by connecting and
saying hello (`claim`).  A light module: a run that talks to a server does not
import the server's code.
"""

import marshal
import os
import sys

from ..cache.buildlocks import being_built


def frame(message):
    data = marshal.dumps(message)
    return len(data).to_bytes(4, "little") + data


class Reader:
    """Messages from a file descriptor: `read()` blocks for the next (None at end of
    input); `ready()` returns those already complete without waiting (the fd must
    then be non-blocking)."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""
        self.messages = []
        self.closed = False

    def _parse(self):
        buf = self.buf
        while len(buf) >= 4:
            n = int.from_bytes(buf[:4], "little")
            if len(buf) < 4 + n:
                break
            try:
                self.messages.append(marshal.loads(buf[4:4 + n]))
            except Exception:
                pass
            buf = buf[4 + n:]
        self.buf = buf

    def _fill(self):
        """Read what there is; False if nothing was there (or at end of input)."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        self._parse()
        return True

    def ready(self):
        while not self.closed and self._fill():
            pass
        out, self.messages = self.messages, []
        return out

    def pending(self):
        """Is a message already complete, or bytes waiting (without blocking)?"""
        if self.messages:
            return True
        if self.closed:
            return False
        import select
        return bool(select.select([self.fd], [], [], 0)[0])

    def read(self):
        while not self.messages and not self.closed:
            self._fill()
        return self.messages.pop(0) if self.messages else None


def fingerprint(level):
    """What a server's units depend on besides the program (see `nativert.native_digest`),
    with this Python and the settings read from the environment."""
    from ..cache.codecache import hasher
    from ..native_runtime.nativert import native_digest
    h = hasher(native_digest(level))
    h.update(repr((sys.executable, os.environ.get("CC", ""),
                   os.environ.get("BRIL_CHECK_FACTS", ""))).encode())
    return h.hexdigest()[:24]


def servers_folder(cache):
    return os.path.join(cache.directory, "servers")


class socket_address:
    """`with socket_address(folder, name) as a:` a socket address for the file `name` in
    `folder`: an AF_UNIX address holds at most 107 bytes, so a longer path (a cache
    deep in a temporary folder) is reached through a descriptor of its folder."""

    def __init__(self, folder, name):
        self.folder, self.name, self.fd = folder, name, None

    def __enter__(self):
        path = os.path.join(self.folder, self.name)
        if len(os.fsencode(path)) < 100:
            return path
        self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        return f"/proc/self/fd/{self.fd}/{self.name}"

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)


def receive(sock, timeout):
    """One message from a socket within `timeout` seconds, or None."""
    sock.settimeout(timeout)
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "little"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                return None
            data += chunk
        return marshal.loads(data[4:4 + int.from_bytes(data[:4], "little")])
    except (OSError, ValueError, EOFError):
        return None


# An idle server answers at once (this bounds a busy machine's delay); one still
# serving another run is skipped before connecting (`claim`): its connection would
# wait in the listener's backlog until that run's builds were done, while this run's
# sampler, holding the JIT's lock, waited for it.
CLAIM_SECONDS = 0.5


def claim(cache, level):
    """An idle server's connection (a socket, claimed: it answered `ready`), or None."""
    import _socket
    folder = servers_folder(cache)
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    mine = fingerprint(level) + "-"
    for name in names:
        if not (name.startswith(mine) and name.endswith(".sock")):
            continue
        if being_built(cache, f"server-{name[len(mine):-len('.sock')]}", prefix=""):
            continue                        # (serving another run: not idle)
        path = os.path.join(folder, name)
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(CLAIM_SECONDS)
            with socket_address(folder, name) as address:
                sock.connect(address)
            sock.sendall(frame(("hello",)))
            if receive(sock, CLAIM_SECONDS) == ("ready",):
                sock.settimeout(None)
                return sock
        except ConnectionRefusedError:
            try:
                os.unlink(path)             # (nobody listens there any more)
            except OSError:
                pass
        except OSError:
            pass
        sock.close()
    return None
