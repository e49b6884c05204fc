"""The JIT's compile server: lowering and LLVM in a process of their own, beside the
interpreter, which never waits for them.

    python -m bril.backend.jit_server CACHE_DIR PROFILE_KEY PROGRAM_KEY LEVEL [LOCK]

`brili`'s JIT starts one when it first wants native code (`bril.backend.jit_client`);
the program goes through the code cache (`("program", PROGRAM_KEY)`, as the JIT
stored it: the key is a digest of the whole program, `jitprofile.program_key`, so
two programs of one outline never take each other's place).  The server imports llvmlite and makes its target machine at once,
while the interpreter runs on, then builds what it is asked, one unit at a time,
the newest ask first (`next_message`): each into the code cache (`bril.backend.jitcache`), replying
when it is there.  The interpreter loads it with the dynamic loader at the next
arrival at the loop, or binds the function to it.

When its input closes (the run is over, or it ended without a word), it finishes
what it was asked, compiles the program whole if the run asked
(`bril.backend.program_exe`: what the next plain `brili` of it runs), builds what
the run found hot and never asked for (the hot code of a run too short to ask:
the next run with flags finds it native), notes every unit it built in the
program's profile (`bril.backend.jitprofile.update_profile`) and waits, idle, for
another run.  It runs in a session of its own (a Ctrl-C of the run does not stop
a build half-way), prints nothing, and every failure is silent: what is not built
is interpreted, or built by a later run.

While it builds a unit it holds a lock on the unit's key (`building`): a run
that wants the same unit waits for it to land instead of building it again, and
`BRIL_JIT_PRECOMPILE=wait` waits for every build in flight.

Messages are a 4-byte length and a marshalled tuple each way:
    ("program", profile_key, program_key)  the program of the requests that follow
    ("args", main_args)               the run's @main arguments ({name: value}): a
                                      region of @main takes those its loops compute
                                      with as constants (`main_constants`)
    ("build", rid, what, candidates, kinds, quick)  a region (what = (index, header);
                                      candidates: [(blocks, entries)], widest first,
                                      the first that lowers is built; kinds: {header:
                                      {variable: kind}} its `any` variables are
                                      assumed to hold, or None) or a whole function
                                      (what = index; candidates None); quick: built
                                      quick first (`bril.backend.jitcache.QUICK`),
                                      at the full level once nothing else is asked
    ("exe", exe, profile)             build the program whole under the key `exe`
                                      when nothing else is asked (a run hot enough to
                                      ask for a unit: the next run is likely soon),
                                      for the kinds of the type profile `profile`
    ("exitcode", index, key, heap, variant)  generate function `index`'s `variant`
                                      (jitx: where the interpreter goes on when its
                                      native code hands back; jit: what the next run
                                      promotes it to) into the code cache under `key`,
                                      for the next run, once nothing else is asked --
                                      after the run, before its builds (`heap`: the
                                      run's heap is the native one)
    ("finish", todo, wait, exe, profile)   the run is over: build the program whole
                                      under the key `exe` (`bril.backend.program_exe`;
                                      None: not), then these too (as `what`s);
                                      with `wait`, reply ("finished",) once done
    ("built", rid, key, seconds, blocks, entries, error)     the reply: the unit's
                                      key (None if nothing could be built), the
                                      region's blocks and entries, why not
"""

import os
import sys
import time

from ..cache.buildlocks import AFTER_RUN, being_built, building, lock_path, open_lock
from .jit_protocol import Reader, fingerprint, frame, receive, servers_folder, socket_address
from ..ir.errors import BrilError


# --- the server ------------------------------------------------------------------------

