"""Our own benchmark programs (benchmarks/*/*.bril) and their snapshots.

- The real `turnt` command runs every env of turnt.toml that applies to our
  programs: `brili` (the tiered engine, as users run it: stdout against X.out,
  the `total_dyn_inst` line against X.prof; a program that errors, e.g. leaks
  memory, exits 2 and fails too) twice on one fresh code cache, cold then warm,
  over every program; `jit` (`--jit --hot 5`, cold then warm too), `trace` (the
  program `brili --trace` writes: X.out and X.trace.prof), `aot` (a `brilc`
  executable: X.out and X.prof) and `text` (text -> JSON -> text round trip) over
  one program per folder: test_jit.py, test_trace.py, test_aot.py and test_text.py
  check every program in process, so here they only check that the env works on
  our files.  `opt` (after `bril-opt -O`: X.out and X.opt.prof) runs in
  test_passes.py on one program per folder; every program's X.opt.prof is checked
  there in process.
- Every program carries the metadata later tools rely on: an ARGS line, an
  ALT-ARGS line after it, and both snapshot files in the corpus layout.
- The ALT-ARGS inputs (no snapshots: they exist to test traces on inputs they
  were not recorded on) run in process to completion, freeing all memory.
- Each program of the dynamic family (benchmarks/dynamic) is written as a
  dynamic front end emits Bril and has a typed twin (benchmarks/dynamic/typed)
  with the same inputs and the same expected output.
"""

import os
import re
import shutil
import tomllib

import pytest

from corpus import BENCHMARKS, CONFORMANCE, ROOT, bril_files, turnt_run

PROGRAMS = bril_files(root=BENCHMARKS)
ONE_PER_FOLDER = sorted({p.parent: p for p in PROGRAMS}.values())
# Envs whose every program is also checked in process against the same snapshots run
# here on one program per folder (the command itself works on our files): `trace`
# (test_trace.py, at the users' growth price, against X.trace.prof), `aot`
# (test_aot.py builds and runs every one) and `jit` (test_jit.py runs every one
# under the JIT; here cold, then warm from the units the cold round left).  `opt`
# runs in test_passes.py, on one program per folder; every X.opt.prof is checked
# there in process.
TURNT_RUNS = {"brili": PROGRAMS, "text": ONE_PER_FOLDER, "trace": ONE_PER_FOLDER,
              "aot": ONE_PER_FOLDER, "jit": ONE_PER_FOLDER}
# Envs run twice on one fresh code cache: cold, then warm (code from the cache).
COLD_AND_WARM = {"brili", "jit"}
# Envs whose `brili` runs a program another tool made (the tracer's): run by the
# interpreter alone (BRIL_JIT=0), their snapshots are the tool's.  The tiered
# engine is the brili and jit envs' (a compile server per run doubled the env's
# CPU time).
INTERPRETER_ALONE = {"trace"}


def _id(path):
    return str(path.relative_to(BENCHMARKS).with_suffix(""))


def _alt_args(path):
    m = re.search(r"^#\s*ALT-ARGS:(.*)$", path.read_text(), re.M)
    return m.group(1).split() if m else None


def test_there_are_enough_programs_in_every_category():
    categories = {p.parent.name for p in PROGRAMS}
    assert len(PROGRAMS) >= 30
    assert {"loops", "recursion", "memory", "float", "char", "bitcast", "spec"} <= categories


@pytest.mark.parametrize("env", TURNT_RUNS)
def test_turnt_env_passes_on_benchmarks(env, tmp_path):
    programs = TURNT_RUNS[env]
    if env == "aot" and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler to link brilc's executables")
    config = tomllib.loads((ROOT / "turnt.toml").read_text())
    assert env in config["envs"], f"turnt.toml has no [envs.{env}]"
    environment = dict(os.environ)
    environment.pop("BRIL_TRACE_GROWTH_PRICE", None)    # (traced as users trace)
    if env in INTERPRETER_ALONE:
        environment["BRIL_JIT"] = "0"
    rounds = ["cold", "warm"] if env in COLD_AND_WARM else ["once"]
    if env in COLD_AND_WARM:
        environment.update(BRIL_CACHE_DIR=str(tmp_path / "cache"),
                           BRIL_JIT_PRECOMPILE="wait")
    for round_ in rounds:
        done = turnt_run(["-j", "-e", env] + [str(p) for p in programs], cwd=ROOT,
                         timeout=600, env=environment)
        report = round_ + ":\n" + done.stdout + done.stderr
        passed = len(re.findall(r"^ok \d+ ", done.stdout, re.M))
        assert done.returncode == 0, report
        assert passed == len(programs), report


