"""Type profiles (`bril.interpreter.type_profile`): `brili --write-profile FILE` writes
the types each function's `any` parameters held in a run; `brilc --profile FILE`
compiles a variant of each such function for them (`bril.backend.llvm_lower`:
`ProgramLowering.variant`), entered when a call's arguments have those types,
the generic code otherwise.

A profile steers speed only: an executable built for a profile written on one
input must print and count exactly what the interpreter does on another input,
also where the types differ (the variant's entry test fails), and a profile of
another program, or none, changes nothing either.
"""

import concurrent.futures
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from bril.backend import llvm_lower, native
from bril.interpreter import interp, type_profile
from bril.ir.linker import link
from bril.ir.text import parse_program
from bril.native_runtime import nativert

import strategies
from corpus import BENCHMARKS, alt_args_of, args_of, program_text
from helpers import Built, run_native, run_outcome

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None,
                                reason="no C compiler (cc, gcc or clang) to link executables")

FLIP = program_text("type_profile/flip")
DYNAMIC = sorted((BENCHMARKS / "dynamic").glob("*.bril"))


def profile_of(prog, args):
    """The type profile a run of prog on args writes (in this process, in the first
    tier, as `brili --write-profile`)."""
    seen = []
    try:
        interp.run(prog, [str(a) for a in args], out=io.StringIO(), tier="cold",
                   observe=lambda compiled: seen.append(type_profile.observed(compiled)))
    except Exception:
        pass                    # (a failing run writes its profile all the same)
    return seen[0] if seen else {"bril-type-profile": 1, "functions": {}}


def build_profiled(prog, profile, exe):
    """prog compiled with the profile's variants (never without them: a variant the
    lowering refused would be a silent loss); the number of variants."""
    found = type_profile.read_data(profile, "test")
    lowering = llvm_lower.ProgramLowering(link(prog),
                                          assumptions=llvm_lower.assumptions_of(found))
    native.build_executable(lowering.lower(), exe)
    return sum(len(found) for found in lowering.variants_of.values())


def _tool(name, *args, stdin=b""):
    exe = os.path.join(os.path.dirname(sys.executable), name)
    return subprocess.run([exe if os.path.exists(exe) else name, *args], input=stdin,
                          capture_output=True, timeout=120)


def assert_exact_natively(prog, built, inputs):
    """The built executable prints, counts and fails on each input (a list of
    @main's arguments) exactly as the interpreter does."""
    for args in inputs:
        want_out, want_count, want_error = run_outcome(prog, args)
        got = run_native(built, args)
        assert got.stdout == want_out, args
        assert got.stderr == (f"error: {want_error}\n" if want_error is not None
                              else f"total_dyn_inst: {want_count}\n"), args


def test_brili_writes_the_types_the_any_parameters_held(tmp_path):
    path = tmp_path / "flip.json"
    src = json.dumps(parse_program(FLIP)).encode()
    done = _tool("brili", "--write-profile", str(path), "-p", "50", "100", stdin=src)
    assert done.returncode == 0 and done.stdout == b"150\n"
    # (x is 3 in every call, and the flag false: values the calls pass unchanged;
    # at @main's loop header, the `any` variables live there held ints; @main's
    # arguments, its one call's)
    assert json.loads(path.read_text()) == {
        "bril-type-profile": 1,
        "functions": {"step": {"kinds": [{"acc": "int", "x": "int"}],
                               "values": {"fl": False, "x": 3}},
                      "main": {"kinds": [], "loops": {"loop": [{"acc": "int", "x": "int"}]},
                               "values": {"flip": 100, "n": 50}}}}
    # Floats from the first call on: a float is no value a profile keeps.
    done = _tool("brili", "--write-profile", str(path), "50", "0", stdin=src)
    assert json.loads(path.read_text())["functions"] == {
        "step": {"kinds": [{"acc": "float", "x": "float"}], "values": {"fl": True}},
        "main": {"kinds": [], "loops": {"loop": [{"acc": "float", "x": "float"}]},
                 "values": {"flip": 0, "n": 50}}}
    # Types that changed in the run: a set for each phase, the longer first; and
    # the values no longer nearly always the same.
    done = _tool("brili", "--write-profile", str(path), "50", "30", stdin=src)
    assert json.loads(path.read_text())["functions"] == {
        "step": {"kinds": [{"acc": "int", "x": "int"}, {"acc": "float", "x": "float"}]},
        "main": {"kinds": [], "loops": {"loop": [{"acc": "int", "x": "int"},
                                                 {"acc": "float", "x": "float"}]},
                 "values": {"flip": 30, "n": 50}}}


