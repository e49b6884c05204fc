"""`brili --jit`: hot loops run as native code, with exactly the interpreter's output,
errors and `-p` count.

Every benchmark (the corpus's and ours) runs under the JIT with a threshold low
enough that its loops are compiled early; stdout and the count must equal the
snapshots.  Unit programs cover what the JIT must get right at its edges:
leaving native code at a branch the loop rarely takes, loops whose direction
changes, errors raised inside native code (after output printed by native
code), memory shared with the interpreter, programs from `brili --trace`
(speculation run natively), and the command line.
"""

import io
import json
import os
import re
import subprocess
import sys

import pytest

from bril.interpreter import interp
from bril.ir.errors import BrilError
from bril.backend.jit import Jit
from bril.ir.text import parse_program

from corpus import (BENCHMARKS, args_of, benchmark_cases, bril_files, case_id, our_programs,
                    program_text)
from dynamic_programs import DYNAMIC_LOOP, DYNAMIC_LOOP_ERRORS, DYNAMIC_MODES, DYNAMIC_UNITS
from helpers import bril_json, run_brili, run_outcome

_ALT_RE = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)

CASES = benchmark_cases()


def run_jit(prog, args=(), hot=3, hot_calls=20, background=False):
    """(stdout, count or None, error message or None, the Jit).  Compiling in the
    foreground makes what runs natively deterministic (results never depend on it)."""
    out = io.StringIO()
    jit = Jit(hot=hot, hot_calls=hot_calls, background=background)
    try:
        count = interp.run(prog, list(args), out=out, jit=jit)
    except BrilError as e:
        return out.getvalue(), None, str(e), jit
    return out.getvalue(), count, None, jit


def native_share(jit):
    """Dynamic instructions run natively."""
    return sum(r["native_instructions"] for r in jit.report()["regions"] if r.get("compiled"))


@pytest.mark.parametrize("path", CASES)
def test_benchmark_matches_snapshots(path):
    """With background compilation (`--jit-background`): the results never depend
    on when native code takes over."""
    prog = parse_program(path.read_text())
    out, count, err, _ = run_jit(prog, args_of(path), background=True)
    assert err is None
    assert out == path.with_suffix(".out").read_text()
    prof = path.with_suffix(".prof").read_text()
    assert f"total_dyn_inst: {count}" == prof.strip()


@pytest.mark.parametrize("path", [p for p in our_programs()
                                  if _ALT_RE.search(p.read_text())],
                         ids=lambda p: case_id(p, BENCHMARKS))
def test_benchmark_on_its_other_input(path):
    prog = parse_program(path.read_text())
    alt = _ALT_RE.search(path.read_text()).group(1).split()
    assert run_jit(prog, alt)[:3] == run_outcome(prog, alt)


def test_long_loops_really_run_natively():
    """Not a snapshot: most of a loop program's work happens in native code."""
    path = BENCHMARKS / "loops" / "prime-count.bril"
    prog = parse_program(path.read_text())
    out, count, err, jit = run_jit(prog, args_of(path), hot=50)
    assert err is None and out == path.with_suffix(".out").read_text()
    assert native_share(jit) > 0.9 * count


def check(text, args=(), hot=3, native=True):
    """The JIT run equals the plain run; returns the JIT's report."""
    prog = parse_program(text)
    got = run_jit(prog, args, hot)
    assert got[:3] == run_outcome(prog, args)
    report = got[3].report()
    if native:
        assert native_share(got[3]) > 0, report
    return got, report


ALTERNATING = program_text("jit/alternating")


@pytest.mark.parametrize("args", [["300", "7"], ["1000", "250"], ["50", "1"], ["0", "3"]])
def test_loops_whose_direction_changes(args):
    check(ALTERNATING, args, native=args[0] != "0")


RETURN_INSIDE = program_text("jit/return_inside")


def test_loops_with_returns_and_calls():
    check(RETURN_INSIDE, ["200"])


# Leaving the loop, native code hands back only what the interpreter may read:
# s (live at .done and .odd), not t or u (written there before any read), and
# x, which .odd reads though the loop assigns it only now and then.
EXITS_WRITE_BACK_WHAT_IS_READ = program_text("jit/exits_write_back_what_is_read")


@pytest.mark.parametrize("args", [["100"], ["10"], ["0"]])
def test_exits_write_back_what_is_read(args):
    check(EXITS_WRITE_BACK_WHAT_IS_READ, args, hot=2, native=args != ["0"])


# message -> a loop that fails so (test/programs/jit/error_*.bril)
ERRORS = {
    "division by zero": program_text("jit/error_division_by_zero"),
    "Uninitialized heap location 0 and/or illegal offset 20":
        program_text("jit/error_offset_past_the_end"),
    "Pointer q points to uninitialized data": program_text("jit/error_uninitialized_load"),
    "value 1114112 cannot be converted to char": program_text("jit/error_char_out_of_range"),
}


@pytest.mark.parametrize("message", ERRORS)
def test_errors_inside_native_code(message):
    (out, count, err, jit), report = check(ERRORS[message], ["20"], native=False)
    assert err == message
    if message != "value 1114112 cannot be converted to char":
        assert out                              # printed before the error, in order
    assert [r["error"] for r in report["regions"] if r.get("compiled")] == [message], report


SHARED_HEAP = program_text("jit/shared_heap")


def test_native_code_and_interpreter_share_the_heap():
    check(SHARED_HEAP, ["40"])


def test_pointer_loops_are_native_from_the_first_run(tmp_path):
    # Native pointer code needs the heap in the run-time library's table from the
    # start of the run (pointers cannot move later): under the JIT a program that
    # allocates has it so from its first run, once the library is built.
    prog = bril_json(SHARED_HEAP)
    plain = run_brili(["--no-jit", "-p", "40"], prog)
    for flags in (["--hot", "1"], ["--hot", "1"], []):
        done = run_brili(["--jit", *flags, "--jit-report", "-", "-p", "40"], prog,
                         BRIL_CACHE_DIR=tmp_path, BRIL_JIT_PRECOMPILE="0")
        assert done.stdout == plain.stdout
        assert done.stderr.endswith(plain.stderr)
        assert "pointers need the shared heap" not in done.stderr
        if flags:
            assert "compiled in" in done.stderr, done.stderr


def test_leaks_and_double_frees_are_reported_as_usual():
    leak = SHARED_HEAP.replace("free p; free fs;", "free fs;")
    (_, _, err, _), _ = check(leak, ["40"])
    assert err == "Some memory locations have not been freed by end of execution."
    double = SHARED_HEAP.replace("free p; free fs;", "free p; free fs; free p;")
    (_, _, err, _), _ = check(double, ["40"])
    assert err.startswith("Tried to free illegal memory location base: 0")


