"""Whole-program executables (`bril.backend.program_exe`): a hot run has its
program compiled whole by its compile server, and the next plain `brili` of the
same bytes is that executable -- with the interpreter's output, `-p` count,
errors and exit status -- while every flag that asks for the interpreter's own
work still gets the interpreter.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bril.backend import program_exe
from bril.cache.codecache import CodeCache
from bril.native_runtime import nativert

from corpus import program_text
from helpers import bril_json, run_brili

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None, reason="no C compiler")

DIVIDE = program_text("program_exe/divide")
LONG = "300000"                 # (iterations: hot enough for the JIT's first look)


def _brili(args, program, cache_dir, **env):
    return run_brili(args, program, timeout=300, BRIL_CACHE_DIR=cache_dir, **env)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(cache, JSON text, key): DIVIDE after a hot run that waited for its builds."""
    cache_dir = tmp_path_factory.mktemp("exe-cache")
    program = bril_json(DIVIDE)
    first = _brili(["-p", LONG, "7"], program, cache_dir, BRIL_JIT_PRECOMPILE="wait")
    assert first.returncode == 0, first.stderr
    cache = CodeCache(str(cache_dir))
    key = program_exe.key_of(program.encode(), False)
    assert program_exe.cached(cache, key)
    return cache, program, key


def _same(got, want):
    assert (got.stdout, got.stderr, got.returncode) == (want.stdout, want.stderr, want.returncode)


@pytest.mark.parametrize("args", [
    ["-p", LONG, "7"], [LONG, "0"], ["-p", "12", "-3"],
    ["-p", "abc", "1"], ["1"], ["1", "2", "3"], ["99999999999999999999", "1"]],
    ids=["exact", "div-by-zero", "short", "not-an-int", "arity", "arity3", "overflow"])
def test_the_executable_runs_as_the_interpreter_does(compiled, args):
    cache, program, _ = compiled
    want = _brili(["--no-jit", *args], program, cache.directory)
    _same(_brili(args, program, cache.directory), want)


def _impostor(cache, key):
    """The cached executable replaced by a script that says it ran, and how."""
    cache.put(program_exe.KIND, key, b'#!/bin/sh\necho "the executable:" "$@"; exit 0\n', mode=0o700)


def test_a_plain_run_is_the_executable_and_flags_get_the_interpreter(compiled, tmp_path):
    cache, program, key = compiled
    real = cache.get(program_exe.KIND, key)
    try:
        _impostor(cache, key)
        # -p goes first, the arguments after `--` (a second -p is an argument).
        done = _brili(["-p", "1", "-p"], program, cache.directory)
        assert done.stdout == "the executable: -p -- 1 -p\n"
        text = tmp_path / "divide.bril"
        text.write_text(DIVIDE)
        assert "executable" not in _brili(["-f", str(text), "-p", "5", "1"], program,
                                          cache.directory).stdout   # (other bytes)
        want = _brili(["--no-jit", "-p", "5", "1"], program, cache.directory)
        for args, env in ((["--no-jit"], {}), ([], {"BRIL_JIT": "0"}), (["--no-cache"], {}),
                          ([], {"BRIL_CACHE": "0"}), (["--tier", "cold"], {}),
                          (["--hot", "3"], {}), (["--jit-report", str(tmp_path / "r")], {})):
            _same(_brili([*args, "-p", "5", "1"], program, cache.directory, **env), want)
        # Other bytes are another program, even if they parse the same.
        _same(_brili(["-p", "5", "1"], program + "\n", cache.directory), want)
        # Built by another compiler: never run (and not `cached`: built again).
        cache.put(program_exe.STAMP_KIND, key, b"another compiler")
        assert not program_exe.cached(cache, key)
        _same(_brili(["-p", "5", "1"], program, cache.directory), want)
    finally:
        cache.put(program_exe.KIND, key, real, mode=0o700)
        cache.put(program_exe.STAMP_KIND, key, program_exe.stamp())