def test_a_value_nearly_every_call_passes_is_profiled_and_speculated_on(tmp_path):
    """@quot divides by d, 7 in all calls but the last (0: the interpreter's error):
    the profile says 7 (the share VALUE_SHARE), and the executable built for it
    runs exactly, on that input and on one where d is 3."""
    prog = parse_program(program_text("type_profile/divide"))
    profile = profile_of(prog, [100, 7])
    assert profile["functions"] == {"quot": {"kinds": [], "values": {"d": 7}},
                                    "main": {"kinds": [], "values": {"d": 7, "n": 100}}}
    assert profile_of(prog, [3, 7])["functions"] == {          # (@quot: too few calls)
        "main": {"kinds": [], "values": {"d": 7, "n": 3}}}
    built = Built(exe=tmp_path / "divide")
    assert build_profiled(prog, profile, built.exe) == 1
    for args in ([100, 7], [50, 3], [0, 7]):
        want_out, _, want_error = run_outcome(prog, args)
        got = run_native(built, args)
        assert (got.returncode, got.stdout, got.stderr) == \
            (2, want_out, f"error: {want_error}\n"), args
    # A function that calls another gets no value variant (it would stop LLVM
    # inlining the callee: ProgramLowering._calls_others).
    text = program_text("type_profile/divide").replace(
        "q: int = div x d;", "q: int = div x d;\n  q: int = call @same q;") + \
        "@same(v: int): int { ret v; }\n"
    prog = parse_program(text)
    assert build_profiled(prog, profile_of(prog, [100, 7]), tmp_path / "calls") == 0


def test_pointer_parameters_are_profiled_with_their_region_type():
    prog = parse_program((BENCHMARKS / "dynamic" / "ackermann.bril").read_text())
    assert profile_of(prog, ["2", "3"])["functions"] == {
        "ack": {"kinds": [{"m": "int", "n": "int", "calls": {"ptr": "any"}}]},
        "main": {"kinds": [], "values": {"m_arg": 2, "n_arg": 3}}}


def test_a_failing_run_writes_its_profile(tmp_path):
    path = tmp_path / "p.json"
    src = b'{"functions": [{"name": "main", "instrs": [' \
          b'{"op": "const", "dest": "x", "type": "any", "value": 1},' \
          b'{"op": "call", "funcs": ["f"], "args": ["x"]}]},' \
          b'{"name": "f", "args": [{"name": "a", "type": "any"}], "instrs": [' \
          b'{"op": "const", "dest": "z", "type": "int", "value": 0},' \
          b'{"op": "div", "dest": "q", "type": "int", "args": ["a", "z"]}]}]}'
    done = _tool("brili", "--write-profile", str(path), stdin=src)
    assert done.returncode == 2 and done.stderr == b"error: division by zero\n"
    assert json.loads(path.read_text())["functions"] == {"f": {"kinds": [{"a": "int"}]}}


def test_an_executable_for_a_profile_takes_the_generic_code_when_types_differ(tmp_path):
    prog = parse_program(FLIP)
    profile = profile_of(prog, [50, 100])          # ints only
    built = Built(exe=tmp_path / "flip")
    # @step's: for its types and values (x 3, fl false), and for its types alone
    assert build_profiled(prog, profile, built.exe) == 2
    for args in ([50, 100], [50, 20], [50, 0], [0, 0]):
        want_out, want_count, _ = run_outcome(prog, args)
        got = run_native(built, args)
        assert (got.stdout, got.stderr) == (want_out, f"total_dyn_inst: {want_count}\n"), args
    # A profile of both phases: a variant for the ints and one for the floats.
    profile = profile_of(prog, [50, 30])
    assert build_profiled(prog, profile, built.exe) == 2
    for args in ([50, 30], [50, 5], [70, 60]):
        want_out, want_count, _ = run_outcome(prog, args)
        got = run_native(built, args)
        assert (got.stdout, got.stderr) == (want_out, f"total_dyn_inst: {want_count}\n"), args