class Server:
    def __init__(self, cache, key, program, level):
        self.cache, self.key, self.program, self.level = cache, key, program, level
        self.linked = self.compiled = None
        self.prog = None            # (as read: what a whole-program executable is made of)
        self.built = {}             # what -> {"blocks", "entries"} (regions) or {} (calls)
        self.failed = []            # whats nothing could be built for
        self.held = {}              # unit key -> lock fd, for units asked and not built yet
        self.main_args = {}         # the session's run's @main arguments (its "args")
        self.upgrades = {}          # what -> (candidates, kinds): built quick only, for now
        self.run_keys = None        # (`_run_keys`, for them)

    def load_program(self):
        """The program (linked, with its generated-code facts): False if it is gone."""
        if self.linked is not None:
            return True
        from .jitprofile import program_key
        from ..interpreter.interp import CompiledProgram
        from ..ir.linker import link
        source = self.cache.get_marshalled("program", self.program)
        if source is None:
            return False
        prog, base_dir, lib_dirs, filename = source
        linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
        if program_key(linked) != self.program:
            return False                # (not the program asked about)
        self.linked, self.prog = linked, prog
        self.compiled = CompiledProgram.generator(linked, self.cache, False)
        self.generators = {False: self.compiled}
        return True

    def generate_exit_code(self, index, key, native_heap, variant="jitx"):
        """Python code of function `index` the next run needs (its `variant`, under the
        key the run gave: jitx, where a run goes on when native code hands back;
        jit, what a run promotes the function to), into the code cache
        (`CompiledProgram.generate_into_cache`)."""
        if not self.load_program():
            return
        generator = self.generators.get(native_heap)
        if generator is None:
            from ..interpreter.interp import CompiledProgram
            generator = self.generators[native_heap] = CompiledProgram.generator(
                self.linked, self.cache, native_heap)
        generator.generate_into_cache(index, variant, key)

    def build(self, what, candidates, kinds=None, quick=False):
        """(unit key, blocks, entries) of what was built for `what` (a region's first
        candidate that lowers, assuming `kinds`, or a whole function; `quick`: its
        quick build, the full one to follow, `upgrade`); raises BrilError if none."""
        from . import jitcache
        if isinstance(what, tuple):
            index, _ = what
            # (the function's blocks and loops alone: its generated code's analysis,
            # which lowering does not use, took 10-25 ms of a first unit's build)
            shape = self.compiled.function_shape(index)
            if candidates is None:
                from .regions import select_region
                candidates = select_region(shape, what[1])
            error = None
            for blocks, entries in candidates:
                def lower():
                    return jitcache.lower_region_unit(
                        self.linked, index, shape, blocks, entries, "bril.unit",
                        constants=self._run_keys().constants(index), kinds=kinds,
                        quick=quick)[:2]
                try:
                    ukey = self._keep_unit(what, blocks, entries, kinds, quick, lower)
                except BrilError as e:
                    error = e
                    continue
                self.built[what] = {"blocks": sorted(blocks), "entries": sorted(entries)}
                assumed = jitcache.region_kinds(kinds, entries)
                if assumed:
                    self.built[what]["kinds"] = jitcache.kinds_data(assumed)
                self._marshal_code(ukey, what)
                return ukey, sorted(blocks), sorted(entries)
            raise error or BrilError("no region")
        ukey = self._keep_unit(what, None, None, None, quick,
                               lambda: jitcache.lower_call_unit(self.linked, what, "bril.unit")[:2])
        self.built[what] = {}
        return ukey, None, None

    def _keep_unit(self, what, blocks, entries, kinds, quick, lower):
        """The key of `what`'s unit, kept in the cache (`lower()`: its module and
        meta).  A quick one's meta names its full build's key, which the run using
        it waits for (`bril.backend.jit.Jit._upgrade`), built once nothing else is
        asked (`upgrade`)."""
        ukey = self._unit_key(what, blocks, entries, kinds, quick)
        full = self._unit_key(what, blocks, entries, kinds)

        def named():
            module, meta = lower()
            if quick:
                meta["full"] = full
            return module, meta
        self._keep(ukey, named)
        if quick:
            self.upgrades[what] = (None if blocks is None else [(blocks, entries)], kinds)
        else:
            self.upgrades.pop(what, None)
        return ukey

    def upgrade(self, every=False):
        """The full build of the unit built quick last (`every`: of each), for the
        run, which swaps it in when it lands in the cache, and for later runs; a
        failure leaves the quick one."""
        while self.upgrades:
            what = next(reversed(self.upgrades))
            candidates, kinds = self.upgrades.pop(what)
            try:
                self.build(what, candidates, kinds)
            except Exception:
                pass
            if not every:
                return

    def set_main_args(self, main_args):
        if main_args != self.main_args:
            self.main_args, self.run_keys = main_args, None

    def _run_keys(self):
        """Units' keys and constants as the run computes them (`jitcache.RunKeys`)."""
        if self.run_keys is None:
            from .jitcache import RunKeys
            self.run_keys = RunKeys(self.linked, self.level, self.main_args)
        return self.run_keys

    def _unit_key(self, what, blocks, entries, kinds=None, quick=False):
        """The key of the unit of `what` (a region's (index, header), or a function's
        index) from blocks, entries and kinds (`quick`: its quick build's)."""
        if isinstance(what, tuple):
            return self._run_keys().key("region", what[0], blocks, entries, kinds, quick)
        return self._run_keys().key("call", what, None, None, quick=quick)

    def _marshal_code(self, ukey, what):
        """The region's marshalling functions into the code cache, as the run entering
        it makes them (`jitcache.region_marshal_code`): a run that finds the unit
        built finds them too (compiling them took a rerun 2-5 ms, holding the GIL)."""
        from . import jitcache
        from ..native_runtime.resume import Slots
        try:
            meta = jitcache.stored_meta(self.cache, ukey)
            if meta is not None:
                jitcache.region_marshal_code(self.cache, Slots.from_data(meta["slots"]), *what)
        except Exception:           # (the run compiles them, as without a server)
            pass

    def hold(self, what, candidates, kinds=None, quick=False):
        """Take the build lock of the unit `what` will most likely be as soon as it is
        asked for (not only when its turn comes): a run that wants the same unit
        then waits for this build instead of asking its own server for it."""
        from . import jitcache
        if not self.load_program():
            return
        if isinstance(what, tuple):
            if not candidates:
                return
            blocks, entries = candidates[0]
            ukey = self._unit_key(what, blocks, entries, kinds, quick)
        else:
            ukey = self._unit_key(what, None, None, quick=quick)
        if ukey in self.held:
            return
        import fcntl
        fd = open_lock(self.cache, "build-" + ukey)
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:             # (another process builds it)
            os.close(fd)
            return
        self.held[ukey] = fd

    def release(self, ukey):
        fd = self.held.pop(ukey, None)
        if fd is not None:
            try:
                os.unlink(lock_path(self.cache, "build-" + ukey))
            except OSError:
                pass
            os.close(fd)

    def release_all(self):
        for ukey in list(self.held):
            self.release(ukey)

    def _keep(self, ukey, lower):
        """The unit `ukey` in the cache: there already, or lowered and built now."""
        if ukey in self.held:
            try:
                self._build_unit(ukey, lower)
            finally:
                self.release(ukey)
            return
        # (another server building it: wait for it to land -- but not forever, and
        # without blocking on its lock: that server may be waiting for a unit this
        # one holds, for a run that asked the two in the other order)
        deadline = time.monotonic() + UNIT_WAIT
        while self.held and being_built(self.cache, ukey) and time.monotonic() < deadline:
            time.sleep(0.02)
        with building(self.cache, ukey, wait=not self.held):
            self._build_unit(ukey, lower)

    def _build_unit(self, ukey, lower):
        from . import jitcache
        if jitcache.stored_meta(self.cache, ukey) is not None:
            return
        module, meta = lower()
        # (a quick unit's meta names its full build: `_keep_unit`)
        if not jitcache.keep_unit(self.cache, ukey, module, meta, self.level, "full" in meta):
            raise BrilError("the compiled code could not be kept in the code cache")

    def build_executable(self, key, profile=None):
        """The program compiled whole into the cache under `key`
        (`bril.backend.program_exe`; for the kinds of the type profile `profile`, the
        run's) by a process of its own at the lowest CPU
        priority, which this server does not wait for: it serves on (a run started
        meanwhile, most often the same program again, gets the machine and this
        server first).  The process holds the build lock while it builds; if the
        build fails, the profile says so, and no later run asks again (with today's
        compiler)."""
        from . import program_exe
        if not self.load_program() or program_exe.cached(self.cache, key):
            return
        name = "build-" + program_exe.build_lock(key)
        fd = open_lock(self.cache, name)
        if fd is None:
            return
        import fcntl
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            pid = os.fork()
        except OSError:             # (another process builds it; or no fork)
            os.close(fd)
            return
        if pid == 0:
            try:
                if os.fork() == 0:  # (the grandchild builds: reaped by init, not us)
                    # (nothing of the server's but the lock: no pipe or socket of a run)
                    null = os.open(os.devnull, os.O_RDWR)
                    for std in (0, 1, 2):
                        os.dup2(null, std)
                    os.closerange(3, fd)
                    os.closerange(fd + 1, 1 << 20)
                    os.nice(19)
                    try:
                        if not program_exe.cached(self.cache, key):
                            program_exe.build(self.cache, key, self.prog, profile)
                    except Exception:
                        self._mark_failed(program_exe.KIND)
                    try:
                        os.unlink(lock_path(self.cache, name))
                    except OSError:
                        pass
            finally:
                os._exit(0)
        os.close(fd)                # (the lock stays held: the grandchild has it open)
        os.waitpid(pid, 0)

    def _mark_failed(self, what):
        from . import jitcache
        from .jitprofile import update_profile

        def add(profile):
            jitcache.mark_tried(profile, what, self.level)
            return profile
        update_profile(self.cache, self.key, add, self.linked)

    def note_in_profile(self):
        """Every unit built, and what failed, into the program's profile."""
        if not self.built and not self.failed:
            return
        from . import jitcache
        from .jitprofile import update_profile

        def add(profile):
            regions, calls = profile.setdefault("regions", {}), profile.setdefault("calls", {})
            for what, spec in self.built.items():
                if isinstance(what, tuple):
                    regions[what] = spec
                else:
                    calls[what] = spec
                # (a unit that touches memory needs the shared heap from the start)
            for what in self.failed:
                if what not in regions and what not in calls:
                    jitcache.mark_tried(profile, what, self.level)
            if self._needs_heap():
                profile["heap"] = True
            return profile
        update_profile(self.cache, self.key, add, self.linked)

    def _needs_heap(self):
        from . import jitcache
        for what, spec in self.built.items():
            for quick in (False, True):     # (a full build that failed: the quick one)
                ukey = self._unit_key(what, spec.get("blocks"), spec.get("entries"),
                                      spec.get("kinds"), quick)
                meta = jitcache.stored_meta(self.cache, ukey)
                if meta is not None:
                    if meta.get("heap"):
                        return True
                    break
        return False


