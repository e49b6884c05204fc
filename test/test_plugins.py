"""Plug-in passes everywhere (bril.passes.registry, bril.tracing.trace_plugin) and the two
example passes of the README (examples/dead_stores.py, examples/strength.py).

The examples run through `bril-opt --load`, a `module:function` spec, an entry
point (a temporary dist-info on the path: no network, no install), a `bril-bench`
run and `brili --trace --trace-pass`, with the conformance benchmarks' exact
output.  Broken plug-ins: one line naming them (exit 2), or, in the tracer,
dropped with a warning and the output unchanged.
"""

import io
import json
import os
import subprocess
import sys

import pytest

from corpus import ROOT, args_of, bril_files, case_id

from bril.interpreter.interp import run_capture
from bril.passes import registry
from bril.ir.rules import problems
from bril.ir.text import parse_program

EXAMPLES = ROOT / "examples"
BENCHMARKS = bril_files("benchmarks")
FIZZ = next((p for p in BENCHMARKS if p.stem == "fizz-buzz"), None)
# Tracing runs each program several times: the benchmarks that run at most this many
# instructions (83 of the 92; the others take most of the time).
TRACE_LIMIT = 300_000


def _instructions(path):
    prof = path.with_suffix(".prof")
    return int(prof.read_text().split()[-1]) if prof.exists() else 0

BROKEN = '''
def boom(prog):
    raise ValueError("nope")

def junk(prog):
    return {"functions": [{"name": "main", "instrs": [{"op": 3}]}]}

def mul2add(prog):
    """Turns every mul into an add: well formed, wrong (the checking runs drop it)."""
    for f in prog["functions"]:
        for i in f["instrs"]:
            if i.get("op") == "mul":
                i["op"] = "add"
    return prog

def noguard(prog):
    for f in prog["functions"]:
        f["instrs"] = [i for i in f["instrs"] if i.get("op") != "guard"]
    return prog
'''


def _example(name):
    return registry.load_file(str(EXAMPLES / f"{name}.py"), name)


def _env(**extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def _run(cmd, stdin=b"", **kw):
    return subprocess.run(cmd, input=stdin, capture_output=True, **kw)


def _json(path):
    return json.dumps(parse_program(path.read_text())).encode()


@pytest.mark.parametrize("name", ["dead_stores", "strength"])
def test_examples_are_short_and_exact_on_every_benchmark(name):
    assert len((EXAMPLES / f"{name}.py").read_text().splitlines()) < 60
    assert BENCHMARKS, "conformance corpus not found"
    p = _example(name)
    for path in BENCHMARKS:
        prog = parse_program(path.read_text())
        new = registry.run_pipeline(prog, [p])
        assert problems(new) == [], case_id(path)
        out, _ = run_capture(new, args_of(path))
        assert out == path.with_suffix(".out").read_text(), case_id(path)


def test_examples_do_their_job():
    src = """@main(x: int) {
      two: int = const 2; one: int = const 1; zero: int = const 0;
      a: int = mul x two; b: int = mul one x; c: int = div x one; d: int = mul x zero;
      dead: int = add a b;
      print a b c d;
    }"""
    prog = parse_program(src)
    strong = registry.run_pipeline(prog, [_example("strength")])
    ops = [i.get("op") for i in strong["functions"][0]["instrs"]]
    assert "mul" not in ops and "div" not in ops
    lean = registry.run_pipeline(strong, [_example("dead_stores")])
    dests = [i.get("dest") for i in lean["functions"][0]["instrs"]]
    assert "dead" not in dests and "two" not in dests
    assert run_capture(lean, ["21"])[0] == run_capture(prog, ["21"])[0] == "42 21 21 0\n"


def test_bril_opt_load_and_specs():
    assert FIZZ is not None
    expected = FIZZ.with_suffix(".out").read_bytes()
    for args, env in [
        (["--load", str(EXAMPLES / "dead_stores.py"), "dead_stores"], {}),
        (["-O", f"{EXAMPLES / 'strength.py'}:strength", "tdce"], {}),
        (["strength:strength,dead_stores:dead_stores"], {"PYTHONPATH": str(EXAMPLES)}),
    ]:
        r = _run(["bril-opt", *args], _json(FIZZ), env=_env(**env))
        assert r.returncode == 0, r.stderr
        run = _run(["brili", *args_of(FIZZ)], r.stdout)
        assert run.stdout == expected


def _dist_info(tmp_path):
    """A tiny installed package declaring two passes (a dist-info on sys.path)."""
    site = tmp_path / "site"
    info = site / "student_passes-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: student-passes\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[bril.passes]\ndse = dead_stores:dead_stores\nsr = strength:strength\n")
    return _env(PYTHONPATH=os.pathsep.join([str(site), str(EXAMPLES)]))