def test_a_loop_whose_values_change_kind_keeps_a_copy_for_each_kind(tmp_path):
    """The kinds at a loop header (ints, then floats after iteration `flip`) are in
    the profile; the executable keeps a copy of the loop for each, its tag tests
    folded, entered from every edge into the header whose values have those kinds
    (the generic loop otherwise), and runs exactly: each phase, neither, both, and
    an error met inside a copy."""
    prog = parse_program(program_text("type_profile/phase_loop"))
    profile = profile_of(prog, [40, 20, -1])
    assert profile["functions"] == {"main": {"kinds": [], "loops": {"loop": [
        {"acc": "int", "step": "int", "x": "int"},
        {"acc": "float", "step": "float", "x": "float"}]},
        "values": {"flip": 20, "n": 40, "stop": -1}}}
    found = type_profile.read_data(profile, "test")
    lowering = llvm_lower.ProgramLowering(link(prog),
                                          assumptions=llvm_lower.assumptions_of(found))
    module = lowering.lower()
    (main,) = lowering.infos.values()
    ((header, (combos, body)),) = main.versions.items()
    assert main.blocks[header].label == "loop" and len(combos) == 2 and len(body) == 8
    built = Built(exe=tmp_path / "phase_loop")
    native.build_executable(module, built.exe)
    assert_exact_natively(prog, built, ([40, 20, -1], [40, 0, -1], [40, 100, -1], [7, 3, -1],
                                        [40, 20, 25], [40, 20, 10]))


def test_the_profile_a_run_gives_its_executable_has_the_kinds_where_loops_moved():
    """Without --write-profile, a run knows the kinds its loops held where they moved
    to generated code (`type_profile.seen`: for the program's executable the
    compile server builds): both phases of the loop, the second found after the
    generated code's test at the header failed and the loop moved again."""
    prog = parse_program(program_text("type_profile/phase_loop"))
    seen = []
    interp.run(prog, ["40", "20", "-1"], out=io.StringIO(), promote_after=5,
               observe=lambda compiled: seen.append(type_profile.seen(compiled)))
    assert seen[0]["functions"] == {"main": {"kinds": [], "loops": {"loop": [
        {"acc": "int", "step": "int", "x": "int"},
        {"acc": "float", "step": "float", "x": "float"}]},
        "values": {"flip": 20, "n": 40, "stop": -1}}}


def test_what_runs_saw_is_merged_for_the_executable():
    """`type_profile.merged`: each function's sets of kinds and each loop header's,
    the old first, new ones added up to the caps (what the runs of a program saw,
    kept in its JIT profile for its executable)."""
    ints, floats = {"a": "int"}, {"a": "float"}
    old = {"bril-type-profile": 1, "functions": {
        "f": {"kinds": [ints], "loops": {"l": [ints]}}, "g": {"kinds": [ints]}}}
    new = {"bril-type-profile": 1, "functions": {
        "f": {"kinds": [floats, ints], "loops": {"l": [floats], "m": [ints]}},
        "h": {"kinds": [], "loops": {"l": [floats]}}}}
    assert type_profile.merged(old, new) == {"bril-type-profile": 1, "functions": {
        "f": {"kinds": [ints, floats], "loops": {"l": [ints, floats], "m": [ints]}},
        "g": {"kinds": [ints]}, "h": {"kinds": [], "loops": {"l": [floats]}}}}
    assert type_profile.merged(None, new)["functions"]["f"]["kinds"] == [floats, ints]
    many = [{"a": "int", "n": str(i)} for i in range(10)]
    big = type_profile.merged(None, {"functions": {"f": {"kinds": many, "loops": {"l": many}}}})
    assert big["functions"]["f"]["kinds"] == many[:type_profile.KINDS_KEPT]
    assert big["functions"]["f"]["loops"]["l"] == many[:interp.HEADER_KINDS_KEPT]


