"""The JIT's compile server (`bril.backend.jit_server`, `bril.backend.jit_client`):
native code built in a process of its own while the interpreter runs on, used at
the next arrival, kept for the next run, and `brili` running the JIT by default.
"""

import io
import json
import os
import re
import subprocess
import time

import pytest

from bril.backend import jitcache
from bril.backend.jit import Jit, LoopRegion
from bril.backend.jit_client import CompileServer
from bril.backend.jit_protocol import Reader, frame
from bril.backend.jitprofile import load_profile, profile_key, program_key
from bril.cache.buildlocks import being_built, building
from bril.cache.codecache import CodeCache
from bril.interpreter.interp import compile_program
from bril.ir.linker import link
from bril.ir.text import parse_program
from bril.native_runtime import nativert

from corpus import program_text
from helpers import BRILI, bril_json, run_brili

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None, reason="no C compiler")

LOOP = program_text("jit_server/loop")


def _wait(predicate, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _brili(args, text, cache_dir, **env):
    return run_brili(args, bril_json(text), timeout=300, BRIL_CACHE_DIR=cache_dir, **env)


def _attached(text, cache):
    """A Jit attached to the program of `text` (not running; no sampler thread)."""
    import threading
    prog = parse_program(text)
    compiled, main = compile_program(prog, out=io.StringIO())
    jit = Jit(cache=cache, pay_back=12, shared_heap=None)
    jit.source = (prog, None, [], None)
    jit.attach(compiled, sampler_thread=threading.get_ident())
    fc = compiled.function_code(main)
    return jit, compiled, main, fc


def _loop_run(tmp_path, monkeypatch):
    """(cache, Jit, compiled, main, loop header): LOOP attached to a JIT with a cache
    in tmp_path, building after runs (BRIL_JIT_PRECOMPILE=1) -- the after-run lock's
    tests."""
    monkeypatch.setenv("BRIL_JIT_PRECOMPILE", "1")
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    return cache, jit, compiled, main, fc.loops[0].header


def test_messages_cross_the_pipe_whole():
    r, w = os.pipe()
    os.write(w, frame(("build", 1, (2, 3), [([1, 2], [1])])) + frame(("finish", [4]))[:5])
    reader = Reader(r)
    os.set_blocking(r, False)
    assert reader.ready() == [("build", 1, (2, 3), [([1, 2], [1])])]
    os.write(w, frame(("finish", [4]))[5:])
    os.close(w)
    assert reader.ready() == [("finish", [4])]
    assert reader.read() is None


def test_the_server_builds_the_newest_ask_first_and_finishes_last():
    # (the sampler asks for what the program runs now: an older ask may be for a
    # loop it has left)
    from bril.backend.jit_server import next_message
    queue = [("build", 1, (0, 1), None), ("build", 2, (0, 5), None), ("finish", [])]
    assert [next_message(queue)[1] for _ in range(3)] == [2, 1, []]
    assert queue == []


def test_the_server_builds_a_region_into_the_cache(tmp_path):
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    header = fc.loops[0].header
    server = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert server.start(jit.source)
    from bril.backend.regions import select_region
    candidates = [(sorted(b), sorted(e)) for b, e in select_region(fc, header)]
    rid = server.request((main, header), candidates)
    replies = []
    _wait(lambda: replies.extend(server.poll()) or replies)
    (_, got, ukey, seconds, blocks, entries, error), = replies
    assert got == rid and error is None and seconds > 0
    assert (blocks, entries) == candidates[0]
    meta = jitcache.stored_meta(cache, ukey)
    assert meta is not None
    # ... with the functions a run entering the region moves its variables with
    # (compiled there, they would hold the run's GIL)
    from bril.native_runtime.resume import Slots
    misses = cache.misses
    code, _ = jitcache.region_marshal_code(cache, Slots.from_data(meta["slots"]), main, header)
    assert cache.misses == misses and code.co_filename == f"<jit region {main} {header}>"
    server.finish([], wait=True)
    # The server noted what it built in the program's profile, for the next run.
    profile = load_profile(cache, jit.profile_key, compiled.linked)
    assert profile["regions"][(main, header)] == {"blocks": blocks, "entries": entries}


def test_a_unit_the_server_built_lands_and_raises_the_loops_flag(tmp_path):
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    header = fc.loops[0].header
    jit._ask_region(main, header)
    assert (main, header) in jit.asking
    assert jit.report()["regions"][0]["compiling"]
    _wait(lambda: jit._land() or not jit.asked)
    region = jit.regions[(main, header)]
    assert isinstance(region, LoopRegion) and region.address is not None
    assert region.asked_at is not None and region.arrived_at >= region.asked_at
    assert compiled.ns[f"_JQ{main}_{header}"] is True
    jit.finish()


@pytest.mark.parametrize("lock", ["unit", "after-run"])
def test_a_unit_another_process_is_building_is_waited_for(tmp_path, lock):
    # Another process builds the unit (holding its lock) -- or a compile server
    # builds what the run before this one found hot (holding its after-run lock),
    # most often what this run asks for: this run waits for it rather than ask its
    # own server, whose start alone takes longer than that build.
    from bril.cache.buildlocks import AFTER_RUN
    from bril.backend.regions import select_region
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    header = fc.loops[0].header
    blocks, entries = select_region(fc, header)[0]
    ukey = jitcache.unit_key(compiled.linked, "region", main, blocks, entries, 2)
    held = ukey if lock == "unit" else AFTER_RUN + jit.profile_key
    with building(cache, held):
        assert being_built(cache, held)
        jit._ask_region(main, header)
        # (not asked again: this run waits for the other build to land)
        assert (main, header) in jit.waiting and not jit.asking and jit.server is None
        # (the report says so, should the run end now)
        (pending,) = jit.report()["regions"]
        assert pending["elsewhere"] and not pending["compiling"]
        assert pending["waited_from"] is not None
        from bril.backend.jit import report_text
        assert "another run's compile server was building it" in report_text(jit.report())
        jit._land()
        assert (main, header) in jit.waiting
        # The other process's build lands (as its server would keep it).
        module, meta = jitcache.lower_region_unit(compiled.linked, main, fc, blocks, entries,
                                                  "bril.unit")[:2]
        assert jitcache.keep_unit(cache, ukey, module, meta, 2)
    jit._land()
    region = jit.regions[(main, header)]
    assert isinstance(region, LoopRegion) and region.address is not None
    assert not being_built(cache, held) and jit.server is None


def test_a_lock_that_only_marks_work_is_never_waited_for(tmp_path):
    # Two servers of one program each held a unit the other waited for, while
    # waiting for the other's after-run lock: that lock is taken without waiting
    # (and held by nobody if another process has it).
    import time as clock
    from bril.cache.buildlocks import AFTER_RUN
    cache = CodeCache(str(tmp_path))
    with building(cache, AFTER_RUN + "k"):
        start = clock.monotonic()
        with building(cache, AFTER_RUN + "k", wait=False) as second:
            assert second.fd is None
        assert clock.monotonic() - start < 1.0
        assert being_built(cache, AFTER_RUN + "k")      # (the first still holds it)
    with building(cache, AFTER_RUN + "k", wait=False) as alone:
        assert alone.fd is not None and being_built(cache, AFTER_RUN + "k")
    assert not being_built(cache, AFTER_RUN + "k")


def test_waiting_for_builds_sees_a_build_handed_on_after_its_first_look(tmp_path):
    # A server ends its session after handing its executable's build to a process of
    # its own, under a lock made then: BRIL_JIT_PRECOMPILE=wait waits for that too.
    import fcntl
    import threading
    from bril.cache.buildlocks import open_lock, wait_for_builds
    cache = CodeCache(str(tmp_path))
    server = open_lock(cache, "server-1")
    fcntl.flock(server, fcntl.LOCK_EX)
    released = []

    def hand_on():
        time.sleep(0.2)
        build = open_lock(cache, "build-exe")
        fcntl.flock(build, fcntl.LOCK_EX)
        os.close(server)                    # (the server's session ends)
        time.sleep(0.3)
        released.append(time.monotonic())
        os.close(build)

    thread = threading.Thread(target=hand_on)
    thread.start()
    wait_for_builds(cache)
    done = time.monotonic()
    thread.join()
    assert released and done >= released[0]


def test_a_run_ending_while_a_server_builds_what_the_last_one_found_hot_starts_none(
        tmp_path, monkeypatch):
    # A run started right after another ends while that run's server builds the hot
    # code it found: the same units would be its own to build after it -- it leaves
    # them to that server instead of starting a second one (5-10 ms of its exit and
    # a second LLVM on a machine already compiling).
    from bril.cache.buildlocks import AFTER_RUN, wait_for_builds
    cache, jit, compiled, main, header = _loop_run(tmp_path, monkeypatch)
    jit.hot_seconds[(main, header)] = 1.0
    with building(cache, AFTER_RUN + jit.profile_key):
        jit.finish()
        assert jit.server is None
    assert load_profile(cache, jit.profile_key, compiled.linked)["hot"] == {(main, header): 1.0}
    # With nobody at work on it, the same run's hot loop is built after it.
    jit, compiled, main, fc = _attached(LOOP, cache)
    jit.hot_seconds[(main, header)] = 1.0
    jit.finish()
    assert jit.server is not None and jit.server.used
    wait_for_builds(cache)
    assert (main, header) in load_profile(cache, jit.profile_key, compiled.linked)["regions"]


def test_a_server_holds_the_after_run_lock_from_its_spawn_and_a_rerun_starts_none(
        tmp_path, monkeypatch):
    # A run that ends starts its server to build what it found hot; the server takes
    # 0.1 s to start.  The lock its run took at the spawn is the server's from the
    # first moment: a rerun started meanwhile waits for that server (no second one,
    # importing LLVM beside it, every time: eight-queens' rerun 0.10-0.14 s -> 0.07-0.10 s).
    from bril.cache.buildlocks import AFTER_RUN, wait_for_builds
    cache, jit, compiled, main, header = _loop_run(tmp_path, monkeypatch)
    server = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert server.start(jit.source)
    assert being_built(cache, AFTER_RUN + jit.profile_key)    # (before it even started)
    rerun, *_ = _attached(LOOP, cache)
    rerun._ask_region(main, header)
    assert rerun.server is None and (main, header) in rerun.waiting
    rerun.exe_key, rerun.began = "an executable's key", 0.0     # (a run long enough)
    assert rerun._executable_wanted(None) is None              # (left to that server)
    server.finish([(main, header)], wait=True)
    wait_for_builds(cache)
    assert not being_built(cache, AFTER_RUN + jit.profile_key)
    assert rerun._executable_wanted(None) == "an executable's key"
    # Once it is done, the rerun finds the unit it waited for.
    _wait(lambda: rerun._land() or (main, header) not in rerun.waiting)
    assert rerun.regions[(main, header)] is not None
    rerun.finish()


def test_the_server_makes_the_code_the_next_run_goes_on_in_after_native_code(tmp_path):
    # A run asking for a region tells the server the key of the function's jitx
    # variant (where the interpreter goes on when native code hands back): the
    # server generates it into the code cache, so that the next run, which enters
    # the region from the cache, does not (10-25 ms of a short rerun).
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    compiled.cache = cache
    key = compiled.variant_key(main, "jitx")
    assert key is not None and cache.get_marshalled("py", key) is None
    server = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert server.start(jit.source)
    server.exit_code(main, key, compiled.native_heap)
    server.exit_code(main, "another key", compiled.native_heap)     # (not this program's)
    server.finish([], wait=True)
    assert cache.get_marshalled("py", key) is not None
    assert cache.get_marshalled("py", "another key") is None
    # The next run takes it from the cache: it analyses nothing of the function.
    fresh, _ = compile_program(parse_program(LOOP), out=io.StringIO())
    fresh.cache = cache
    function, _ = fresh.load_with_links(main, "jitx")
    assert callable(function) and main not in fresh.codes


def test_after_a_run_the_server_makes_that_code_before_building_what_was_hot(tmp_path):
    # A run started right after this one enters the units already built at once, and
    # needs that code when they hand back: made after the builds of what the run
    # found hot, it came too late, and the next run generated it itself.
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    compiled.cache = cache
    header = fc.loops[0].header
    key = compiled.variant_key(main, "jitx")
    server = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert server.start(jit.source)
    server.exit_code(main, key, compiled.native_heap)
    server.finish([(main, header)], wait=True)
    spec = load_profile(cache, jit.profile_key, compiled.linked)["regions"][(main, header)]
    ukey = jitcache.unit_key(compiled.linked, "region", main, spec["blocks"], spec["entries"], 2)
    made = [os.stat(cache.entry_path(kind, k)).st_mtime_ns for kind, k in (("py", key),
                                                                           ("unit", ukey))]
    assert made[0] <= made[1]


def test_a_typed_function_has_one_cache_key_however_it_entered_generated_code(tmp_path):
    # The cold tier moves a frame into generated code at a loop header and notes
    # the kinds its `any` variables hold there, which the code may assume (part of
    # the cache key).  A typed function has none: moved at a header or promoted at
    # its first call (a run with a profile), its code has one key -- a run with a
    # profile found none of its first run's code and generated it all again.
    cache = CodeCache(str(tmp_path))
    compiled, main = compile_program(parse_program(LOOP), out=io.StringIO())
    compiled.cache = cache
    promoted = compiled.variant_key(main, "jit")
    header = compiled.function_shape(main).loops[0].header
    compiled.saw_at_header(main, header, {"i": 5, "n": 10})
    assert compiled.variant_key(main, "jit") == promoted
    dynamic = LOOP.replace("@main(n: int) {", "@main(n: int) {\n  d: any = id n;")
    assert dynamic != LOOP
    compiled, main = compile_program(parse_program(dynamic), out=io.StringIO())
    compiled.cache = cache
    promoted = compiled.variant_key(main, "jit")
    compiled.saw_at_header(main, header, {"d": 10})
    assert compiled.variant_key(main, "jit") != promoted


def test_the_next_run_is_warm_whatever_the_timing(tmp_path):
    # A first run that ends while its server still builds, a run right after it
    # that waits for every build in flight (BRIL_JIT_PRECOMPILE=wait): then every
    # unit is in the cache, and the next run loads it at its first arrival.  The
    # first run is long enough (0.3-0.5 s interpreted) for the JIT to come in and ask
    # on a busy machine (with 300,000 iterations, 70 ms, a CI run's JIT never did);
    # its server, started by that ask, still builds when the run ends.
    plain = _brili(["--no-jit", "-p", "2000000"], LOOP, tmp_path)
    first = _brili(["-p", "2000000"], LOOP, tmp_path, BRIL_JIT_PRECOMPILE="1")
    linked = link(parse_program(LOOP))
    assert load_profile(CodeCache(str(tmp_path)), profile_key(linked), linked), \
        "the first run's JIT never came in"
    after = _brili(["-p", "5"], LOOP, tmp_path, BRIL_JIT_PRECOMPILE="wait")
    warm = _brili(["--jit-report", "-", "-p", "2000000"], LOOP, tmp_path,
                  BRIL_JIT_PRECOMPILE="0")
    assert first.stdout == warm.stdout == plain.stdout
    assert first.stderr == plain.stderr and warm.stderr.endswith(plain.stderr)
    assert after.returncode == 0
    assert "compiled in 0.000 s" in warm.stderr and "native from" in warm.stderr


@pytest.mark.parametrize("text, out, count", [
    ("@main {\n  x: int = const 4;\n  print x;\n}", "4", 2),    # no loop: no JIT
    ("@main {\n  i: int = const 0;\n  one: int = const 1;\n  n: int = const 3;\n"
     ".l:\n  i: int = add i one;\n  c: bool = lt i n;\n  br c .l .done;\n"
     ".done:\n  print i;\n}", "3", 13),                             # over before the JIT came in
], ids=["no-loop", "short-loop"])
def test_a_wait_run_waits_for_builds_in_flight_whatever_engine_ran_it(tmp_path, text, out,
                                                                      count):
    # BRIL_JIT_PRECOMPILE=wait: a run waits at its end for every build in flight,
    # another process's too -- also a run too short for the JIT to come in (a
    # script's next command would miss what the server of the run before builds).
    env = dict(os.environ, BRIL_CACHE_DIR=str(tmp_path), BRIL_JIT_PRECOMPILE="wait")
    with building(CodeCache(str(tmp_path)), "a-unit-in-flight"):
        run = subprocess.Popen([*BRILI, "-p"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
        run.stdin.write(bril_json(text))
        run.stdin.close()
        time.sleep(1.5)
        assert run.poll() is None           # (the program itself ends in milliseconds)
    assert run.wait(timeout=60) == 0
    assert run.stdout.read() == out + "\n"
    assert run.stderr.read() == f"total_dyn_inst: {count}\n"


def test_a_unit_that_cannot_be_built_is_reported_as_such_and_the_run_stays_exact(tmp_path):
    # No usable C compiler: the server's build fails, the loop stays interpreted, and
    # the report says why -- and not "native from" the time the failure came back.
    # (a run of 0.5 s; on a machine busy enough that the server's start and failed
    # build took longer, the report rightly says "still compiling": a longer run then)
    for n in ("3000000", "20000000"):
        plain = _brili(["--no-jit", "-p", n], LOOP, tmp_path / n)
        first = _brili(["--jit-report", "-", "-p", n], LOOP, tmp_path / n,
                       CC=str(tmp_path / "no-such-cc"), BRIL_JIT_PRECOMPILE="0")
        assert first.returncode == 0 and first.stdout == plain.stdout
        assert first.stderr.endswith(plain.stderr)
        if "still compiling when the program ended" not in first.stderr:
            break
    assert "not compiled (cannot run" in first.stderr, first.stderr
    assert "native from" not in first.stderr and "answered at" in first.stderr


def test_a_long_first_run_asks_its_server_and_stays_exact(tmp_path):
    plain = _brili(["--no-jit", "-p", "3000000"], LOOP, tmp_path)
    report = tmp_path / "report.json"
    first = _brili(["--jit-report", str(report), "-p", "3000000"], LOOP, tmp_path)
    assert first.stdout == plain.stdout and first.stderr == plain.stderr
    rep = json.loads(report.read_text())
    assert rep["server"]
    (region,) = rep["regions"]
    assert region["asked_at"] is not None
    # Landed well before the run ended (a busy machine may take the whole run to
    # build it): then the loop's next arrival entered it.
    if region.get("arrived_at") is not None and region["arrived_at"] < rep["run_seconds"] - 0.2:
        assert region["entries"] > 0, rep


def test_brili_runs_the_jit_by_default_and_no_jit_turns_it_off(tmp_path):
    on = _brili(["--jit-report", "-", "-p", "300000"], LOOP, tmp_path)
    assert on.returncode == 0 and on.stderr.startswith("jit: ")
    for args, env in ((["--no-jit"], {}), ([], {"BRIL_JIT": "0"})):
        off = _brili([*args, "-p", "300000"], LOOP, tmp_path, **env)
        assert off.stdout == on.stdout
        assert off.stderr == on.stderr.splitlines()[-1] + "\n"
    # Without a usable cache (or --no-cache), the default runs interpreted, silently.
    bad = tmp_path / "shared"
    bad.mkdir(mode=0o777)
    bad.chmod(0o777)            # (writable by others: never used)
    done = _brili(["-p", "300000"], LOOP, bad)
    assert done.stdout == on.stdout and done.stderr == on.stderr.splitlines()[-1] + "\n"
    assert not (bad / "unit").exists()


def test_the_report_describes_the_real_path(tmp_path):
    # --jit-report runs the JIT a plain run uses (sampled, deferred); a run over
    # before the JIT's first look says so.
    from bril.backend.jit import report_text
    from bril.backend.jit_deferred import DeferredJit
    deferred = DeferredJit(CodeCache(str(tmp_path)), background=False, shared_heap=None)
    assert "the run ended before the JIT's first look" in report_text(deferred.report())
    long = _brili(["--jit-report", "-", "-p", "2000000"], LOOP, tmp_path)
    assert "compile server" in long.stderr
    # Its times count from the program's start, the JIT's coming in among them.
    came = float(re.search(r"the JIT came in at (\d+\.\d+) s", long.stderr).group(1))
    asked = float(re.search(r"asked for at (\d+\.\d+) s", long.stderr).group(1))
    run = float(re.search(r"run (\d+\.\d+) s", long.stderr).group(1))
    assert 0 < came <= asked < run, long.stderr


def test_profile_writers_lose_nothing_of_each_other(tmp_path):
    from bril.backend.jitprofile import update_profile
    cache = CodeCache(str(tmp_path))
    linked = link(parse_program(LOOP))
    key = profile_key(linked)
    update_profile(cache, key, lambda p: dict(p, regions={(1, 1): {"blocks": [1]}}), linked)
    update_profile(cache, key, lambda p: dict(p, calls={3: {}}), linked)
    profile = load_profile(cache, key, linked)
    assert profile["regions"] == {(1, 1): {"blocks": [1]}} and profile["calls"] == {3: {}}


def test_a_later_run_claims_the_idle_server(tmp_path, monkeypatch):
    # When its run is over the server waits, idle, for the next run: that run finds
    # LLVM set up (and this program read), one run at a time.
    from bril.backend import jit_protocol
    from bril.backend.regions import select_region
    monkeypatch.setenv("BRIL_JIT_SERVER_IDLE", "30")
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    header = fc.loops[0].header
    candidates = [(sorted(b), sorted(e)) for b, e in select_region(fc, header)]
    first = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert first.start(jit.source) and first.pid is not None
    first.finish([], wait=True)
    # (listening: its socket renamed into place, no longer under a hidden name)
    _wait(lambda: os.path.isdir(jit_protocol.servers_folder(cache))
          and any(not n.startswith(".") for n in os.listdir(jit_protocol.servers_folder(cache))))
    second = CompileServer(cache, jit.profile_key, program_key(compiled.linked), 2)
    assert second.start(jit.source) and second.pid is None and second.sock is not None
    # (claimed: nobody else can claim it until this run lets it go)
    assert jit_protocol.claim(cache, 2) is None
    rid = second.request((main, header), candidates)
    replies = []
    _wait(lambda: replies.extend(second.poll()) or replies)
    assert replies[0][1] == rid and replies[0][2] is not None
    second.finish([], wait=True)
    # Another Python, compiler or lowering would build other code: never claimed.
    monkeypatch.setenv("CC", "another-cc")
    assert jit_protocol.claim(cache, 2) is None
    monkeypatch.delenv("CC")
    # (idle once the session it answered `finished` in is over: claim skips a server
    # still serving, and the session ends a moment after that answer)
    claimed = []
    _wait(lambda: claimed.append(jit_protocol.claim(cache, 2)) or claimed[-1] is not None)
    claimed[-1].close()


def test_programs_of_one_outline_never_share_units(tmp_path):
    # Two programs alike but for a constant have the same profile key (their
    # outline); an idle server that served one must build the other's own units.
    other = LOOP.replace("s: int = add s i;", "s: int = sub s i;")
    env = dict(BRIL_JIT_SERVER_IDLE="30", BRIL_JIT_PRECOMPILE="wait")
    for text in (LOOP, other, LOOP, other):
        plain = _brili(["--no-jit", "3000000"], text, tmp_path)
        got = _brili(["3000000"], text, tmp_path, **env)
        assert got.stdout == plain.stdout, text


RECURSION = program_text("jit_server/recursion")


def test_the_unit_asked_for_under_recursion_is_the_recursive_function(tmp_path):
    # The sampled stack (innermost first): @scan's loop under @tree under @tree...
    # under @main.  The unit worth asking for is @tree whole (it takes @scan in), not
    # @scan's loop, entered once per call for a few instructions.
    jit, compiled, main, fc = _attached(RECURSION, CodeCache(str(tmp_path)))
    jit.use_server = True
    names = {f["name"]: i for i, f in enumerate(compiled.linked.functions)}
    tree, scan = names["tree"], names["scan"]
    stack = [(scan, None, None), (tree, None, None), (tree, None, None), (main, None, None)]
    assert jit._recursion_on_stack(stack) == tree
    assert jit._recursion_on_stack([(scan, None, None), (tree, None, None),
                                    (main, None, None)]) is None      # (no recursion)
    jit.calls[tree] = None          # (its unit could not be built: the loop's turn)
    assert jit._recursion_on_stack(stack) is None
    jit.use_server = False          # (compiling here: by the pay-back rule, as before)
    del jit.calls[tree]
    assert jit._recursion_on_stack(stack) is None
    jit.finish()


def test_a_first_run_asks_for_the_recursive_function_and_stays_exact(tmp_path):
    plain = _brili(["--no-jit", "-p", "23"], RECURSION, tmp_path)
    report = tmp_path / "report.json"
    first = _brili(["--jit-report", str(report), "-p", "23"], RECURSION, tmp_path)
    assert first.returncode == 0
    assert first.stdout == plain.stdout and first.stderr == plain.stderr
    rep = json.loads(report.read_text())
    # (the run takes 0.15-0.3 s: its JIT comes in, with a compile server)
    assert rep["server"] and not rep.get("note"), rep
    assert [f["function"] for f in rep["functions"]] == ["tree"], rep
    assert not [r for r in rep["regions"] if r["function"] == "scan"], rep


# --- quick units: built light first, then at the full level (jitcache.QUICK) -------------

def test_a_unit_comes_quick_then_full_and_the_run_swaps_the_full_one_in(tmp_path):
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    header = fc.loops[0].header
    jit._ask_region(main, header)
    _wait(lambda: jit._land() or not jit.asked)
    region = jit.regions[(main, header)]
    full_key = jit._unit_key("region", main, region.blocks, region.entry_blocks)
    # It came quick (its meta names its full build) ...
    assert (region.quick_unit or region.unit).meta["full"] == full_key
    if region.upgraded_at is None:      # (the full one may have landed by the same look)
        assert region.unit_key == jit._unit_key("region", main, region.blocks,
                                                region.entry_blocks, quick=True)
        assert jit.upgrading == {full_key: region}
    # ... the server builds the full one once nothing else is asked; a look finds it
    # in the cache and swaps it in, telling the quick code to leave.
    _wait(lambda: jit._land() or region.upgraded_at is not None)
    assert region.unit_key == full_key and "full" not in region.unit.meta
    assert region.address == region.unit.address != region.quick_unit.address
    assert region.buffers[0][region.slots.size + 1] == 1 and not jit.upgrading
    report = jit.report()["regions"][0]
    assert report["upgraded_at"] >= report["arrived_at"]
    jit.finish()


def _only_quick_built(cache, text):
    """(prog, region key): `text`'s loop built quick only, into `cache` and its profile
    (as a server leaves it when its run ends before the full build)."""
    from bril.backend.jit_server import Server
    prog = parse_program(text)
    linked = link(prog)
    key, whole = profile_key(linked), program_key(linked)
    cache.put_marshalled("program", whole, (prog, None, [], None))
    server = Server(cache, key, whole, 2)
    assert server.load_program()
    main = linked.main_index()
    header = server.compiled.function_code(main).loops[0].header
    ukey, _, _ = server.build((main, header), None, quick=True)
    server.upgrades.clear()
    server.note_in_profile()
    return prog, ukey


def test_a_quick_region_told_to_leave_leaves_at_its_loop_header_exactly(tmp_path,
                                                                       monkeypatch):
    # A later run finds only the quick build (its full one never landed): it runs
    # it.  Told to leave from its first entry on (as when the full build lands),
    # it leaves at the loop's header after every round, and the interpreter,
    # entering it again there, ends the run exactly.
    from bril.interpreter import interp
    cache = CodeCache(str(tmp_path))
    prog, ukey = _only_quick_built(cache, LOOP)
    marshal_functions = Jit._marshal_functions

    def told_to_leave(self, region):
        marshal_functions(self, region)
        region.buffers[0][region.slots.size + 1] = 1
    monkeypatch.setattr(Jit, "_marshal_functions", told_to_leave)
    plain = io.StringIO()
    expected = (interp.run(prog, ["40"], out=plain), plain.getvalue())
    jit = Jit(cache=cache, pay_back=12, shared_heap=None)
    out = io.StringIO()
    count = interp.run(prog, ["40"], out=out, jit=jit, cache=cache)
    assert (count, out.getvalue()) == expected == (206, "780\n")
    (region,) = [r for r in jit.all_regions if r.unit_key == ukey]
    assert region.entries > 1 and region.exits.get(region.header, 0) == region.entries - 1
    jit.finish()


def test_a_later_run_takes_the_quick_build_and_has_the_full_one_made(tmp_path):
    # The server of the run that asked for the unit ended before its full build:
    # a later run runs the quick one from the cache, asks its own server for the full
    # one, and swaps it in when it lands.
    from bril.cache.buildlocks import wait_for_builds
    cache = CodeCache(str(tmp_path))
    _, quick_key = _only_quick_built(cache, LOOP)
    full_key = jitcache.load_unit(cache, quick_key).meta["full"]
    plain = _brili(["--no-jit", "-p", "300000"], LOOP, tmp_path)
    run = _brili(["--jit-report", "-", "-p", "300000"], LOOP, tmp_path,
                 BRIL_JIT_PRECOMPILE="1")
    assert run.stdout == plain.stdout and run.stderr.endswith(plain.stderr)
    assert "compiled in 0.000 s" in run.stderr
    wait_for_builds(cache)
    assert jitcache.stored_meta(cache, full_key) is not None
    # In a run long enough, the full build replaces the quick one.
    cache = CodeCache(str(tmp_path / "another"))
    _only_quick_built(cache, LOOP)
    jit, compiled, main, fc = _attached(LOOP, cache)
    region = jit._cached_region(main, fc.loops[0].header)
    assert region.unit.meta.get("full") and jit.upgrading
    _wait(lambda: jit._land() or region.upgraded_at is not None)
    assert "full" not in region.unit.meta and not jit.upgrading
    jit.finish()


def test_a_run_asking_for_a_unit_has_the_server_make_the_variant_the_next_run_promotes_to(
        tmp_path):
    # The next run promotes a function whose unit its profile names at its first
    # call, to the function's jit variant: this run, which entered the function by
    # on-stack replacement, has none to leave it (a rerun of mat-mul generated it:
    # 17 ms), so the server makes it, with the jitx one.
    cache = CodeCache(str(tmp_path))
    jit, compiled, main, fc = _attached(LOOP, cache)
    compiled.cache = cache
    keys = {v: compiled.variant_key(main, v) for v in ("jit", "jitx")}
    assert all(cache.get_marshalled("py", k) is None for k in keys.values())
    jit._ask_region(main, fc.loops[0].header)
    _wait(lambda: jit._land() or not jit.asked)
    jit.finish()
    _wait(lambda: all(cache.get_marshalled("py", k) is not None for k in keys.values()))
