"""Property tests: programs nobody wrote (see docs/testing.md, "Property tests").

Random well-formed, terminating programs (`strategies.py`) must
  1. survive the text format: parse(format(p)) == p, and the commands agree;
  2. run the same on every engine as on the deliberately simple interpreter
     (`simple_interp.py`): stdout, error or not (and the message), `-p` count;
  3. run the same after every pass alone, after `-O`, and after random
     pipelines of passes: stdout and error behaviour; and (with 4) never gain an
     int literal a double cannot hold (the reference tools would misread it);
  4. when traced on one input, run the same as before on that input and on
     another one;
  5. run the same in `brili`'s checking mode (`check_facts=True`), where the
     generated code asserts every range fact it relies on (no wrap-around where
     a test was dropped, the sign of `div` operands, ranges at block entry):
     no fact is ever violated, also after `-O` and in traced programs;
  6. run the same on every engine when their `any` values change kind during
     the run (`strategies.phase_cases`: what the tiers assume of such values
     must fail over exactly).
Kept failing examples live in `test/regressions/`; `test_regression` runs
every property on each of them.

Adding an engine, a tracer or a transformation is one line in ENGINES,
TRACE_ENGINES or TRANSFORMATIONS.  Example counts come from a settings
profile chosen by BRIL_PROPERTY_PROFILE: "ci" (default: fixed examples, about
a minute and a half in all) or "long" (25 times more, random, failures saved
in .hypothesis/).
"""

import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis import note as _hypothesis_note
from hypothesis.errors import InvalidArgument

import simple_interp
import strategies
from corpus import args_of
from bril.ir.errors import BrilError
from bril.ir.program import check_program
from bril.ir.printer import format_program
from bril.ir.text import parse_program

REGRESSIONS = Path(__file__).resolve().parent / "regressions"

# --- settings profiles --------------------------------------------------------------