def test_traced_programs_run_their_speculation_natively():
    from bril.tracing.tracer import trace_program
    # (phase-branch changes phase after the recording budget: no trace there)
    path = BENCHMARKS / "spec" / "biased-branch.bril"
    prog = parse_program(path.read_text())
    args = args_of(path)
    traced = trace_program(prog, args, out=io.StringIO()).program
    (out, count, err, jit), report = check(json.dumps(traced) and _text(traced), args)
    assert out == path.with_suffix(".out").read_text()
    spec_blocks = [r for r in report["regions"] if r.get("compiled")
                   and any(".trace" in b for b in r["blocks"])]
    assert spec_blocks, report


def _text(prog):
    from bril.ir.printer import format_program
    return format_program(prog)


def test_programs_beyond_native_code_are_interpreted():
    text = program_text("jit/two_types_for_one_variable")
    (_, _, _, jit), report = check(text, native=False)
    # Native code is tried where a loop gets hot, and given up with the reason.
    assert report["regions"] and all(not r["compiled"] and "two types" in r["dropped"]
                                     for r in report["regions"])


RECURSIVE = program_text("jit/recursive")


def test_hot_functions_run_natively_whole():
    prog = parse_program(RECURSIVE)
    # Loops stay interpreted (hot=10**6); functions called 20 times become native.
    got = run_jit(prog, ["18"], hot=10**6)
    assert got[:3] == run_outcome(prog, ["18"])
    functions = {f["function"]: f for f in got[3].report()["functions"]}
    assert set(functions) == {"fib", "make", "show"}, functions
    assert all(f["compiled"] and f["calls"] > 0 for f in functions.values())
    assert functions["fib"]["native_instructions"] > 0.9 * got[1]


def test_error_deep_in_a_native_function():
    text = RECURSIVE.replace("  ret n;\n.rec:", "  z: int = const 0;\n  q: int = div n z;\n"
                             "  ret q;\n.rec:")
    prog = parse_program(text)
    got = run_jit(prog, ["18"], hot=10**6)
    assert got[2] == "division by zero"
    assert got[:3] == run_outcome(prog, ["18"])


# --- the command line --------------------------------------------------------------------

def brili(args, text):
    """`brili ARGS` on the program of Bril text `text`."""
    return run_brili(args, bril_json(text))


def test_cli_jit_profile_and_report(tmp_path):
    report = tmp_path / "r.json"
    done = brili(["--jit", "--hot", "5", "-p", "--jit-report",
                  str(report), "300", "7"], ALTERNATING)
    plain = brili(["-p", "300", "7"], ALTERNATING)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (plain.stdout, plain.stderr)
    rep = json.loads(report.read_text())
    (region,) = [r for r in rep["regions"] if r["compiled"]]
    assert region["function"] == "main" and region["header"] == ".head"
    assert region["entries"] >= 1 and region["native_instructions"] > 0
    assert region["compile_seconds"] > 0 and ".done" in region["exits"]
    text = brili(["--jit", "--hot", "5", "--jit-report", "-", "300", "7"],
                 ALTERNATING)
    assert "@main .head:" in text.stderr and "compiled in" in text.stderr


def test_cli_background_compilation_gives_the_same_results():
    for args in (["300", "7"], ["20000", "3"]):
        done = brili(["--jit-background", "--jit", "--hot", "5", "-p"] + args, ALTERNATING)
        plain = brili(["-p"] + args, ALTERNATING)
        assert done.returncode == 0, done.stderr
        assert (done.stdout, done.stderr) == (plain.stdout, plain.stderr)


def test_cli_error_in_native_code_exits_2():
    done = brili(["--jit", "--hot", "2", "20"], ERRORS["division by zero"])
    assert done.returncode == 2
    assert done.stderr == "error: division by zero\n"
    plain = brili(["20"], ERRORS["division by zero"])
    assert done.stdout == plain.stdout


CHAR_PRINTS = program_text("jit/char_prints")


@pytest.mark.parametrize("c0", ["é", "\ud800", "\ud7fa"],
                         ids=["utf8", "lone-surrogate", "hangul-0xed"])
def test_cli_native_output_is_the_interpreters_byte_for_byte(c0):
    # Native code's output goes to stdout's bytes as they are, in order with the
    # interpreter's prints; output with a byte 0xED (a lone surrogate begins so, is
    # replaced as the interpreter's stream replaces it) goes as text.
    prog = parse_program(CHAR_PRINTS)
    for instr in prog["functions"][0]["instrs"]:
        if instr.get("dest") == "c0":
            instr["value"] = c0
    runs = [run_brili(flags + ["5"], json.dumps(prog).encode())     # (bytes out)
            for flags in ([], ["--jit", "--hot", "1", "--jit-report", "-"])]
    assert runs[0].returncode == runs[1].returncode == 0, runs[1].stderr
    assert runs[1].stdout == runs[0].stdout and "0 \u4e16 ".encode() in runs[0].stdout
    assert b"compiled in" in runs[1].stderr


def test_cli_refuses_jit_with_trace(tmp_path):
    done = brili(["--jit", "--trace", str(tmp_path / "t.json")], ALTERNATING)
    assert done.returncode == 2
    assert done.stderr == "error: --jit and --trace cannot be used together\n"
    done = brili(["--no-jit", "--jit-report", "-"], ALTERNATING)
    assert done.returncode == 2 and "need the JIT" in done.stderr


# --- native code kept across runs (the code cache) ---------------------------------------

PROFILE_PROGRAM = program_text("jit/profile_program")


def cached_run(text, args, cache_dir, **env):
    proc = run_brili(["--jit", "--jit-report", "-", "-p", *args], bril_json(text), timeout=300,
                     BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="wait", **env)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_second_run_loads_native_code_from_the_cache(tmp_path):
    plain = brili(["--no-jit", "-p", "2000000"], PROFILE_PROGRAM)
    # The first run asks its compile server for the hot loop (native later in this
    # run, or built after it) ...
    first = cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    assert "compile server" in first.stderr
    # ... and the next loads it from the cache at its first arrival.
    second = cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    for proc in (first, second):
        assert proc.stdout == plain.stdout
        assert proc.stderr.splitlines()[-1] == plain.stderr.strip()
    assert "compiled in 0.000 s" in second.stderr       # loaded, not compiled
    # Another input: the same native code, and the same results as without it.
    other = cached_run(PROFILE_PROGRAM, ["777"], tmp_path)
    assert other.stdout == brili(["777"], PROFILE_PROGRAM).stdout


def test_a_region_of_main_takes_the_run_s_arguments_as_constants(tmp_path):
    # @main's loop computes modulo its argument m (fixed for the run): its region is
    # compiled with m a constant (not n, its bound), under a key naming m's value --
    # a run with another m builds its own, a run with the same loads it -- and every
    # run prints what the interpreter prints.
    from bril.analysis.invariants import main_constants
    from bril.ir.linker import link
    text = program_text("main_modulus")
    assert main_constants(link(parse_program(text)), {"n": 50, "m": 1009}) == {"m": 1009}
    for args, loaded in ((["300000", "1009"], False), (["300000", "1013"], False),
                         (["200000", "1009"], True)):
        got = run_brili(["--jit", "--hot", "1", "--jit-report", "-", "-p", *args],
                        bril_json(text), timeout=300, BRIL_CACHE_DIR=tmp_path)
        plain = brili(["--no-jit", "-p", *args], text)
        assert got.returncode == 0, got.stderr
        assert got.stdout == plain.stdout and got.stderr.splitlines()[-1] == plain.stderr.strip()
        assert "@main .loop" in got.stderr
        assert ("compiled in 0.000 s" in got.stderr) == loaded, (args, got.stderr)