def _filled_pipe(data):
    """The reading end of a pipe holding `data`, its writing end closed: standard
    input as `producer | brili` gives it once the producer has finished."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def test_a_warm_run_imports_only_its_first_steps(compiled):
    """Run by the installed script, a warm run becomes the executable having imported
    of ours only `bril.warm_start` and `brili`'s first steps -- also with its input
    in a pipe (`bril2json < p.bril | brili`), already full: the interpreter, which
    a pipe still filling has imported while it waits, would cost it 4-5 ms."""
    cache, program, key = compiled
    real = cache.get(program_exe.KIND, key)
    script = Path(__file__).resolve().parent.parent / "cli" / "bin" / "brili"
    try:
        _impostor(cache, key)
        stdin = _filled_pipe(program.encode())
        try:
            done = subprocess.run([sys.executable, "-X", "importtime", str(script), "-p", "1"],
                                  stdin=stdin, capture_output=True, text=True,
                                  env=dict(os.environ, BRIL_CACHE_DIR=str(cache.directory)))
        finally:
            os.close(stdin)
        assert done.stdout == "the executable: -p -- 1\n"
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:")}
        assert {m for m in imported if m.split(".")[0] == "bril"} == {
            "bril", "bril.cli", "bril.cli.brili_start", "bril.warm_start"}
    finally:
        cache.put(program_exe.KIND, key, real, mode=0o700)


def test_input_in_a_pipe_still_filling_is_awaited_importing_meanwhile():
    """`read_input(meanwhile=...)`: on a pipe with nothing in it yet, `meanwhile` runs
    before the read waits (brili imports its interpreter then); on a full pipe it
    does not; either way the bytes read are all the input."""
    data = b"x" * 200_000           # (more than a pipe holds: read in parts)
    reader = ("import sys\n"
              "from bril.warm_start import read_input\n"
              "def meanwhile():\n"
              "    print('meanwhile', flush=True)\n"
              "got, _ = read_input(meanwhile=meanwhile)\n"
              "print(len(got), got == b'x' * len(got))\n")
    # A pipe written only once the reader has found it empty.
    child = subprocess.Popen([sys.executable, "-c", reader], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=False)
    assert child.stdout.readline() == b"meanwhile\n"
    out, _ = child.communicate(data, timeout=60)
    assert out == b"200000 True\n"
    # A full pipe (a producer that has finished): read at once, all of it.
    small = b"x" * 1000
    stdin = _filled_pipe(small)
    try:
        done = subprocess.run([sys.executable, "-c", reader], stdin=stdin,
                              capture_output=True, timeout=60)
    finally:
        os.close(stdin)
    assert done.stdout == b"1000 True\n"


def test_what_is_compiled_whole(tmp_path):
    from bril.ir.text import parse_program
    prog = parse_program(DIVIDE)
    assert program_exe.eligible(prog)
    assert not program_exe.eligible(dict(prog, imports=[{"path": "x.bril", "functions": []}]))
    big = dict(prog, functions=[dict(prog["functions"][0], instrs=[{"op": "nop"}] * (
        program_exe.MAX_INSTRS + 1))])
    assert not program_exe.eligible(big)
    # Text too big to hold MAX_INSTRS instructions is not even hashed.
    from bril.cli import brili_start
    opts = brili_start.parse_args(["-p"])
    assert brili_start.executable_key(opts, (b"x" * (program_exe.MAX_BYTES + 1), False)) is None
    assert brili_start.executable_key(opts, (b"x" * program_exe.MAX_BYTES, False)) is not None
    # Nor is a program that has more instructions than that, counted before hashing.
    ops = b'{"op": "nop"}, '
    many = b" " * (program_exe.COUNT_BYTES - len(ops) * program_exe.MAX_INSTRS) \
        + ops * (program_exe.MAX_INSTRS + 1)
    assert program_exe.too_big(many, False)
    assert brili_start.executable_key(opts, (many, False)) is None
    fits = b" " * (program_exe.COUNT_BYTES + 1 - len(ops) * program_exe.MAX_INSTRS) \
        + ops * program_exe.MAX_INSTRS
    assert not program_exe.too_big(fits, False)        # (counted, then hashed)
    assert program_exe.too_big(b"x;" * (program_exe.MAX_INSTRS + 1)
                               + b" " * program_exe.COUNT_BYTES, True)
    # A short run (over before the JIT's first look) leaves nothing to build.
    _brili(["-p", "3", "1"], bril_json(DIVIDE), tmp_path, BRIL_JIT_PRECOMPILE="wait")
    assert not os.path.exists(tmp_path / program_exe.KIND)


def test_a_run_long_enough_has_its_program_compiled_whole_hot_loops_or_not(tmp_path):
    # The JIT of a short run comes in late (at a look that finds generated code) and
    # may find nothing hot before the run ends: the run's length alone has the
    # program compiled whole for the next plain run, which else stayed as slow.
    import time
    from bril.backend.jit import Jit
    from bril.backend.jit_policy import EXE_AFTER_RUN
    from bril.ir.text import parse_program
    prog = parse_program(DIVIDE)
    key = program_exe.key_of(bril_json(DIVIDE).encode(), False)
    jit = Jit(cache=CodeCache(str(tmp_path)), pay_back=12, shared_heap=None, exe_key=key)
    jit.source = (prog, None, [], None)
    jit.began = time.perf_counter()
    assert jit._executable_wanted(None) is None         # (a run too short for it)
    jit.began -= EXE_AFTER_RUN
    assert jit._executable_wanted(None) == key


def test_a_run_the_jit_never_came_into_still_has_its_program_compiled_whole(
        tmp_path, monkeypatch):
    # A run in the first tier to its end (pythagorean_triple 300: 357,617
    # instructions) has no JIT to finish it: long enough, its program is compiled
    # whole all the same, and no profile is written (nothing was learned: the next
    # run would attach at once).
    import io
    from bril.backend.jit_deferred import DeferredJit
    from bril.backend.jit_policy import EXE_AFTER_INSTRS
    from bril.interpreter.interp import compile_program
    from bril.ir.text import parse_program
    monkeypatch.setenv("BRIL_JIT_PRECOMPILE", "wait")
    cache = CodeCache(str(tmp_path))
    prog = parse_program(DIVIDE)
    key = program_exe.key_of(bril_json(DIVIDE).encode(), False)
    for long_enough in (False, True):
        compiled, _ = compile_program(prog, out=io.StringIO())
        jit = DeferredJit(cache, shared_heap=None, exe_key=key)
        jit.source = (prog, None, [], None)
        jit.attach(compiled)
        compiled.ns["_N"] = EXE_AFTER_INSTRS - 1 + long_enough     # (instructions run)
        jit.finish()
        assert jit.jit is None
        assert program_exe.cached(cache, key) is long_enough
        assert not os.path.exists(tmp_path / "profile")


def test_a_detached_run_ends_at_once_and_its_request_is_made_by_a_helper(tmp_path):
    # `brili` hands the request for its executable to a helper process it starts
    # (`python -m bril.backend.jit_deferred`), and exits at once: the request cost
    # a 50 ms run 7-13 ms, a fork of the run 2-4 ms.  The helper has none of the
    # run's standard streams (a reader of the output sees it end with the run), and
    # holds a lock from before it starts until it is done: waiting for the builds
    # in flight waits for it too.  It leaves nothing behind.
    from bril.cache.buildlocks import being_built, wait_for_builds
    from bril.ir.text import parse_program
    cache_dir = tmp_path / "cache"
    key = program_exe.key_of(bril_json(DIVIDE).encode(), False)
    request = (str(cache_dir), key, (parse_program(DIVIDE), None, [], None), {},
               None, 2)
    script = f"""