_COMMON = dict(deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.large_base_example])
PROFILES = {
    # Fixed examples (derandomized) so CI is reproducible; `scale` multiplies
    # each test's base example count.
    "ci": dict(scale=1, derandomize=True, database=None, print_blob=True),
    # Random examples; failures are replayed from .hypothesis/ on the next run.
    "long": dict(scale=25, print_blob=True),
}
PROFILE = os.environ.get("BRIL_PROPERTY_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"BRIL_PROPERTY_PROFILE must be one of {sorted(PROFILES)}, not {PROFILE!r}")


def examples(base):
    """Settings for a property with `base` examples in CI (scaled by the profile)."""
    options = dict(PROFILES[PROFILE])
    scale = options.pop("scale")
    return settings(max_examples=base * scale, **_COMMON, **options)


# --- engines ------------------------------------------------------------------------

def _outcome(run_fn):
    """Run an engine that writes to `out` and returns the count, raising BrilError."""
    out = io.StringIO()
    try:
        count = run_fn(out)
    except BrilError as err:
        return simple_interp.Outcome(out.getvalue(), str(err), None)
    return simple_interp.Outcome(out.getvalue(), None, count)


def _brili(prog, argv, **options):
    from bril.interpreter.interp import run
    return _outcome(lambda out: run(prog, list(argv), out=out, **options))


def _brili_cold(prog, argv):
    """Every function in the cold tier only."""
    return _brili(prog, argv, tier="cold")


def _brili_fast(prog, argv):
    """Every function generated before the first instruction."""
    return _brili(prog, argv, tier="fast")


def _brili_eager(prog, argv):
    """Functions promoted at their first backward jump or second call: on-stack
    replacement in nearly every loop."""
    return _brili(prog, argv, promote_after=0)


def _brili_jit(prog, argv):
    """`brili --jit` with loops compiled after a couple of visits (generated loops
    are short)."""
    from bril.interpreter.interp import run
    from bril.backend.jit import Jit
    if os.environ.get("BRIL_JIT_DEBUG_DUMP"):
        with open(os.environ["BRIL_JIT_DEBUG_DUMP"], "w") as fh:
            json.dump({"prog": prog, "argv": list(argv)}, fh)
    return _outcome(lambda out: run(prog, list(argv), out=out, jit=Jit(hot=2, background=False)))


# Every engine must agree with simple_interp.run on every generated program.
# One line per engine: name -> fn(prog, argv) -> simple_interp.Outcome.
ENGINES = {
    "brili": _brili,
    "brili --tier cold": _brili_cold,
    "brili --tier fast": _brili_fast,
    "brili, eager promotion": _brili_eager,
    "brili --jit": _brili_jit,
}

# Generated loops run a handful of times; the default threshold (56 visits)
# would never trace them.
TRACE_HOT = 2


def _brili_trace(prog, argv):
    """`brili --trace`: the training run's Outcome, and the traced program
    (None when the training run failed)."""
    from bril.tracing.tracer import trace_program
    out = io.StringIO()
    try:
        result = trace_program(prog, list(argv), hot=TRACE_HOT, out=out)
    except BrilError as err:
        return simple_interp.Outcome(out.getvalue(), str(err), None), None
    return simple_interp.Outcome(out.getvalue(), None, result.original_count), result.program


# "Trace on one input, run on another": the training run behaves like a plain
# run, and the traced program behaves like the original on the training input
# and on another one.  One line per tracer:
# name -> fn(prog, argv) -> (training Outcome, traced program or None).
TRACE_ENGINES = {
    "brili --trace": _brili_trace,
}


# --- transformations ----------------------------------------------------------------

def _registry():
    from bril.passes import registry
    return registry


def _transformations():
    """Every registered pass alone, and the -O pipeline: name -> fn(prog) -> prog."""
    reg = _registry()
    table = {name: p.run for name, p in reg.PASSES.items()}
    table["-O"] = reg.optimize
    return table


# One line per transformation: name -> fn(prog) -> prog (must preserve stdout
# and error behaviour).  Every registered pass is included automatically.
TRANSFORMATIONS = _transformations()

# Passes whose output has no shape the JIT does not already meet in generated
# programs (property 2) and in -O's output: the JIT, the slowest engine to run
# (it compiles), skips their output alone; pipelines of them are still checked.
JIT_SEES_AS_INPUT = {"cfgclean", "constprop", "from-ssa", "lvn", "prune", "tdce"}


# --- the checks shared by the properties and the regression files -------------------

_SIMPLE = {}


def simple_run(prog, argv):
    """`simple_interp.run`, once per program and arguments: the checks ask for the
    same runs again (a traced program on its training input, `-O`'s output)."""
    key = (json.dumps(prog), tuple(argv))
    got = _SIMPLE.get(key)
    if got is None:
        if len(_SIMPLE) > 4096:
            _SIMPLE.clear()
        got = _SIMPLE[key] = simple_interp.run(prog, argv)
    return got


def note(text):
    """Hypothesis' note inside a property; nothing in a plain test (pytest shows the assert)."""
    try:
        _hypothesis_note(text)
    except InvalidArgument:
        pass


def show(prog, argv):
    """Put the failing program in Hypothesis' report, as text when possible."""
    try:
        note("program:\n" + format_program(prog))
    except Exception:                       # the formatter may be what is broken
        note("program (JSON): " + json.dumps(prog))
    note(f"argv: {argv!r}")


def json_difference(a, b, path="$"):
    """Where two JSON values differ, or None.  Stricter than ==, which holds
    for 1 == 1.0 == True and 0.0 == -0.0: types and float bits must match."""
    if type(a) is not type(b):
        return f"{path}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        return next((d for k in a if (d := json_difference(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items vs {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b))
                     if (d := json_difference(x, y, f"{path}[{i}]"))), None)
    if isinstance(a, float):
        same = struct.pack("<d", a) == struct.pack("<d", b)
    else:
        same = a == b
    return None if same else f"{path}: {a!r} vs {b!r}"


def check_round_trip(prog):
    text = format_program(prog)
    note("text:\n" + text)
    diff = json_difference(parse_program(text), prog)
    assert diff is None, f"parse(format(p)) differs from p at {diff}"


def check_engine(engine, prog, argv, expected):
    pristine = json.dumps(prog)     # (the exact JSON: float bits, int vs float vs bool)
    got = ENGINES[engine](prog, argv)
    assert json.dumps(prog) == pristine, f"{engine} modified its input program"
    assert got.stdout == expected.stdout, engine
    assert got.error == expected.error, engine
    assert got.count == expected.count, engine


def inexact_literals(prog):
    """The int literals of prog that a double cannot hold (the reference tools read
    JSON numbers as doubles, so they would run a different program)."""
    return {i["value"] for f in prog.get("functions", []) for i in f.get("instrs", [])
            if i.get("op") == "const" and type(i.get("value")) is int
            and float(i["value"]) != i["value"]}