def _loop_regions(stderr, where="@main .loop"):
    return [line for line in stderr.splitlines() if line.startswith(f"  {where}:")]


def test_a_loop_region_assumes_the_kinds_of_each_phase(tmp_path):
    """dynamic/sum-check's loop holds ints, then floats in its `any` variables: a
    region assuming each phase's kinds (their tags constants LLVM folds, checked on
    the edges into the header: the one that fails leaves the int region), entered as
    its phase comes; the next run loads both.  Output and -p: the interpreter's."""
    path = BENCHMARKS / "dynamic" / "sum-check.bril"
    text, args = path.read_text(), args_of(path)
    plain = brili(["--no-jit", "-p", *args], text)
    for loaded in (False, True):
        got = run_brili(["--jit", "--hot", "50", "--jit-report", "-", "-p", *args],
                        bril_json(text), timeout=300, BRIL_CACHE_DIR=tmp_path)
        assert got.returncode == 0, got.stderr
        assert got.stdout == plain.stdout
        assert got.stderr.splitlines()[-1] == plain.stderr.strip()
        lines = _loop_regions(got.stderr)
        assert len(lines) == 2, got.stderr
        assert {"int", "float"} == {
            k for line in lines for k in ("int", "float")
            if f"assuming .loop: acc {k}, step {k}, x {k}," in line}, got.stderr
        assert all(("compiled in 0.000 s" in line) == loaded for line in lines)
        # (both ran natively: the int region until the phase changed, then the other)
        assert all(" 0 native instrs" not in line for line in lines)


def test_a_loop_whose_kinds_change_twice_gets_a_region_assuming_none(tmp_path):
    """v holds an int, a float, then a bool: regions for the first two kinds, then
    one assuming none (no third recompiling); a later run loads all three."""
    text = program_text("jit/three_kinds")
    plain = brili(["--no-jit", "-p", "3000"], text)
    for loaded in (False, True):
        got = run_brili(["--jit", "--hot", "50", "--jit-report", "-", "-p", "3000"],
                        bril_json(text), timeout=300, BRIL_CACHE_DIR=tmp_path)
        assert got.stdout == plain.stdout == "false 1000\n"
        assert got.stderr.splitlines()[-1] == plain.stderr.strip()
        lines = _loop_regions(got.stderr)
        assert [("assuming .loop: v int," in line, "assuming .loop: v float," in line,
                 "assuming" not in line) for line in lines] == \
            [(True, False, False), (False, True, False), (False, False, True)], got.stderr
    # In process, compiling at the 3rd arrival: the same, exactly.
    out, count, error, jit = run_jit(parse_program(text), ["300"])
    want = interp.run_capture(parse_program(text), ["300"])
    assert (out, count, error) == (want[0], want[1], None)
    assert [r["kinds"] for r in jit.report()["regions"]] == \
        [{".loop": {"v": "int"}}, {".loop": {"v": "float"}}, {}]


def test_a_regions_unit_key_names_the_kinds_it_assumes():
    from bril.backend.jitcache import RunKeys, region_kinds
    from bril.ir.linker import link
    keys = RunKeys(link(parse_program(program_text("jit/three_kinds"))), 2, {"n": 3000})
    kinds = {3: {"v": "int"}, 9: {"w": "float"}}
    # (only the headers among the entries; the profile's JSON form reads the same)
    assert region_kinds(kinds, [3, 5]) == ((3, (("v", "int"),)),)
    assert region_kinds([[3, [["v", "int"]]]], [3]) == region_kinds(kinds, [3])
    assert region_kinds(kinds, [5]) is None
    plain = keys.key("region", 0, [3, 4], [3])
    assert keys.key("region", 0, [3, 4], [3], kinds) != plain
    assert keys.key("region", 0, [3, 4], [3], {9: {"w": "float"}}) == plain
    assert keys.key("region", 0, [3, 4], [3], {3: {"v": "float"}}) != \
        keys.key("region", 0, [3, 4], [3], kinds)


def deferred_run(text, args, cache=None):
    """A run as `brili --jit` makes it (no --hot, no report): (stdout, count, the
    DeferredJit)."""
    from bril.backend.jit_deferred import DeferredJit
    jit = DeferredJit(cache, background=False, shared_heap=None)
    out = io.StringIO()
    count = interp.run(parse_program(text), list(args), out=out, jit=jit, cache=cache)
    return out.getvalue(), count, jit


def test_a_short_jit_run_never_starts_the_jit(tmp_path):
    # The JIT would come in at its sampler's looks (made every 30 s here, so that
    # the run is surely over before the first): until then, nothing of it is imported.
    # (A cache of its own: a profile of this program, left by another test, would
    # bring the JIT in at once.)
    code = ("import sys\n"
            "from bril.backend import jit_policy\n"
            "jit_policy.SAMPLE_INTERVAL = 30\n"
            "from bril.cli import brili\n"
            "brili.os._exit = sys.exit\n"     # (brili leaves with os._exit after --jit)
            "try:\n    brili.main(['--jit', '-p', '10'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('bril.backend.jit', 'bril.backend.jitcache', 'llvmlite') "
            "if m in sys.modules), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-P", "-c", code], input=json.dumps(
        parse_program(PROFILE_PROGRAM)).encode(), capture_output=True, timeout=120,
        env=dict(os.environ, BRIL_CACHE_DIR=str(tmp_path)))
    assert proc.stdout == b"90\n"
    assert proc.stderr == b"total_dyn_inst: 96\n[]\n"