# The corpus's folders of the extensions native code took on last (expected
# stdout only, no X.prof: the `-out` envs), under brilc and the JIT.
CORPUS_TURNT_RUNS = {"aot-out": ["test/interp/ssa", "test/interp/dynamic"],
                     "jit-out": ["test/interp/ssa", "test/interp/dynamic"]}


@pytest.mark.parametrize("env", CORPUS_TURNT_RUNS)
def test_turnt_native_env_passes_on_corpus_folders(env):
    if env == "aot-out" and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler to link brilc's executables")
    programs = [p for folder in CORPUS_TURNT_RUNS[env] for p in bril_files(root=CONFORMANCE / folder)]
    assert programs
    done = turnt_run(["-j", "-c", str(ROOT / "turnt.toml"), "-e", env] + [str(p) for p in programs],
                     cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(re.findall(r"^ok \d+ ", done.stdout, re.M)) == len(programs), done.stdout


@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_program_has_args_and_snapshots(path):
    text = path.read_text()
    args = re.search(r"^# ARGS:(.*)$", text, re.M)
    alt = re.search(r"^# ALT-ARGS:(.*)$", text, re.M)
    assert args, "no `# ARGS:` line"
    # turnt takes the first `ARGS:` it finds, and `ALT-ARGS:` contains one.
    assert alt and alt.start() > args.start(), "need `# ALT-ARGS:` after `# ARGS:`"
    assert alt.group(1).split() != args.group(1).split()
    assert path.with_suffix(".out").read_text(), "empty or missing .out"
    prof = path.with_suffix(".prof").read_text()
    assert re.fullmatch(r"total_dyn_inst: \d+\n", prof), prof


@pytest.mark.parametrize("path", PROGRAMS, ids=_id)
def test_alt_args_input_runs_and_frees_memory(path):
    from bril.interpreter.interp import run_capture
    from bril.ir.text import parse_program

    prog = parse_program(path.read_text())
    # run_capture raises BrilError on any run-time error, including the
    # "memory locations have not been freed" check at exit.
    stdout, count = run_capture(prog, _alt_args(path))
    assert stdout.strip()
    assert count > 0


DYNAMIC = sorted((BENCHMARKS / "dynamic").glob("*.bril"))


def test_the_dynamic_family_is_there():
    assert len(DYNAMIC) >= 12


@pytest.mark.parametrize("path", DYNAMIC, ids=_id)
def test_dynamic_program_has_a_typed_twin_with_the_same_output(path):
    twin = path.parent / "typed" / path.name
    assert twin.exists(), f"no typed twin {twin}"
    lines = {}
    for p in (path, twin):
        text = p.read_text()
        found = [re.search(rf"^# {key}:(.*)$", text, re.M) for key in ("ARGS", "ALT-ARGS", "LONG-ARGS")]
        assert all(found), f"{p.name}: needs ARGS, ALT-ARGS and LONG-ARGS lines"
        # turnt takes the first `ARGS:` it finds: LONG-ARGS comes after the others.
        assert found[0].start() < found[1].start() < found[2].start(), p
        lines[p] = [m.group(1).split() for m in found]
    assert lines[path] == lines[twin]
    assert path.with_suffix(".out").read_text() == twin.with_suffix(".out").read_text()


@pytest.mark.parametrize("path", DYNAMIC, ids=_id)
def test_dynamic_program_is_written_with_any(path):
    """Every variable, parameter and result `any`; arrays ptr<any>; typed values
    only where Bril needs them: @main's arguments and float literals (a typed
    const copied into an `any` variable)."""
    from bril.ir.text import parse_program

    prog = parse_program(path.read_text())
    for func in prog["functions"]:
        if func["name"] != "main":
            assert all(a["type"] == "any" for a in func.get("args", [])), func["name"]
        assert func.get("type", "any") == "any", func["name"]
        for instr in func["instrs"]:
            if "dest" not in instr:
                continue
            kind = instr["type"]
            if instr["op"] == "const" and kind == "float":
                continue
            assert kind in ("any", {"ptr": "any"}), (func["name"], instr)