def test_entry_point_passes(tmp_path):
    env = _dist_info(tmp_path)
    r = _run(["bril-opt", "--list"], env=env)
    assert r.returncode == 0 and "dse" in r.stdout.decode() and "sr" in r.stdout.decode()
    r = _run(["bril-opt", "sr", "O", "dse"], _json(FIZZ), env=env)
    assert r.returncode == 0, r.stderr
    assert _run(["brili", *args_of(FIZZ)], r.stdout).stdout == \
        FIZZ.with_suffix(".out").read_bytes()
    # the same names in brili --trace-pass
    traced = tmp_path / "t.json"
    r = _run(["brili", "--trace", str(traced), "--trace-pass", "sr,dse", *args_of(FIZZ)],
             _json(FIZZ), env=env)
    assert r.returncode == 0 and r.stderr == b""
    assert r.stdout == FIZZ.with_suffix(".out").read_bytes()


def test_broken_plugins_are_one_line_errors(tmp_path):
    (tmp_path / "bad.py").write_text(BROKEN)
    prog = b'{"functions": [{"name": "main", "instrs": []}]}'
    for spec, says in [("bad.py:boom", "pass bad.py:boom raised ValueError: nope"),
                       ("bad.py:junk", "pass bad.py:junk returned a malformed program"),
                       ("bad.py:nothere", "has no function nothere"),
                       ("nosuchpass", "unknown pass 'nosuchpass'")]:
        r = _run(["bril-opt", spec], prog, cwd=tmp_path)
        err = r.stderr.decode()
        assert r.returncode == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("error: ") and says in err, err
    r = _run(["bril-opt", "--load", "bad.py", "boom"], prog, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == b"error: pass boom raised ValueError: nope\n"


def test_trace_pass_checked_like_the_tracers_own_traces(tmp_path):
    (tmp_path / "bad.py").write_text(BROKEN)
    expected = FIZZ.with_suffix(".out").read_bytes()
    argv = args_of(FIZZ)
    for spec, warning in [("bad.py:mul2add", None), ("bad.py:noguard", "dropped"),
                          (f"{EXAMPLES / 'strength.py'}:strength", None)]:
        out = tmp_path / "t.json"
        r = _run(["brili", "--trace", str(out), "--trace-pass", spec, *argv],
                 _json(FIZZ), cwd=tmp_path)
        assert r.returncode == 0 and r.stdout == expected, r.stderr
        if warning:
            assert r.stderr.decode().startswith(f"warning: trace pass {spec} {warning}")
        else:
            assert r.stderr == b""
        assert _run(["brili", *argv], out.read_bytes()).stdout == expected
    r = _run(["brili", "--trace", "t.json", "--trace-pass", "bad.py:boom", *argv],
             _json(FIZZ), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines()[-1] == "error: pass bad.py:boom raised ValueError: nope"
    assert "Traceback" not in r.stderr.decode()


def test_trace_pass_needs_trace_and_known_passes(tmp_path):
    prog = b'{"functions": [{"name": "main", "instrs": []}]}'
    for args, says in [(["--trace-pass", "tdce"], "--trace-pass and --load need --trace"),
                       (["--trace", "t.json", "--trace-pass", "nosuch"], "unknown pass 'nosuch'"),
                       (["--trace", "t.json", "--trace-pass"], "needs an argument")]:
        r = _run(["brili", *args], prog, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr.decode(), r.stderr
        assert len(r.stderr.splitlines()) == 1


def test_trace_pass_exact_on_the_benchmarks(capsys):
    from bril.tracing import trace_plugin
    from bril.tracing.tracer import trace_program
    passes = [_example("strength"), _example("dead_stores")]
    ran = 0
    original = trace_plugin.apply

    def counting(items, types):
        nonlocal ran
        ran += 1
        return original(items, types)
    trace_plugin.apply = counting
    try:
        for path in [p for p in BENCHMARKS if _instructions(p) <= TRACE_LIMIT]:
            prog = parse_program(path.read_text())
            result = trace_program(prog, args_of(path), out=io.StringIO(), passes=passes)
            assert trace_plugin.PASSES == []
            assert [p.name for p in passes] == ["strength", "dead_stores"]
            out, _ = run_capture(result.program, args_of(path))
            assert out == path.with_suffix(".out").read_text(), case_id(path)
    finally:
        trace_plugin.apply = original
    assert ran > 20         # the passes did see traces
    assert "warning" not in capsys.readouterr().err     # and were never dropped


def test_bench_config_with_passes(tmp_path):
    from bril.tools import bench
    picked = [p for p in BENCHMARKS if p.stem in ("fizz-buzz", "check-primes")]
    cfg = tmp_path / "bench.toml"
    cfg.write_text(
        "extract = 'total_dyn_inst: (\\d+)'\n"
        "[runs.baseline]\npipeline = ['bril2json', 'brili -p {args}']\n"
        "[runs.students]\n"
        f"passes = ['O', 'dead_stores', '{EXAMPLES / 'strength.py'}:strength']\n"
        f"load = [['{EXAMPLES / 'dead_stores.py'}', 'dead_stores']]\n")
    config = bench.load_config(cfg)
    assert config.runs["students"][0] == "bril2json"
    r = _run(["bril-bench", str(cfg), *map(str, picked)])
    assert r.returncode == 0, r.stderr
    rows = r.stdout.decode().splitlines()[1:]
    assert len(rows) == 4 and all(row.split(",")[2].isdigit() for row in rows), rows
    cfg.write_text("extract = '(x)'\n[runs.a]\npasses = ['nosuchpass']\n")
    r = _run(["bril-bench", str(cfg), str(picked[0])])
    assert r.returncode == 2 and b"unknown pass 'nosuchpass'" in r.stderr


@pytest.mark.parametrize("command", ["bril2json", "bril2txt", "bril-opt", "brilc",
                                     "bril-bench", "bril2dot", "bril-check", "brili"])
def test_help_mentions_plugins(command):
    r = _run([command, "--help"])
    text = r.stdout.decode()
    assert r.returncode == 0 and "--load" in text and "plug-in" in text.lower()


def test_optimizing_imports_no_dataclasses():
    # What `brili --trace` imports (the passes, the tracer) adds no `dataclasses`:
    # it imports inspect, ast and dis, ~10 ms of every such run.
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "import bril.cli.brili, bril.passes.registry, bril.tracing.tracer\n"
            "bril.passes.registry.optimize({'functions': [{'name': 'main', 'instrs': []}]})\n"
            "print(sorted((set(sys.modules) - before) & {'dataclasses', 'inspect', 'ast'}))")
    r = _run([sys.executable, "-P", "-c", code])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"[]\n"


def test_plain_brili_imports_no_plugin_machinery():
    prog = b'{"functions": [{"name": "main", "instrs": []}]}'
    r = _run([sys.executable, "-P", "-X", "importtime", "-m", "bril.cli.brili"], prog)
    assert r.returncode == 0
    imported = r.stderr.decode()
    assert "importlib.metadata" not in imported and "bril.passes" not in imported


def test_the_documented_pass_api_paths_are_the_real_modules():
    # `bril.cfg`, `bril.dataflow`, ... stay importable for passes written against
    # them, as the very modules of the stage folders (so private names and
    # monkeypatching reach the real code).
    import importlib
    for old, new in [("cfg", "analysis.cfg"), ("dataflow", "analysis.dataflow"),
                     ("dominance", "analysis.dominance"), ("ops", "ir.ops"),
                     ("rules", "ir.rules"), ("interp", "interpreter.interp")]:
        assert importlib.import_module(f"bril.{old}") is importlib.import_module(f"bril.{new}")
    from bril.cfg import CFG
    from bril.interp import run_capture
    from bril.analysis.cfg import CFG as real_cfg
    assert CFG is real_cfg and callable(run_capture)