def test_main_s_arguments_merge_while_runs_pass_them_alike():
    """@main's values, from one run to the next: kept while every run passed the
    same, "varying" (and never speculated on again) once one differed."""
    def run_of(**values):
        return {"bril-type-profile": 1, "functions": {"main": {"kinds": [], "values": values}}}
    first = type_profile.merged(None, run_of(n=10, m=7))
    assert first["functions"]["main"] == {"kinds": [], "values": {"n": 10, "m": 7}}
    second = type_profile.merged(first, run_of(n=20, m=7))
    assert second["functions"]["main"] == {"kinds": [], "values": {"m": 7}, "varying": ["n"]}
    third = type_profile.merged(second, run_of(n=10, m=7))
    assert third["functions"]["main"] == second["functions"]["main"]
    assert type_profile.read_data(third, "test")["main"][1] == {"m": 7}


def test_main_gets_a_variant_for_the_arguments_its_loops_compute_with(tmp_path):
    """@main's value variant: m (a divisor in the loop) a constant, n (the loop's
    bound, read by a comparison only) not; run exactly on the input it was built for
    and on others (the test at the start fails: the generic code).  Only arguments
    never assigned, directly or through an `id` copy."""
    prog = parse_program(program_text("main_modulus"))
    profile = profile_of(prog, [50, 1009])
    assert profile["functions"] == {"main": {"kinds": [], "values": {"m": 1009, "n": 50}}}
    found = type_profile.read_data(profile, "test")
    lowering = llvm_lower.ProgramLowering(link(prog),
                                          assumptions=llvm_lower.assumptions_of(found))
    module = lowering.lower()
    (variant,) = lowering.variants_of[0]
    assert variant.constants == {"m": 1009}
    built = Built(exe=tmp_path / "modulus")
    native.build_executable(module, built.exe)
    assert_exact_natively(prog, built, ([50, 1009], [500, 1009], [50, 1013], [3, 0]))
    # Copied into an `any` variable, as a dynamic language's front end does: the
    # argument is the constant.
    text = program_text("main_modulus").replace(
        "@main(n: int, m: int) {", "@main(n: int, m_arg: int) {\n  m: any = id m_arg;")
    prog = parse_program(text)
    lowering = llvm_lower.ProgramLowering(link(prog), assumptions=llvm_lower.assumptions_of(
        type_profile.read_data(profile_of(prog, [50, 1009]), "test")))
    lowering.lower()
    assert [v.constants for v in lowering.variants_of[0]] == [{"m_arg": 1009}]
    # Assigned in the function (its value at the start is no invariant): no variant.
    text = program_text("main_modulus").replace(
        "i: int = add i one;", "i: int = add i one;\n  m: int = add m one;")
    prog = parse_program(text)
    assert build_profiled(prog, profile_of(prog, [50, 1009]), tmp_path / "moving") == 0
    # Read by comparisons only: no variant.
    text = program_text("main_modulus").replace(
        "q: int = div acc m;\n  q: int = mul q m;", "q: int = div acc one;\n  big: bool = gt q m;")
    assert text != program_text("main_modulus")
    prog = parse_program(text)
    assert build_profiled(prog, profile_of(prog, [50, 1009]), tmp_path / "plain") == 0


def test_a_short_trip_count_is_a_constant_and_a_long_one_is_not(tmp_path):
    """benchmarks/spec/closest: every call of @closest passes one count (its outer
    loop's bound) and one dim (the inner loop's, and a stride).  dim is a constant
    of the variant; count only where it is a short trip count (a loop LLVM unrolls
    whole), not 40 (most often the input's size: a value speculated on that changes
    from run to run sends every run to the generic code).  Exact on the input the
    variant was built for, with another count (the variant still holds) and with
    another dim (the generic code)."""
    prog = parse_program((BENCHMARKS / "spec" / "closest.bril").read_text())
    for count, constants in ((40, {"dim": 3}), (12, {"count": 12, "dim": 3})):
        profile = profile_of(prog, [count, 10, 3, 7])
        assert profile["functions"]["closest"]["values"] == {"count": count, "dim": 3}
        lowering = llvm_lower.ProgramLowering(link(prog), assumptions=llvm_lower.assumptions_of(
            type_profile.read_data(profile, "test")))
        module = lowering.lower()
        by_name = {v.name: v.constants for vs in lowering.variants_of.values() for v in vs}
        assert by_name == {"closest": constants, "distance": {"dim": 3}}
    built = Built(exe=tmp_path / "closest")
    native.build_executable(module, built.exe)
    assert_exact_natively(prog, built, ([12, 10, 3, 7], [40, 10, 3, 7], [12, 10, 4, 11],
                                        [5, 3, 0, 1]))