def test_a_run_that_stays_in_the_cold_tier_never_brings_the_jit_in(tmp_path):
    # A loop nest 300 deep, each loop run once: the cold tier runs it all, and the
    # sampler's looks (every millisecond here) find no generated code -- nothing the
    # JIT could charge or compile -- so none of it is imported.
    depth = 300
    instrs = [{"op": "const", "dest": "one", "type": "int", "value": 1}]
    for d in range(depth):
        instrs += [{"op": "const", "dest": f"i{d}", "type": "int", "value": 0},
                   {"label": f"h{d}"},
                   {"op": "lt", "dest": f"c{d}", "type": "bool", "args": [f"i{d}", "one"]},
                   {"op": "br", "args": [f"c{d}"], "labels": [f"b{d}", f"e{d}"]},
                   {"label": f"b{d}"}]
    for d in reversed(range(depth)):
        instrs += [{"op": "add", "dest": f"i{d}", "type": "int", "args": [f"i{d}", "one"]},
                   {"op": "jmp", "labels": [f"h{d}"]}, {"label": f"e{d}"}]
    instrs.append({"op": "print", "args": ["one"]})
    program = {"functions": [{"name": "main", "instrs": instrs}]}
    code = ("import sys, time\n"
            "from bril.backend import jit_policy\n"
            "jit_policy.SAMPLE_INTERVAL = 0.001\n"
            "from bril.cli import brili\n"
            "brili.os._exit = sys.exit\n"
            "start = time.perf_counter()\n"
            "try:\n    brili.main(['-p'])\nexcept SystemExit:\n    pass\n"
            "print(time.perf_counter() - start > 0.005, 'bril.backend.jit' in sys.modules, "
            "file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-P", "-c", code], input=json.dumps(program).encode(),
                          capture_output=True, timeout=120,
                          env=dict(os.environ, BRIL_CACHE_DIR=str(tmp_path)))
    assert proc.stdout == b"1\n"
    assert proc.stderr == b"total_dyn_inst: %d\nTrue False\n" % (7 * depth + 2)


def test_the_jit_comes_in_only_once_generated_code_ran_early_hot(tmp_path):
    # Looks every millisecond find the run in generated code (its loop, promoted at
    # once), but for less than EARLY_HOT (made 60 s here): nothing of the JIT is
    # imported -- not for the run, not after it.
    code = ("import sys, time\n"
            "from bril.backend import jit_policy\n"
            "jit_policy.SAMPLE_INTERVAL = 0.001\n"
            "jit_policy.EARLY_HOT = 60.0\n"
            "from bril.cli import brili\n"
            "brili.os._exit = sys.exit\n"
            "start = time.perf_counter()\n"
            "try:\n    brili.main(['-p', '300000'])\nexcept SystemExit:\n    pass\n"
            "print(time.perf_counter() - start > 0.02, 'bril.backend.jit' in sys.modules, "
            "file=sys.stderr)\n")
    expected = run_outcome(parse_program(PROFILE_PROGRAM), ["300000"])
    proc = subprocess.run([sys.executable, "-P", "-c", code], input=json.dumps(
        parse_program(PROFILE_PROGRAM)).encode(), capture_output=True, timeout=120,
        env=dict(os.environ, BRIL_CACHE_DIR=str(tmp_path), BRIL_JIT_PRECOMPILE="0"))
    assert proc.stdout.decode() == expected[0]
    assert proc.stderr.decode() == f"total_dyn_inst: {expected[1]}\nTrue False\n"


def test_the_jit_attaches_late_to_a_run_that_lasts(monkeypatch):
    from bril.backend import jit_policy
    monkeypatch.setattr(jit_policy, "SAMPLE_INTERVAL", 0.0)
    got = deferred_run(PROFILE_PROGRAM, ["300000"])
    assert got[:2] == run_outcome(parse_program(PROFILE_PROGRAM), ["300000"])[:2]
    late = got[2].jit
    assert late is not None and late.hot_seconds       # attached, and sampling
    # (functions promoted before it came are known to it)
    assert late.fast is late.compiled.jit_promoted


def test_the_sampler_charges_the_time_that_passed(monkeypatch):
    # Looks come late (the sampler waits for the GIL): each is charged the time
    # since the last, so hot seconds follow the clock (charged an interval a look,
    # a loop turned hot about six times later than PAY_BACK says).  Here the
    # sampler's clock moves 20 ms between looks, four intervals.
    import time
    import types
    from bril.backend import jit, jit_policy
    import sys
    ticks = [0]

    def perf_counter():
        # (moves at the sampler's looks only: other readers of the clock, the run's
        # end among them, must not make a look look late)
        if sys._getframe(1).f_code.co_name == "_sample_loop":
            ticks[0] += 1
        return 0.02 * ticks[0]
    clock = types.SimpleNamespace(
        sleep=lambda s: time.sleep(0.001), perf_counter_ns=time.perf_counter_ns,
        perf_counter=perf_counter)
    monkeypatch.setattr(jit, "time", clock)
    monkeypatch.setattr(jit_policy, "PAY_BACK", 10 ** 6)     # (nothing compiled: only counted)
    monkeypatch.setattr(jit_policy, "SAMPLE_INTERVAL", 0.0)
    looks = []
    sample = jit.Jit._sample
    monkeypatch.setattr(jit.Jit, "_sample", lambda self, frame, elapsed=None:
                        looks.append(elapsed) or sample(self, frame, elapsed))
    got = deferred_run(PROFILE_PROGRAM, ["1500000"])
    assert got[:2] == run_outcome(parse_program(PROFILE_PROGRAM), ["1500000"])[:2]
    late = got[2].jit
    # The first look also charges what the looks before the JIT came in saw of the run
    # in generated code (at least jit_policy.EARLY_HOT: `jit_deferred`, on the real
    # clock); each later one the 20 ms since the look before.
    first = looks[0]
    assert first >= jit_policy.EARLY_HOT + 0.02 - 1e-9
    later = [e for e in looks if e != first]
    assert later and all(abs(e - 0.02) < 1e-9 for e in later)
    # (a look that finds the run outside generated code -- in the cold tier, at its
    # start or end -- charges nothing)
    main = late.compiled.linked.main_index()
    whole_looks = (late.hot_seconds[main] - first) / 0.02
    assert 1 <= round(whole_looks) <= len(later) and abs(whole_looks - round(whole_looks)) < 1e-6


def test_the_sampler_looks_with_a_short_switch_interval_and_restores_it_after(monkeypatch):
    # At Python's 5 ms switch interval each look came 5-10 ms late: the sampler's
    # thread gets the GIL within jit_policy.LOOK_SWITCH, before the JIT comes in and
    # after, and the interval is Python's again once the thread has stopped.
    import time
    from bril.backend import jit, jit_deferred, jit_policy
    monkeypatch.setattr(jit_policy, "LOOK_SWITCH", 0.0007)
    before = sys.getswitchinterval()
    deferred_looks, jit_looks = [], []
    in_code = jit_deferred._in_generated_code
    monkeypatch.setattr(jit_deferred, "_in_generated_code", lambda frame, *a: deferred_looks.append(
        sys.getswitchinterval()) or in_code(frame, *a))
    sample = jit.Jit._sample
    monkeypatch.setattr(jit.Jit, "_sample", lambda self, frame, elapsed=None: jit_looks.append(
        sys.getswitchinterval()) or sample(self, frame, elapsed))
    got = deferred_run(PROFILE_PROGRAM, ["1500000"])
    assert got[:2] == run_outcome(parse_program(PROFILE_PROGRAM), ["1500000"])[:2]
    assert got[2].jit is not None and deferred_looks and jit_looks
    assert all(interval <= 0.0007 for interval in deferred_looks + jit_looks)
    deadline = time.monotonic() + 10        # (the thread stops at its next look)
    while sys.getswitchinterval() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sys.getswitchinterval() == before