# --- a session: one run's requests ------------------------------------------------------

# How long a server holding unit locks waits for a unit another process builds
# before building it too (seconds).
UNIT_WAIT = 30.0



def _session(servers, cache, level, reader, write, key, program, after=None):
    """Serve one run: build what it asks (`next_message`), replying to each; when it is over
    (it said `finish`, or its end of the connection closed), build what it found hot
    and never asked for, and note every unit in the program's profile.  `after`: the
    program's AFTER_RUN lock if the run that started this server took it."""
    todo, ack, exe = [], False, None
    main_args = {}
    # (the AFTER_RUN lock, once the program is known)
    if after is None and key is not None:
        after = building(cache, AFTER_RUN + key, wait=False).__enter__()
    exit_code = []                  # ("exitcode", ...) messages not yet served

    def reply(message):
        try:
            write(frame(message))
        except OSError:             # (the run is over: nobody reads)
            pass

    queue = []
    while True:
        # Everything already sent is queued, and its units locked as being built.
        while not queue or reader.pending():
            if not queue and key is not None and not reader.pending() \
                    and _server_for(servers, cache, key, program, level).upgrades:
                # (nothing asked: the full build of what was built quick, which the
                # run swaps in)
                _server_for(servers, cache, key, program, level).upgrade()
                continue
            if not queue and exit_code and key is not None and not reader.pending():
                _generate_exit_code(servers, cache, key, program, level, exit_code)
                continue
            if not queue and exe is not None and key is not None and not reader.pending():
                # (nothing asked: the program whole, for the run after this one)
                try:
                    _server_for(servers, cache, key, program, level).build_executable(*exe)
                except Exception:
                    pass
                exe = None
                continue
            message = reader.read()
            if message is None:
                break
            if message[0] == "program":
                if after is not None and key != message[1]:
                    after.__exit__(None, None, None)
                    after = None
                key, program = message[1], message[2]
                if after is None:
                    after = building(cache, AFTER_RUN + key, wait=False).__enter__()
            elif message[0] == "args":
                main_args = message[1]
            elif message[0] == "exe":
                exe = (message[1], message[2] if len(message) > 2 else None)
            elif message[0] == "exitcode":
                exit_code.append(message[1:])
            elif message[0] in ("build", "finish") and key is not None:
                queue.append(message)
                if message[0] == "build":
                    try:
                        _server_for(servers, cache, key, program, level, main_args).hold(
                            *message[2:6])
                    except Exception:
                        pass
        if not queue:
            break
        message = next_message(queue)
        if message[0] == "finish":
            todo = list(message[1])
            ack = len(message) > 2 and message[2]
            if len(message) > 3:        # (exe: (key, the run's type profile))
                exe = None if message[3] is None else \
                    (message[3], message[4] if len(message) > 4 else None)
            break
        _, rid, what, candidates, *rest = message
        kinds, quick = (rest + [None, False])[:2]
        t0 = time.perf_counter()
        server = _server_for(servers, cache, key, program, level, main_args)
        try:
            if not server.load_program():
                raise BrilError("the program is not in the code cache")
            ukey, blocks, entries = server.build(what, candidates, kinds, quick)
            reply(("built", rid, ukey, time.perf_counter() - t0, blocks, entries, None))
        except Exception as e:          # (LLVM's own errors too: interpret it)
            server.failed.append(what)
            reply(("built", rid, None, time.perf_counter() - t0, None, None,
                   getattr(e, "message", None) or str(e) or type(e).__name__))
    # The run is over: the program whole, then what it found hot and never asked
    # for (what the next plain run and the next run with flags use).
    if key is not None:
        if after is None:
            after = building(cache, AFTER_RUN + key, wait=False).__enter__()
        try:
            server = _server_for(servers, cache, key, program, level, main_args)
            # First the code a run goes on in when native code hands back: a run
            # started right after this one enters the units already built at once,
            # and generated that code itself (10-30 ms of its own) when it came
            # after the builds below.
            _generate_exit_code(servers, cache, key, program, level, exit_code)
            server.upgrade(every=True)
            if exe is not None:
                try:
                    server.build_executable(*exe)
                except Exception:
                    pass
            for what in todo:
                if what in server.built:
                    continue
                try:
                    if server.load_program():
                        server.build(what, None)
                except Exception:
                    server.failed.append(what)
            if server.linked is not None:
                server.note_in_profile()
            server.built, server.failed = {}, []
            server.release_all()
        finally:
            after.__exit__(None, None, None)
    if ack:
        reply(("finished",))