def test_a_run_knows_the_values_its_first_tier_saw_calls_pass():
    """Without --write-profile, a run's first tier counts the values calls pass
    while a function is cold (`type_profile.seen`, for the program's executable):
    @closest after one call (its loop runs long: it moved to generated code in
    that call), one that stays in the first tier after VALUE_CALLS."""
    prog = parse_program((BENCHMARKS / "spec" / "closest.bril").read_text())
    seen = []
    interp.run(prog, ["40", "10", "3", "7"], out=io.StringIO(),
               observe=lambda compiled: seen.append(type_profile.seen(compiled)))
    functions = seen[0]["functions"]
    assert functions["closest"]["values"] == {"count": 40, "dim": 3}
    assert functions["distance"]["values"] == {"dim": 3}
    assert "values" not in functions.get("mod", {})         # (its divisor varies)
    prog = parse_program(program_text("type_profile/divide"))
    for args, values in ((["100", "7"], {"d": 7}), (["3", "7"], None)):
        seen = []
        try:
            interp.run(prog, args, out=io.StringIO(),
                       observe=lambda compiled: seen.append(type_profile.seen(compiled)))
        except Exception:
            pass                # (its last call divides by zero)
        assert seen[0]["functions"].get("quot", {}).get("values") == values, args


def test_a_profile_made_between_calls_counts_the_first_call_once():
    # The cold tier counts a first call's arguments only when a second call comes
    # (most functions are called once); a profile made in between -- the JIT's, at
    # its first ask, from the sampler's thread -- counts them for itself, and the
    # later calls must find them uncounted (they were counted twice: @closest's two
    # calls with one value each read as three, and its value was dropped).
    prog = parse_program("@f(k: int): int {\n  ret k;\n}\n@main {\n}\n")
    compiled, _ = interp.compile_program(prog, out=io.StringIO())
    index = [f["name"] for f in compiled.linked.functions].index("f")
    cold = compiled.cold            # (a run's first tier: not profiling every call)
    assert cold.invoke(index, (7,)) == 7
    assert compiled.observed_values(index) == (1, {"k": {7: 1}}, False)
    for _ in range(3):
        assert cold.invoke(index, (7,)) == 7
    assert compiled.observed_values(index, 4) == (4, {"k": {7: 4}}, False)


def _family_builds(tmp_path):
    """{name: (Built, number of variants)} of the dynamic family, each compiled for
    the profile of a run on its ARGS."""
    nativert.runtime_object()

    def job(path):
        prog = parse_program(path.read_text())
        exe = tmp_path / path.stem
        return Built(exe=exe), build_profiled(prog, profile_of(prog, args_of(path)), exe)
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip([p.stem for p in DYNAMIC], pool.map(job, DYNAMIC)))


def test_the_dynamic_family_runs_exactly_for_profiles_of_another_input(tmp_path):
    """Profiles written on ARGS, executables run on ALT-ARGS: output and -p exact."""
    builds = _family_builds(tmp_path)
    assert len(builds) >= 12
    # (every program with `any` parameters gets variants; others may, for @main's
    # arguments: sieve's n, the modulus of its queries' pseudo-random indices)
    with_any = {p.stem for p in DYNAMIC if any(
        a.get("type") == "any" for f in parse_program(p.read_text())["functions"]
        for a in f.get("args") or [])}
    assert len(with_any) >= 10
    assert with_any <= {name for name, (_, n) in builds.items() if n}
    for path in DYNAMIC:
        built, _ = builds[path.stem]
        args = alt_args_of(path) or args_of(path)
        want_out, want_count, _ = run_outcome(parse_program(path.read_text()), args)
        got = run_native(built, args)
        assert (got.returncode, got.stdout, got.stderr) == \
            (0, want_out, f"total_dyn_inst: {want_count}\n"), path.stem