def test_switch_intervals_held_by_overlapping_samplers_come_back_to_pythons():
    # Two runs in one process: their samplers' short intervals overlap and end in
    # any order.  The interval is the shortest wanted while any is held, and
    # Python's own once none is (each restoring what it found clobbered it: the
    # later one left the first's interval for good).
    from bril.backend.jit_policy import ShortSwitches
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        for first, second in ((0.001, 0.0002), (0.0002, 0.001)):
            a, b = ShortSwitches(first), ShortSwitches(second)
            a.__enter__()
            assert sys.getswitchinterval() == pytest.approx(first)
            b.__enter__()
            assert sys.getswitchinterval() == pytest.approx(0.0002)
            a.__exit__(None, None, None)        # (the first to come leaves first)
            assert sys.getswitchinterval() == pytest.approx(second)
            b.__exit__(None, None, None)
            assert sys.getswitchinterval() == pytest.approx(0.005)
    finally:
        sys.setswitchinterval(before)


LIGHT_CALLEE = program_text("jit/light_callee")


def test_native_code_doing_too_little_per_entry_goes_back_to_the_interpreter():
    # Each entry into @f's native code from the interpreter runs about 40
    # instructions, less than crossing over costs (MIN_WORK_PER_ENTRY, _PER_CALL):
    # dropped after ENTRY_SAMPLE entries.  Its loop's region first, then @main's
    # loop, which takes the calls in, runs natively instead ...
    from bril.backend.jit import ENTRY_SAMPLE
    prog = parse_program(LIGHT_CALLEE)

    def units(hot, hot_calls, args):
        out, count, error, jit = run_jit(prog, args, hot=hot, hot_calls=hot_calls)
        assert (out, count, error) == run_outcome(prog, args)[:3]
        report = jit.report()
        return count, {(u["function"], u.get("header")): u
                       for u in report["regions"] + report["functions"]}
    count, got = units(300, 10 ** 9, ["3000", "6"])
    region = got[("f", ".h")]
    assert region["entries"] == ENTRY_SAMPLE and "instructions per entry" in region["dropped"]
    outer = got[("main", ".loop")]
    assert outer["compiled"] and outer["native_instructions"] > 0.5 * count
    # ... the function compiled whole, its calls from the interpreter likewise ...
    count, got = units(10 ** 9, 20, ["3000", "6"])
    call = got[("f", None)]
    assert call["calls"] == ENTRY_SAMPLE and "instructions per call" in call["dropped"]
    # ... and with more work at each entry, @f's native code is kept.
    count, got = units(300, 10 ** 9, ["300", "400"])
    assert got[("f", ".h")]["dropped"] is None and got[("f", ".h")]["entries"] > ENTRY_SAMPLE
    count, got = units(10 ** 9, 20, ["300", "400"])
    assert got[("f", None)]["dropped"] is None and got[("f", None)]["calls"] > ENTRY_SAMPLE


ACKERMANN = program_text("jit/ackermann")


def _attached_quiet(text):
    """(Jit, CompiledProgram, @main's index): a JIT attached to the program of `text`,
    without a sampler thread or a cache, compiling nothing by itself."""
    compiled, main = interp.compile_program(parse_program(text), out=io.StringIO())
    jit = Jit(cache=None, pay_back=10 ** 9, shared_heap=None)
    jit.attach(compiled, sampler_thread=0)
    return jit, compiled, main


def test_a_recursion_s_own_leaf_calls_do_not_make_its_native_code_light():
    # A recursive function's unit lands (from a compile server) while its recursion
    # runs interpreted, and the frames still interpreted unwind through leaf calls
    # of a few instructions each into its native code.  Those do not decide whether
    # calls are worth crossing over for (ackermann's first 64 were all leaves: its
    # native code was dropped and the run went on interpreted); calls from
    # elsewhere do.
    from bril.backend.jit import ENTRY_SAMPLE
    jit, compiled, main = _attached_quiet(ACKERMANN)
    ack = 1 - main
    native = jit.calls[ack] = jit._compile_call(ack)
    stand_in = jit._native_stand_in(ack, native, lambda *args: pytest.fail("interpreted"))

    def caller(index, name):
        """A function calling the stand-in, as generated code of function `index`."""
        ns = {"stand_in": stand_in}
        exec(compile(f"def F{index}_{name}__jit(m, n):\n    return stand_in(m, n)\n",
                     f"<bril @{name} jit>", "exec"), ns)
        return ns[f"F{index}_{name}__jit"]
    from_ack, from_main = caller(ack, "ack"), caller(main, "main")
    for n in range(2 * ENTRY_SAMPLE):
        assert from_ack(0, n) == n + 1          # (a leaf: 6 instructions)
    assert native.dropped is None and not native.light
    assert from_ack(2, 3) == 9 and native.native_instrs > 2 * ENTRY_SAMPLE * 6
    for n in range(ENTRY_SAMPLE):
        assert from_main(0, n) == n + 1
    assert native.light and native.dropped == "6 instructions per call"
    jit.finish()


def test_the_sampler_charges_the_loop_around_one_that_does_too_little():
    # A look inside a loop whose region was dropped for doing too little per entry
    # charges the loop around it -- here in the caller -- so that a unit taking
    # the light one in is asked for.
    import types
    from bril.backend.jit import LoopRegion
    jit, compiled, main = _attached_quiet(LIGHT_CALLEE)
    f = 1 - main
    compiled.jit_code_loops.update({"F%d_f__jit" % f: [(3, 9, 1)],
                                    "F%d_main__jit" % main: [(4, 20, 1)]})

    def frame(index, name, line, back):
        code = types.SimpleNamespace(co_name="F%d_%s__jit" % (index, name),
                                     co_filename="<bril @%s jit>" % name)
        return types.SimpleNamespace(f_code=code, f_lineno=line, f_back=back)
    look = frame(f, "f", 5, frame(main, "main", 10, None))
    jit._sample(look, 0.01)
    assert jit.hot_seconds[(f, 1)] == 0.01 and not jit.hot_seconds[(main, 1)]
    light = LoopRegion(f, None, 1, {1, 2}, {1})
    light.light = True
    jit.regions[(f, 1)] = light
    jit._sample(look, 0.01)
    assert jit.hot_seconds[(f, 1)] == 0.01 and jit.hot_seconds[(main, 1)] == 0.01


def test_the_sampler_compiles_with_short_gil_switches(monkeypatch):
    # Compiling on the sampler's thread drops the GIL at every call into LLVM; at
    # the default 5 ms switch interval each return waited for the interpreter:
    # 1.58 s on the clock for 0.10 s of work.  Restored once compiled.
    import sys
    from bril.backend import jit, jit_policy
    monkeypatch.setattr(jit_policy, "PAY_BACK", 1e-9)     # (sampled, hot at the first look)
    monkeypatch.setattr(jit_policy, "SAMPLE_INTERVAL", 0.0)
    seen = []
    compile_region = jit.Jit._compile
    monkeypatch.setattr(jit.Jit, "_compile", lambda self, *a: (
        seen.append(sys.getswitchinterval()), compile_region(self, *a))[1])
    before = sys.getswitchinterval()
    got = deferred_run(PROFILE_PROGRAM, ["1500000"])
    assert got[:2] == run_outcome(parse_program(PROFILE_PROGRAM), ["1500000"])[:2]
    assert seen and all(abs(s - jit_policy.SAMPLER_SWITCH) < 1e-6 for s in seen)
    assert sys.getswitchinterval() == before