def next_message(queue):
    """The queued message a session serves next, taken off `queue`: the newest ask
    first -- the sampler asks for what the program runs now, and an older ask may be
    for a loop it has left (mat-mul's first run had @randarray's loop built, over by
    then, before @matmul's: 0.1 s more interpreted) --, the run's `finish` after every
    build it queued."""
    builds = [i for i, m in enumerate(queue) if m[0] == "build"]
    return queue.pop(builds[-1] if builds else 0)


def _generate_exit_code(servers, cache, key, program, level, messages):
    """Serve the ("exitcode", index, key, native_heap, variant) messages (emptying the
    list)."""
    server = _server_for(servers, cache, key, program, level)
    while messages:
        index, code_key, native_heap, *variant = messages.pop(0)
        try:
            server.generate_exit_code(index, code_key, native_heap, *variant)
        except Exception:           # (the run generates it, as without a server)
            pass


def _server_for(servers, cache, key, program, level, main_args=None):
    """The Server of the program whose whole digest is `program` (kept for later
    sessions of the same program: never another program of the same outline), for
    a run with these @main arguments (`main_args`, if given)."""
    server = servers.get(program)
    if server is None:
        if len(servers) >= 8:
            servers.clear()
        server = servers[program] = Server(cache, key, program, level)
    if main_args is not None:
        server.set_main_args(main_args)
    return server