import os
from bril.backend.jit_deferred import _in_a_helper
from bril.cache.buildlocks import being_built
from bril.cache.codecache import CodeCache
cache = CodeCache({str(cache_dir)!r})
print("helped", _in_a_helper({request!r}, cache),
      being_built(cache, f"server-after-run-{{os.getpid()}}", prefix=""))
"""
    env = {k: v for k, v in os.environ.items() if k != "BRIL_JIT_PRECOMPILE"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "helped True True\n", "")
    cache = CodeCache(str(cache_dir))
    wait_for_builds(cache, timeout=300)
    assert program_exe.cached(cache, key)
    assert os.listdir(cache_dir / "locks") == []
    assert not [name for name in os.listdir(cache_dir) if name.startswith(".after-run")]
    assert not being_built(cache, program_exe.build_lock(key))


def test_a_run_that_waits_for_its_builds_starts_no_helper(tmp_path, monkeypatch):
    from bril.backend.jit_deferred import _in_a_helper
    monkeypatch.setenv("BRIL_JIT_PRECOMPILE", "wait")
    assert _in_a_helper((str(tmp_path), "0" * 64, ({}, None, [], None), {}, None, 2),
                        CodeCache(str(tmp_path))) is False
    assert not os.path.exists(tmp_path / "locks") or os.listdir(tmp_path / "locks") == []


def test_the_server_builds_with_the_installed_bril_wherever_brili_starts(tmp_path):
    # Started from a folder holding another `bril` package, the compile server
    # still imports the one brili runs (it was started with `-m`, which puts the
    # working folder first on its path: it built with other sources, under a stamp
    # no run would accept).
    import subprocess
    import sys
    from pathlib import Path
    brili = Path(sys.executable).parent / "brili"
    if not brili.exists():
        pytest.skip("no installed brili script next to this Python")
    (tmp_path / "bril").mkdir()
    (tmp_path / "bril" / "__init__.py").write_text("import os\nos._exit(3)\n")
    cache_dir = tmp_path / "cache"
    program = bril_json(DIVIDE)
    env = dict(os.environ, BRIL_CACHE_DIR=str(cache_dir), BRIL_JIT_PRECOMPILE="wait")
    done = subprocess.run([str(brili), "-p", LONG, "7"], input=program, text=True,
                          capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert program_exe.cached(CodeCache(str(cache_dir)), program_exe.key_of(program.encode(), False))


def test_the_executable_is_compiled_for_the_kinds_the_run_saw(tmp_path):
    # @step's `any` parameters held ints in every call of the hot run (it never
    # flipped): the executable has a variant for them beside the generic code
    # (not the file a build without the kinds gives), and runs exactly on inputs
    # whose calls pass floats.
    flip = program_text("type_profile/flip")
    program = bril_json(flip)
    first = _brili(["-p", LONG, "999999999"], program, tmp_path,
                   BRIL_JIT_PRECOMPILE="wait")
    assert first.returncode == 0, first.stderr
    _assert_specialized_and_exact(flip, program, tmp_path, (
        ["-p", "2000", "999999"], ["-p", "2000", "700"], ["-p", "50", "0"]))


def _assert_specialized_and_exact(text, program, cache_dir, inputs):
    """The executable a run built into cache_dir for `program` (JSON of `text`) is
    not the file a build without a profile gives, and runs exactly as the
    interpreter on each input."""
    from bril.ir.text import parse_program
    cache = CodeCache(str(cache_dir))
    key = program_exe.key_of(program.encode(), False)
    assert program_exe.cached(cache, key)
    plain = CodeCache(str(cache_dir / "plain"))
    program_exe.build(plain, key, parse_program(text))
    assert cache.get(program_exe.KIND, key) != plain.get(program_exe.KIND, key)
    for args in inputs:
        _same(_brili(args, program, cache_dir), _brili(["--no-jit", *args], program, cache_dir))


def test_the_executable_is_compiled_for_what_every_run_saw(tmp_path):
    # A first run passes @step ints, a later one floats (its first tier saw those
    # only: its generated code came from the cache): the program's JIT profile
    # keeps both (and @main's arguments both runs passed alike), and the executable a third run has built is compiled for both
    # (a warm run's first tier sees little: without the earlier runs' kinds, the
    # executable of benchmarks/dynamic/vector-scale ran its float phase generic,
    # 1.9x slower).
    import marshal
    program = bril_json(program_text("type_profile/flip"))
    for args in ([LONG, "999999999"], [LONG, "0"]):
        got = _brili(["-p", *args], program, tmp_path, BRIL_JIT_PRECOMPILE="0")
        assert got.returncode == 0, got.stderr
    profiles = [marshal.loads(p.read_bytes()) for p in (tmp_path / "profile").rglob("*")
                if p.is_file()]
    assert len(profiles) == 1
    kinds = profiles[0]["types"]["functions"]["step"]["kinds"]
    assert {"acc": "int", "x": "int"} in kinds and {"acc": "float", "x": "float"} in kinds
    # @main's arguments: n passed alike by both runs (a value to compile for), flip
    # not (varying: never again).
    main = profiles[0]["types"]["functions"]["main"]
    assert main["values"] == {"n": int(LONG)} and main["varying"] == ["flip"]
    got = _brili(["-p", LONG, "7"], program, tmp_path, BRIL_JIT_PRECOMPILE="wait")
    assert got.returncode == 0, got.stderr
    assert program_exe.cached(CodeCache(str(tmp_path)), program_exe.key_of(program.encode(), False))


def test_the_executable_is_compiled_for_the_values_calls_passed(tmp_path):
    # benchmarks/spec/closest: every call of @closest and @distance passes dim 3.
    # The run's first tier counted it (each function moved to generated code
    # after a call or two), so the executable has a variant with dim a constant
    # (not the file a build without the values gives); exact where dim is another.
    # (600 points: a run of 0.1 s or more, which the JIT comes into -- the profile
    # is written then -- also on a busy machine; at its ARGS' 200, 50 ms, a
    # loaded test run once ended first.)
    import marshal
    from corpus import BENCHMARKS
    text = (BENCHMARKS / "spec" / "closest.bril").read_text()
    program = bril_json(text)
    first = _brili(["-p", "600", "100", "3", "7"], program, tmp_path, BRIL_JIT_PRECOMPILE="wait")
    assert first.returncode == 0, first.stderr
    (profile,) = [marshal.loads(p.read_bytes()) for p in (tmp_path / "profile").rglob("*")
                  if p.is_file()]
    functions = profile["types"]["functions"]
    assert functions["closest"]["values"] == {"count": 600, "dim": 3}
    assert functions["distance"]["values"] == {"dim": 3}
    _assert_specialized_and_exact(text, program, tmp_path, (
        ["-p", "200", "300", "3", "7"], ["-p", "150", "80", "4", "11"], ["-p", "30", "5", "0", "1"]))