def test_a_profile_starts_the_jit_at_once(tmp_path, monkeypatch):
    from bril.cache.codecache import CodeCache
    monkeypatch.setenv("BRIL_JIT_PRECOMPILE", "wait")  # (units built after run 1)
    cache = CodeCache(str(tmp_path))
    plain = run_outcome(parse_program(PROFILE_PROGRAM), ["2000000"])[:2]
    first = deferred_run(PROFILE_PROGRAM, ["2000000"], cache)
    second = deferred_run(PROFILE_PROGRAM, ["2000000"], cache)
    assert first[:2] == second[:2] == plain
    report = second[2].report()
    assert report["cache_hits"] and any(r.get("entries") for r in report["regions"]), report


def test_an_edited_program_never_runs_stale_native_code(tmp_path):
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    edited = PROFILE_PROGRAM.replace("two: int = const 2;", "two: int = const 3;")
    got = cached_run(edited, ["2000000"], tmp_path)
    assert got.stdout == brili(["2000000"], edited).stdout
    assert "compiled in 0.000 s" not in got.stderr


def test_a_corrupt_unit_is_rebuilt_not_run(tmp_path):
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    units = [p for p in (tmp_path / "unit").rglob("*") if p.is_file()]
    assert units
    for p in units:
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))
    got = cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    assert got.stdout == brili(["2000000"], PROFILE_PROGRAM).stdout


def _profile(cache_dir, text):
    from bril.cache.codecache import CodeCache
    from bril.backend.jitprofile import load_profile, profile_key
    from bril.ir.linker import link
    linked = link(parse_program(text))
    cache = CodeCache(str(cache_dir))
    return cache, profile_key(linked), load_profile(cache, profile_key(linked), linked), linked


# Iterations of PROFILE_PROGRAM that run hot long enough to be compiled after the
# run, and too short to be compiled in it where compiling must pay for itself
# (BRIL_JIT_SERVER=0: no compile server, as on one core).
SHORT_N = "300000"


def _forget_units(cache_dir, text, **changes):
    """Remove the units from the cache and change the program's profile: its loops
    were hot, but not so long that the JIT would compile them itself next run."""
    from bril.backend.jitprofile import store_profile
    units = [p for p in (cache_dir / "unit").rglob("*") if p.is_file()]
    assert units
    for p in units:
        p.unlink()
    cache, key, profile, linked = _profile(cache_dir, text)
    hot = {what: 0.01 for what in profile["hot"]}
    store_profile(cache, key, dict(profile, hot=hot, **changes), linked)
    return profile


def test_units_that_leave_the_cache_are_built_again(tmp_path):
    # (evicted, or made by another compiler: their keys differ)
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    assert "compiled in 0.000 s" in cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path).stderr
    _forget_units(tmp_path, PROFILE_PROGRAM)
    # This run interprets (the units are gone) and has them built again after it
    # (a run short of paying for a compile of its own: 2,000,000 iterations, 0.6 s,
    # are about what the sampler charges before it compiles) ...
    missed = cached_run(PROFILE_PROGRAM, [SHORT_N], tmp_path, BRIL_JIT_SERVER="0")
    assert "compiled in" not in missed.stderr
    # ... for the next, which loads them.
    again = cached_run(PROFILE_PROGRAM, [SHORT_N], tmp_path)
    assert "compiled in 0.000 s" in again.stderr
    assert again.stdout == missed.stdout == brili([SHORT_N], PROFILE_PROGRAM).stdout


def test_what_failed_to_build_is_tried_again_by_another_compiler(tmp_path):
    from bril.backend.jitcache import tried_here
    from bril.native_runtime.nativert import native_digest
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    hot = list(_profile(tmp_path, PROFILE_PROGRAM)[2]["hot"])
    # As if an older compiler had tried everything and failed.
    _forget_units(tmp_path, PROFILE_PROGRAM, regions={}, calls={}, tried=hot,
                  tried_for="an older compiler")
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    assert "compiled in 0.000 s" in cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path).stderr
    # With this compiler's mark on it, what failed is not tried again.
    _forget_units(tmp_path, PROFILE_PROGRAM, regions={}, calls={}, tried=hot,
                  tried_for=native_digest(2).hex())
    assert tried_here(_profile(tmp_path, PROFILE_PROGRAM)[2], 2) == hot
    cached_run(PROFILE_PROGRAM, [SHORT_N], tmp_path)
    assert "compiled in" not in cached_run(PROFILE_PROGRAM, [SHORT_N], tmp_path,
                                           BRIL_JIT_SERVER="0").stderr


def test_a_run_that_misses_a_loop_keeps_its_unit(tmp_path):
    cached_run(PROFILE_PROGRAM, ["2000000"], tmp_path)
    listed = _profile(tmp_path, PROFILE_PROGRAM)[2]
    assert listed["regions"] or listed["calls"]
    cached_run(PROFILE_PROGRAM, ["0"], tmp_path)        # (the loop never runs)
    kept = _profile(tmp_path, PROFILE_PROGRAM)[2]
    assert (kept["regions"], kept["calls"]) == (listed["regions"], listed["calls"])


# --- ssa2 (set/get/undef) in native code -------------------------------------------------

SSA2_CORPUS = bril_files("test", "interp", "ssa") + bril_files("test", "interp-error", "ssa-error")
# Our loop benchmarks converted by `bril-opt to-ssa` (shadows carried around loops).
SSA2_CONVERTED = ["loops/prime-count.bril", "loops/coprime-pairs.bril", "memory/sieve.bril",
                  "float/taylor.bril"]


@pytest.mark.parametrize("path", SSA2_CORPUS, ids=case_id)
def test_ssa2_corpus_programs_with_everything_hot(path):
    prog = parse_program(path.read_text())
    args = args_of(path)
    got = run_jit(prog, args, hot=1)
    assert got[:3] == run_outcome(prog, args)
    if "swap-problem" in path.name:         # its loop carries shadows: compiled
        assert native_share(got[3]) > 0, got[3].report()


@pytest.mark.parametrize("name", SSA2_CONVERTED)
def test_benchmarks_converted_to_ssa2_run_natively(name):
    from bril.passes.ssa import to_ssa
    path = BENCHMARKS / name
    prog = to_ssa(parse_program(path.read_text()))
    assert any(i.get("op") == "get" for f in prog["functions"] for i in f["instrs"])
    args = _ALT_RE.search(path.read_text()).group(1).split()     # the shorter input
    got = run_jit(prog, args, hot=1)
    assert got[:3] == run_outcome(prog, args)
    assert native_share(got[3]) > 0.5 * got[1], got[3].report()