# --- idle servers: a later run's compiler, already started ------------------------------
#
# When its run is over the server waits, idle, for another run (IDLE_SECONDS, default
# BRIL_JIT_SERVER_IDLE): runs that follow each other -- a script, turnt, a benchmark
# loop, a test suite -- find LLVM loaded and set up, and the program already read if it
# is the same.  It listens on a socket in the code cache's `servers` folder (private
# to the user, as the cache is), named by what the code it builds depends on
# (`fingerprint`): a run of other sources, another compiler or other settings never
# uses it.  A run claims it by connecting and saying hello; the server takes its lock
# (`server-...`) and answers `ready` before anything is asked of it.  A minute covers
# an edit-and-run loop: prime-count 110000's first run 15 s after another run took
# 160-185 ms with the server of that run still idle, 300-570 ms with a new one (whose
# llvmlite alone loads in 60-90 ms); an idle server holds about 100 MB.

IDLE_SECONDS = 60.0


def idle_seconds():
    try:
        return max(0.0, float(os.environ.get("BRIL_JIT_SERVER_IDLE", IDLE_SECONDS)))
    except ValueError:
        return IDLE_SECONDS


def _idle(servers, cache, level):
    """Wait for runs to claim this server and serve each; return when none came for
    IDLE_SECONDS."""
    import _socket
    import select
    wait = idle_seconds()
    if wait <= 0:
        return
    folder = servers_folder(cache)
    name = f"{fingerprint(level)}-{os.getpid()}.sock"
    path = os.path.join(folder, name)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        # (bound under a name no run looks for, listening, then renamed into place: a
        # run connecting between bind and listen was refused, and removed the socket)
        with socket_address(folder, "." + name) as address:
            listener.bind(address)
        listener.listen(4)
        os.rename(os.path.join(folder, "." + name), path)
    except OSError:
        return
    try:
        while True:
            if not select.select([listener], [], [], wait)[0]:
                return
            try:
                fd, _ = listener._accept()
            except OSError:
                continue
            conn = _socket.socket(fileno=fd)
            if receive(conn, 2.0) != ("hello",):
                conn.close()
                continue
            conn.settimeout(None)
            reader = Reader(fd)
            with building(cache, f"server-{os.getpid()}", prefix=""):
                try:
                    conn.sendall(frame(("ready",)))
                except OSError:
                    conn.close()
                    continue
                _session(servers, cache, level, reader, conn.sendall, None, None)
            conn.close()
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