@settings(max_examples=10, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(case=strategies.phase_cases().filter(
    lambda case: any(f["name"] == "step" for f in case.prog["functions"])))
def test_executables_for_a_profile_are_exact_when_any_values_change_kind(
        tmp_path_factory, case):
    """Generated programs whose `any` values are ints in one phase and floats in
    another (`strategies.phase_cases`) and pass them to an `any` function, compiled
    for the profile of a run on one set of flip points, run on it and on another."""
    profile = profile_of(case.prog, case.argv)
    built = Built(exe=tmp_path_factory.mktemp("phases") / "prog")
    variants = build_profiled(case.prog, profile, built.exe)
    assert variants >= len(profile["functions"])
    for argv in (case.argv, case.alt_argv):
        want_out, want_count, want_error = run_outcome(case.prog, argv)
        got = run_native(built, argv)
        assert got.stdout == want_out, argv
        assert got.stderr == (f"error: {want_error}\n" if want_error is not None
                              else f"total_dyn_inst: {want_count}\n"), argv


def test_brilc_compiles_for_a_profile_and_says_so_in_its_code(tmp_path):
    prof = tmp_path / "flip.prof"
    type_profile.write(str(prof), profile_of(parse_program(FLIP), [50, 100]))
    src = json.dumps(parse_program(FLIP)).encode()
    done = _tool("brilc", "--profile", str(prof), "--emit-llvm", stdin=src)
    assert done.returncode == 0 and b"step.variant" in done.stdout
    plain = _tool("brilc", "--emit-llvm", stdin=src)
    assert plain.returncode == 0 and b"variant" not in plain.stdout


def test_where_a_call_knows_the_tags_it_passes_the_variant_is_inlined(tmp_path):
    # The function callers call only chooses a variant: inlined into each call,
    # whose tags are known, it folds, and the variants are inlined in turn, as the
    # plain executable inlines @powsum (with the choice at the generic code's
    # entry, every call stayed a call: 1.25x slower than without the profile).
    path = BENCHMARKS / "dynamic" / "phases.bril"
    prog = parse_program(path.read_text())
    prof = tmp_path / "phases.prof"
    profile = profile_of(prog, args_of(path))
    assert len(profile["functions"]["powsum"]["kinds"]) == 2    # (ints, floats: variants)
    type_profile.write(str(prof), profile)
    done = _tool("brilc", "--profile", str(prof), "--emit-llvm",
                 stdin=json.dumps(prog).encode())
    assert done.returncode == 0
    calls = [line for line in done.stdout.decode().splitlines()
             if " call " in line and "powsum" in line]
    assert calls == []


@pytest.mark.parametrize("content, message", [
    (None, "cannot read profile"),
    ("{", "is not JSON"),
    ('{"functions": {}}', "is not a type profile"),
    ('{"bril-type-profile": 1, "functions": []}', '"functions" must be an object'),
    ('{"bril-type-profile": 1, "functions": {"f": 3}}', 'function f needs "kinds"'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": {"a": "int"}}}}',
     'function f needs "kinds"'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [{"a": "any"}]}}}',
     'parameter a of f has no type a profile can hold: "any"'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [{"a": {"ptr": {"ptr": "int"}}}]}}}',
     "parameter a of f has no type"),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [], "loops": [1]}}}',
     'the "loops" of f must map labels to lists of objects'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [], "loops": {"l": [{"a": "any"}]}}}}',
     'variable a at .l in f has no type a profile can hold: "any"'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [], "values": {"n": 1.5}}}}',
     'the "values" of f must be an object of bools and 64-bit ints'),
    ('{"bril-type-profile": 1, "functions": {"f": {"kinds": [], "values": {"n": 9223372036854775808}}}}',
     'the "values" of f must be'),
])
def test_a_bad_profile_is_a_one_line_error(tmp_path, content, message):
    prof = tmp_path / "p.json"
    if content is not None:
        prof.write_text(content)
    src = json.dumps(parse_program(FLIP)).encode()
    done = _tool("brilc", "--profile", str(prof), "-o", str(tmp_path / "out"), stdin=src)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_write_profile_neither_traces_nor_compiles(tmp_path):
    done = _tool("brili", "--write-profile", str(tmp_path / "p"), "--trace",
                 str(tmp_path / "t"), stdin=b'{"functions": []}')
    assert done.returncode == 2 and done.stderr == \
        b"error: --write-profile cannot be used with --trace or --jit\n"