# The corpus's benchmarks (their own ARGS; not the long set) and their to-ssa forms.
SSA2_FIRST_RUNS = [p for p in bril_files("benchmarks") if p.parent.name != "long"]


def _native_units(prog, args):
    """(stdout, instructions run, the functions of the units compiled, by kind) of a
    first run as `brili --jit --hot 1` makes it: every loop at its first arrival,
    the heap shared from the start (no loop refused for want of it)."""
    out = io.StringIO()
    jit = Jit(hot=1, shared_heap=None)
    count = interp.run(prog, list(args), out=out, jit=jit)
    report = jit.report()
    jit.finish()
    assert not [r for r in report["regions"]
                if "shared heap" in f"{r.get('why')} {r.get('dropped')}"], report
    return out.getvalue(), count, sorted(
        [("loop", r["function"]) for r in report["regions"] if r.get("compiled")]
        + [("call", f["function"]) for f in report.get("functions", ()) if f["compiled"]])


@pytest.mark.parametrize("path", SSA2_FIRST_RUNS, ids=case_id)
def test_a_to_ssa_program_compiles_what_its_original_does_on_a_first_run(path):
    # Every benchmark converted by `bril-opt to-ssa` (set/get shadows around its
    # loops) turns native where its original does, pointer loops included, and
    # prints the same.
    from bril.passes.ssa import to_ssa
    args = args_of(path)
    out, count, units = _native_units(parse_program(path.read_text()), args)
    converted = _native_units(to_ssa(parse_program(path.read_text())), args)
    assert (converted[0], converted[2]) == (out, units)
    if path.with_suffix(".out").exists():
        assert out == path.with_suffix(".out").read_text()
    # (those that compile nothing run a few hundred instructions, in no loop)
    assert units or count < 20_000, count


SSA2_SPECULATION = program_text("jit/ssa2_speculation")


@pytest.mark.parametrize("args", [["60", "100"], ["60", "30"], ["60", "0"]])
def test_ssa2_shadows_roll_back_with_a_failed_speculation(args):
    # An abort restores the shadows written since `speculate` (w back to undef:
    # printing it fails when no speculation ever committed).
    (out, count, err, _), _ = check(SSA2_SPECULATION, args, hot=1)
    if args[1] == "0":
        assert err == "print of undefined value"
    else:
        assert err is None


SSA2_UNDEF_IN_LOOP = program_text("jit/ssa2_undef_in_loop")


@pytest.mark.parametrize("bad", ["-1", "70"])
def test_undef_values_cross_between_native_code_and_the_interpreter(bad):
    (out, count, err, _), report = check(SSA2_UNDEF_IN_LOOP, ["100", bad], hot=1,
                                         native=bad == "-1")
    assert err == (None if bad == "-1" else "add argument 0 must be a int")
    if err is not None:         # raised by native code
        assert [r["error"] for r in report["regions"]] == [err]


# --- any (the dynamic extension) in native code -----------------------------------------

DYNAMIC_CORPUS = (bril_files("test", "interp", "dynamic")
                  + bril_files("test", "interp-error", "dynamic-error"))


@pytest.mark.parametrize("path", DYNAMIC_CORPUS, ids=case_id)
def test_dynamic_corpus_programs_with_everything_hot(path):
    prog = parse_program(path.read_text())
    args = args_of(path)
    got = run_jit(prog, args, hot=1, hot_calls=1)
    assert got[:3] == run_outcome(prog, args)
    err = path.with_suffix(".err")
    if err.exists():
        assert f"error: {got[2]}" == err.read_text().strip()
    if "dispatch" in path.name or "enum" in path.name:     # called twice: compiled whole
        report = got[3].report()
        assert [f["function"] for f in report["functions"] if f["compiled"]], report


@pytest.mark.parametrize("mode", sorted(DYNAMIC_LOOP_ERRORS))
def test_any_values_cross_between_native_code_and_the_interpreter(mode):
    # `any` variables and ptr<any> cells go in and out of native loops (tags in the
    # slots, tagged cells in the shared heap); each error is raised by native code.
    (out, count, err, jit), report = check(DYNAMIC_LOOP, [str(mode), "20"], hot=1)
    message = DYNAMIC_LOOP_ERRORS[mode]
    assert err == message
    compiled = [r for r in report["regions"] if r.get("compiled")]
    assert {r["function"] for r in compiled} == {"fill", "main"}, report
    if message is not None:
        assert [r["error"] for r in compiled if r["error"]] == [message], report


@pytest.mark.parametrize("name, mode", [(n, m) for n, (_, errors) in DYNAMIC_MODES.items()
                                        for m in errors])
def test_any_values_with_undef_and_pointers(name, mode):
    src, errors = DYNAMIC_MODES[name]
    prog = parse_program(src)
    got = run_jit(prog, [str(mode)], hot=1, hot_calls=1)
    assert got[:3] == run_outcome(prog, [str(mode)])
    assert got[2] == errors[mode]


@pytest.mark.parametrize("name", sorted(DYNAMIC_UNITS))
def test_any_values_at_the_edges(name):
    # No loops: functions called once are compiled whole (hot_calls=1).
    prog = parse_program(DYNAMIC_UNITS[name])
    assert run_jit(prog, hot=1, hot_calls=1)[:3] == run_outcome(prog)


ANY_CALLS = program_text("jit/any_calls")


def test_functions_taking_and_returning_any_run_natively():
    # Called from the interpreter (three slots a value: tag, value, offset) and from
    # native code.
    (out, count, err, jit), report = check(ANY_CALLS, ["41"], hot=1)
    assert out == "40\n0.50000000000000000\n"
    got = run_jit(parse_program(ANY_CALLS), ["40"], hot=1, hot_calls=1)
    assert got[:3] == run_outcome(parse_program(ANY_CALLS), ["40"])
    assert [f["function"] for f in got[3].report()["functions"] if f["compiled"]] == ["next"]


NEST = program_text("jit/nest")


@pytest.mark.parametrize("hot", [2, 3, 5, 40, 400])
def test_a_nest_entered_at_any_of_its_loops_gives_the_same_results(hot):
    # Native code taking over in the innermost, the middle or the outer loop
    # (by the threshold) starts through the dispatch of the loops around it.
    check(NEST, ["30", "25"], hot=hot)
    check(NEST, ["3", "0"], hot=hot, native=False)