def serve(cache, key, program, level):
    """The run that started the server is its first session (on stdin and stdout),
    then it waits, idle, for more."""
    from . import native
    from ..native_runtime.nativert import runtime_shared_object
    try:
        # (LLVM set up, and the run-time library built if this is the first run ever,
        # while the run goes on: the run loads it with the first unit)
        native.target_machine(level)
        runtime_shared_object()
    except BrilError:
        pass
    servers = {}
    after = None
    try:
        os.fstat(4)                 # (the after-run lock its run took for it)
        after = building(cache, AFTER_RUN + key)
        after.fd = 4
    except OSError:
        pass
    try:
        _session(servers, cache, level, Reader(0), lambda data: os.write(1, data), key,
                 program, after)
    finally:
        if after is not None:       # (released by the session, unless it failed early)
            after.__exit__(None, None, None)
    os.close(1)
    return servers


def main(argv):
    from ..cache.codecache import CodeCache
    directory, key, program, level = argv[0], argv[1], argv[2], int(argv[3])
    cache = CodeCache(directory)
    servers = {}
    try:
        servers = serve(cache, key, program, level)
    except Exception:               # nobody to tell: the next run compiles as usual
        pass
    finally:
        # The lock its run took for it (`server-...`, held on fd 3 until the first
        # session ends: `wait_for_builds` waits for the whole queue, not only the unit
        # being built).
        if len(argv) > 4:
            try:
                os.unlink(lock_path(cache, argv[4]))
            except OSError:
                pass
            try:
                os.close(3)
            except OSError:
                pass
    try:
        _idle(servers, cache, level)
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    # (leave without LLVM's static destructors or the atexit of anything imported)
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