def check_portable(new, prog, what):
    """Our tools never write an int literal a double cannot hold, unless the program
    they were given had it."""
    added = inexact_literals(new) - inexact_literals(prog)
    assert not added, f"{what} wrote literals the reference tools misread: {sorted(added)}"


def check_transformation(name, prog, argv, expected, transform=None, checked=None):
    """The transformed program prints the same and fails the same way; and the
    engines agree with the simple interpreter on it too (pass output has shapes
    generated programs lack: shadow variables, undef, threaded jumps).  `checked`:
    the programs (JSON text) the engines already ran on these arguments -- many
    passes give the same program -- updated."""
    pristine = json.dumps(prog)
    new = (transform or TRANSFORMATIONS[name])(prog)
    assert json.dumps(prog) == pristine, f"{name} modified its input program"
    check_program(new)
    check_portable(new, prog, name)
    note(f"after {name}:\n" + format_program(new))
    got = simple_run(new, argv)
    assert got.stdout == expected.stdout, name
    assert got.error == expected.error, name
    text = json.dumps(new, sort_keys=True)
    if checked is not None and text in checked:
        return new
    for engine in ENGINES:
        if engine == "brili --jit" and name in JIT_SEES_AS_INPUT:
            continue
        check_engine(engine, new, argv, got)
    if checked is not None:
        checked.add(text)
    return new


# --- 1. text round trip -------------------------------------------------------------

# (parse(format(p)) == p is checked on every program the properties below draw.)

def _tool(name, stdin, *args):
    """Run an installed command (from this Python's environment)."""
    exe = Path(sys.executable).with_name(name)
    return subprocess.run([str(exe) if exe.exists() else name, *args],
                          input=stdin, capture_output=True, timeout=60)


@settings(max_examples=4, **_COMMON, derandomize=True, database=None)
@given(strategies.programs(strategies.Limits(max_helpers=1, max_stmts=3)))
def test_text_commands_agree_with_api(prog):
    """bril2txt and bril2json (the commands) agree with format/parse (the API)."""
    data = json.dumps(prog).encode()
    txt = _tool("bril2txt", data)
    assert txt.returncode == 0, txt.stderr
    assert txt.stdout.decode("utf-8") == format_program(prog)
    back = _tool("bril2json", txt.stdout)
    assert back.returncode == 0, back.stderr
    diff = json_difference(json.loads(back.stdout), prog)
    assert diff is None, f"bril2json output differs at {diff}"


# --- 2. engines agree with the simple interpreter -----------------------------------

# (Each property draws its programs once and checks every engine or pass on each:
# drawing a program costs more than most runs of it.)

@examples(110)
@given(case=strategies.cases(strategies.ENGINE_TESTING))
def test_engines_agree_with_simple_interpreter(case):
    """Every engine, and `brili`'s checking mode (5): the range facts the generated
    code relies on hold -- sign tests, divisions of negative values, loops dividing
    toward zero (see strategies.py)."""
    show(case.prog, case.argv)
    check_round_trip(case.prog)
    expected = simple_run(case.prog, case.argv)
    note(f"expected: {expected}")
    for engine in ENGINES:
        check_engine(engine, case.prog, case.argv, expected)
    check_facts_hold(case.prog, case.argv, expected)


# --- 3. passes preserve behaviour ---------------------------------------------------

@examples(45)
@given(case=strategies.cases())
def test_transformations_preserve_behaviour(case):
    """Every pass alone and `-O`; and the range facts hold in `-O`'s output (SSA-like
    shapes, copies, folded constants)."""
    show(case.prog, case.argv)
    check_round_trip(case.prog)
    expected = simple_run(case.prog, case.argv)
    checked = set()
    for name in TRANSFORMATIONS:
        new = check_transformation(name, case.prog, case.argv, expected, checked=checked)
        if name == "-O":
            check_facts_hold(new, case.argv, simple_run(new, case.argv))


@examples(60)
@given(case=strategies.cases(), data=st.data())
def test_pass_pipelines_preserve_behaviour(case, data):
    """Passes composed in random orders, repeats included."""
    names = data.draw(st.lists(st.sampled_from(sorted(_registry().PASSES)),
                               min_size=2, max_size=5), label="pipeline")
    show(case.prog, case.argv)
    check_round_trip(case.prog)
    check_transformation(" ".join(names), case.prog, case.argv,
                         simple_run(case.prog, case.argv),
                         transform=lambda p: _registry().run_pipeline(p, names))