def test_region_entries_inside_other_loops_go_in_through_their_headers():
    # A loop entered at a second place is no loop to LLVM (nothing is hoisted out
    # of it): the entry switch may only jump to the outermost loop's header or to
    # code that only dispatches.
    from bril.backend import jitcache
    from bril.interpreter.interp import compile_program
    from bril.backend.regions import select_region
    compiled, main = compile_program(parse_program(NEST))
    fc = compiled.function_code(main)
    inner = next(l for l in fc.loops if l.parent is not None and l.parent.parent is not None)
    outer = inner.parent.parent
    blocks, entries = select_region(fc, inner.header)[0]
    assert {inner.header, inner.parent.header, outer.header} <= set(entries)
    module, *_ = jitcache.lower_region_unit(compiled.linked, main, fc, blocks, entries, "r")
    fn = module.get_global("r")
    switch = fn.blocks[0].instructions[-1]
    assert switch.opname == "switch"
    targets = {switch.default.name} | {blk.name for _, blk in switch.cases}
    # (and the outermost loop, whose header is now its dispatch, at that)
    assert not targets & {f"b{inner.header}", f"b{inner.parent.header}", f"b{outer.header}"}


def test_a_traces_inner_loop_is_entered_through_a_copy_of_it():
    # A trace's repeating part comes after its first pass, whose loads and checks
    # LLVM reuses in the loop only if nothing else enters it: native code entered
    # there starts in a copy (`c{h}.b{h}`), and the original loop keeps its one
    # way in.  The traced program gives the same results entered anywhere.
    from bril.backend import jitcache
    from bril.interpreter.interp import compile_program
    from bril.backend.regions import select_region
    from bril.ir.tracelabels import is_loop_label
    from bril.tracing.tracer import trace_program
    traced = trace_program(parse_program(NEST), ["40", "30"]).program
    compiled, main = compile_program(traced)
    fc = compiled.function_code(main)
    blocks_by_label = {b.label: b.index for b in fc.blocks_by_index if b.label}
    loops = [l for l in fc.loops if l.parent is not None
             and is_loop_label(fc.blocks_by_index[l.header].label)]
    assert loops, sorted(blocks_by_label)
    h = loops[0].header
    blocks, entries = select_region(fc, h)[0]
    assert h in entries
    module, *_ = jitcache.lower_region_unit(compiled.linked, main, fc, blocks, entries, "r")
    names = {blk.name for blk in module.get_global("r").blocks}
    assert f"c{h}.b{h}" in names
    for hot in (2, 3, 7, 60):
        check(_text(traced), ["40", "30"], hot=hot)
        check(_text(traced), ["7", "3"], hot=hot, native=False)


def _fresh_python(code):
    """`code` run by a new Python (what it imports is its own)."""
    return subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, timeout=60)


def test_asking_for_native_code_imports_no_json_nor_re():
    # What a run imports when its JIT first asks the compile server for a unit and
    # for the program's executable (with the kinds its first tier saw): `json`
    # brings `re` and `enum`, 14 ms of a short first run's CPU.
    # (what Python's own start-up imported, site's .pth files, is not counted)
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "from bril.backend import jit, jit_client, jitcache, jitprofile, program_exe\n"
            "from bril.interpreter import type_profile\n"
            "print(sorted({'json', 're', 'enum', 'llvmlite'} & (set(sys.modules) - before)))\n")
    proc = _fresh_python(code)
    assert proc.stdout == b"[]\n", proc.stderr


def test_a_region_is_chosen_from_the_functions_shape_alone():
    # Asking the compile server for a loop reads the function's blocks and loops
    # (`CompiledProgram.function_shape`), not its type analysis: a run whose code came
    # from the cache imports no code generator to ask.  The code generated later is
    # built on the same shape, so block indices and layout ids agree.
    code = ("import io, sys\n"
            "from bril.interpreter.interp import compile_program\n"
            "from bril.ir.text import parse_program\n"
            "from bril.backend.regions import select_region\n"
            f"prog = parse_program({PROFILE_PROGRAM!r})\n"
            "compiled, main = compile_program(prog, out=io.StringIO())\n"
            "shape = compiled.function_shape(main)\n"
            "header = shape.loops[0].header\n"
            "chosen = select_region(shape, header)\n"
            "print(bool(chosen), sorted({'bril.interpreter.codegen', 'bril.analysis.typecheck'}"
            " & set(sys.modules)))\n"
            "fc = compiled.function_code(main)\n"
            "print(fc.blocks_by_index is shape.blocks_by_index, fc.loops is shape.loops,"
            " select_region(fc, header) == chosen)\n")
    proc = _fresh_python(code)
    assert proc.stdout == b"True []\nTrue True True\n", proc.stderr


CELLS_STORED_IN_PYTHON = """
@main {
  n: int = const 4; one: int = const 1; two: int = const 2; three: int = const 3;
  zero: int = const 0; five: int = const 5; nine: int = const 9;
  p: ptr<int> = alloc n;
  store p five;
  q: ptr<int> = ptradd p one;
  store q zero;
  r: ptr<int> = ptradd p two;
  store r nine;
  s: int = const 0;
  k: int = const 0;
  reps: int = const 300;
.sum:
  more: bool = lt k reps;
  br more .body .check;
.body:
  j: int = const 0;
.cells:
  in: bool = lt j three;
  br in .cell .next;
.cell:
  c: ptr<int> = ptradd p j;
  v: int = load c;
  s: int = add s v;
  j: int = add j one;
  jmp .cells;
.next:
  k: int = add k one;
  jmp .sum;
.check:
  print s;
  k: int = const 0;
.again:
  j: int = const 0;
  last: bool = eq k reps;
  br last .past .read;
.past:
  j: int = const 3;
.read:
  c: ptr<int> = ptradd p j;
  v: int = load c;
  k: int = add k one;
  jmp .again;
}
"""


def test_native_code_reads_cells_generated_code_stored_as_stored():
    # Generated code over the native heap sets a cell's flag only when it stores a
    # zero; native code reads a cell that is not zero as stored, and a zero's flag:
    # the stored 5, 0 and 9 load, the cell never stored fails -- natively, exactly.
    prog = parse_program(CELLS_STORED_IN_PYTHON)
    expected = run_outcome(prog, [])
    assert expected == ("4200\n", None, "Pointer c points to uninitialized data")
    out = io.StringIO()
    jit = Jit(hot=3, hot_calls=20, background=False)
    with pytest.raises(BrilError) as info:
        interp.run(prog, [], out=out, jit=jit, tier="fast")
    assert (out.getvalue(), info.value.message) == (expected[0], expected[2])
    # (the loops' region was entered, and the error was its own)
    regions = jit.report()["regions"]
    assert jit.heap is not None and regions, regions
    assert all(r["entries"] >= 1 and r["error"] == expected[2] for r in regions), regions


@pytest.mark.parametrize("value, mode", [(None, "background"), ("1", "background"),
                                         ("", "background"), ("0", "none"),
                                         ("wait", "wait")])
def test_the_after_run_builds_setting_is_read_in_one_place(monkeypatch, value, mode):
    from bril.warm_start import after_run_builds
    if value is None:
        monkeypatch.delenv("BRIL_JIT_PRECOMPILE", raising=False)
    else:
        monkeypatch.setenv("BRIL_JIT_PRECOMPILE", value)
    assert after_run_builds() == mode