# --- 4. traces recorded on one input, run on another -------------------------------

@examples(70)
@given(case=strategies.cases(strategies.TRACE_TESTING))
def test_traces_on_one_input_run_on_another(case):
    """Every tracer; and the range facts hold in the traced programs (guards,
    speculation and its abort edges, merged loop tests) on both inputs."""
    show(case.prog, case.argv)
    check_round_trip(case.prog)
    note(f"other argv: {case.alt_argv!r}")
    for tracer in TRACE_ENGINES:
        traced = check_trace(tracer, case.prog, case.argv, case.alt_argv)
        if traced is not None:
            for argv in (case.argv, case.alt_argv):
                check_facts_hold(traced, argv, simple_run(traced, argv))


def check_trace(tracer, prog, argv, other_argv):
    expected = simple_run(prog, argv)
    pristine = json.dumps(prog)
    training, traced = TRACE_ENGINES[tracer](prog, argv)
    assert json.dumps(prog) == pristine, f"{tracer} modified its input program"
    assert training == expected, "the training run differs from a plain run"
    if traced is None:
        return None
    check_program(traced)
    check_portable(traced, prog, tracer)
    note("traced:\n" + format_program(traced))
    for run_argv in (argv, other_argv):
        original = simple_run(prog, run_argv)
        got = simple_run(traced, run_argv)
        assert got.stdout == original.stdout, f"traced program, argv {run_argv!r}"
        assert got.error == original.error, f"traced program, argv {run_argv!r}"
        for engine in ENGINES:
            check_engine(engine, traced, run_argv, got)
    again = simple_run(traced, argv)
    assert again.count is None or again.count <= expected.count, \
        "the traced program runs more instructions on its training input"
    return traced


# --- 5. range facts hold (brili's checking mode) ----------------------------------

def _brili_checked(prog, argv):
    """`brili` in checking mode: a violated range fact is an internal error."""
    from bril.interpreter.interp import run
    return _outcome(lambda out: run(prog, list(argv), out=out, check_facts=True, tier="fast"))


def check_facts_hold(prog, argv, expected):
    got = _brili_checked(prog, argv)
    assert "range fact violated" not in (got.error or ""), got.error
    assert got.stdout == expected.stdout
    assert got.error == expected.error
    assert got.count == expected.count


# --- kept failing examples ----------------------------------------------------------

def _regression_files():
    return sorted(p for p in REGRESSIONS.glob("*") if p.suffix in (".bril", ".json"))


def load_regression(path):
    """(program, argv) of a kept example: `# ARGS:` in .bril files, and for a
    .json program an optional NAME.argv.json holding the argument list."""
    if path.suffix == ".bril":
        return parse_program(path.read_text(encoding="utf-8")), args_of(path)
    argv_file = path.with_name(path.stem + ".argv.json")
    argv = json.loads(argv_file.read_text()) if argv_file.exists() else []
    return json.loads(path.read_text(encoding="utf-8")), argv


@pytest.mark.parametrize("path", [p for p in _regression_files()
                                  if not p.name.endswith(".argv.json")],
                         ids=lambda p: p.name)
def test_regression(path):
    prog, argv = load_regression(path)
    check_round_trip(prog)
    expected = simple_run(prog, argv)
    for engine in ENGINES:
        check_engine(engine, prog, argv, expected)
    checked = set()
    for name in TRANSFORMATIONS:
        check_transformation(name, prog, argv, expected, checked=checked)
    for tracer in TRACE_ENGINES:
        check_trace(tracer, prog, argv, argv)
    check_facts_hold(prog, argv, expected)


# --- 6. values that change kind --------------------------------------------------------

@examples(12)
@given(case=strategies.phase_cases())
def test_engines_agree_when_any_values_change_kind(case):
    """Programs whose `any` values are ints in one phase of the run and floats in
    another (`strategies.phase_cases`): what the tiers assume of them (at loop
    headers, of `any` parameters) and regenerate when it fails keeps every engine
    exact, on two sets of flip points."""
    show(case.prog, case.argv)
    for argv in (case.argv, case.alt_argv):
        expected = simple_run(case.prog, argv)
        note(f"expected on {argv}: {expected}")
        for engine in ENGINES:
            check_engine(engine, case.prog, argv, expected)
