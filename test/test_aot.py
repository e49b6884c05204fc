"""Ahead-of-time native code (`brilc`: bril.backend.llvm_lower, bril.backend.native, brilrt.c).

1. The conformance corpus and our benchmarks: every program is compiled to an
   executable, which must print exactly the expected output (and, for the
   benchmarks, the exact `-p` count); error programs must fail with exit
   status 2 and the expected message.  Programs using what brilc does not
   support are listed in UNSUPPORTED with the reason brilc must give.
2. Tricky ops and run-time behaviour, compared with the interpreter
   (`bril.interpreter.interp`, in process) on the same program and arguments: division
   by zero, INT_MIN / -1, wrap-around, float printing (-0.0, 1e21, NaN,
   Infinity, exact ties, thousands of generated values), chars beyond ASCII,
   heap errors, speculation, undefined variables, @main arguments, recursion,
   `any` values (test/dynamic_programs.py); and random well-typed programs
   (test/strategies.py).
3. The `brilc` command itself (subprocesses), the op table's coverage, and
   the in-process JIT of bril.backend.native.

All executables are built once, in a module-scoped fixture, in parallel
threads (LLVM and the linker release the GIL).
"""

import concurrent.futures
import ctypes
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

import strategies
from corpus import BENCHMARKS, args_of, bril_files, case_id, program_text
from test_speculation import EXPECTED as RESTORES_EXPECTED
from dynamic_programs import DYNAMIC_LOOP, DYNAMIC_LOOP_ERRORS, DYNAMIC_MODES, DYNAMIC_UNITS
from helpers import Built, build, run_native, run_outcome
from bril.backend import native
from bril.native_runtime import nativert
from bril.ir.errors import BrilError
from bril.ir.ops import OPS
from bril.ir.text import parse_program

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None,
                                reason="no C compiler (cc, gcc or clang) to link executables")

INT_MAX = (1 << 63) - 1
INT_MIN = -(1 << 63)


# --- building and running -----------------------------------------------------------------

def assert_same_as_interpreter(prog, built, args=()):
    want_out, want_count, want_error = run_outcome(prog, args)
    got = run_native(built, args)
    assert got.stdout == want_out
    if want_error is None:
        assert (got.returncode, got.stderr) == (0, f"total_dyn_inst: {want_count}\n")
    else:
        assert (got.returncode, got.stderr) == (2, f"error: {want_error}\n")
    return got


# --- what is compiled -----------------------------------------------------------------------

def _corpus_cases():
    cases = []
    for folder in (("benchmarks",), ("test", "interp"), ("test", "interp-error")):
        for p in bril_files(*folder):
            cases.append((case_id(p), p, args_of(p), ()))
    for p in bril_files("test", "linking"):
        libs = tuple(str(p.parent / d) for d in args_of(p))
        cases.append((case_id(p), p, [], libs))
    for p in bril_files(root=BENCHMARKS):
        cases.append(("ours/" + case_id(p, BENCHMARKS), p, args_of(p), ()))
    return cases


CORPUS = _corpus_cases()

# Corpus programs brilc rejects, with (a part of) the one-line reason it must give.
UNSUPPORTED = {}

# Small programs for section 2, built alongside the corpus: test/programs/aot/NAME.bril
# (each says what it is for where the tests do not).
UNIT = {name: program_text(f"aot/{name}") for name in [
    "ssa2", "arith", "int_min_runtime", "float_ops", "float_bits", "float_print_many", "chars",
    "print_kinds", "heap", "heap_kinds", "heap_table", "speculation", "spec_loop", "abort_outside",
    "undefined_var", "ill_typed_when_run", "static_errors_when_run", "main_args", "recursion",
    "nonvoid_returns_nothing", "typed_call_without_dest", "void_call_with_dest",
    "void_returns_a_value", "any_pointer_of_another_type"]}
UNIT["spec_restores"] = program_text("speculation_restores")     # (test_speculation.py's)
UNIT["spec_call"] = "@f { } @main { speculate; call @f; }"
UNIT["spec_ret"] = "@main { speculate; ret; }"
UNIT["spec_implicit_ret"] = "@main { speculate; }"
UNIT["dynamic_loop"] = DYNAMIC_LOOP
UNIT.update({name: src for name, (src, _) in DYNAMIC_MODES.items()})
UNIT.update(DYNAMIC_UNITS)


# --- the fixture ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{case id or UNIT name: Built}, compiled in parallel."""
    out = tmp_path_factory.mktemp("aot")
    nativert.runtime_object()     # compile the run-time library once, before the threads
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {}
        for i, (cid, path, _args, libs) in enumerate(CORPUS):
            def job(path=path, libs=libs, exe=out / f"c{i}"):
                try:
                    prog = parse_program(path.read_text(), filename=str(path))
                except BrilError as e:
                    return Built(error=e)
                return build(prog, exe, base_dir=str(path.parent), lib_dirs=libs,
                             filename=str(path))
            futures[cid] = pool.submit(job)
        for name, src in UNIT.items():
            futures[name] = pool.submit(build, parse_program(src), out / f"u_{name}")
        return {key: f.result() for key, f in futures.items()}


def unit(name):
    return parse_program(UNIT[name])


# --- 1. corpus --------------------------------------------------------------------------------

def test_corpus_is_present():
    assert len(CORPUS) > 150


@pytest.mark.parametrize("cid, path, args, libs", CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_program(built, cid, path, args, libs):
    b = built[cid]
    err = path.with_suffix(".err")
    if cid in UNSUPPORTED:
        assert b.error is not None and UNSUPPORTED[cid] in b.error.message
        assert b.error.message.startswith("brilc does not support ")
        return
    if b.error is not None and err.exists():
        # Found while linking (e.g. two @main): brilc reports the interpreter's message.
        assert f"error: {b.error.message}" == err.read_text().strip()
        return
    got = run_native(b, args)
    out = path.with_suffix(".out")
    if out.exists():
        with open(out, newline="") as fh:
            assert got.stdout == fh.read()
    if err.exists():
        assert got.returncode == 2
        assert got.stderr.strip() == err.read_text().strip()
        return
    assert got.returncode == 0, got.stderr
    prof = path.with_suffix(".prof")
    if prof.exists():
        assert got.stderr.strip() == prof.read_text().strip()


# --- 2. ops and run-time behaviour, against the interpreter -------------------------------------

@pytest.mark.parametrize("a, b", [
    (7, 2), (-7, 2), (7, -2), (-7, -2), (INT_MAX, 1), (INT_MIN, -1), (INT_MIN, 1),
    (INT_MAX, INT_MAX), (INT_MIN, INT_MIN), (3037000500, 3037000500), (5, 0), (0, 0),
])
def test_integer_arithmetic_wraps_and_division_is_checked(built, a, b):
    got = assert_same_as_interpreter(unit("arith"), built["arith"], [a, b])
    if b == 0:
        assert got.stderr == "error: division by zero\n" and got.stdout.count("\n") == 1


def test_int_min_divided_by_minus_one_at_run_time(built):
    got = assert_same_as_interpreter(unit("int_min_runtime"), built["int_min_runtime"])
    assert got.stdout == f"{INT_MIN} {INT_MIN} {INT_MIN} {INT_MAX}\n"


@pytest.mark.parametrize("x, y", [
    ("1", "0"), ("-1", "0"), ("0", "0"), ("-0", "0"), ("0.1", "0.2"), ("1e308", "10"),
    ("1e21", "1"), ("Infinity", "-Infinity"), ("1e-320", "3"), ("2.5", "2.5"),
])
def test_float_ops(built, x, y):
    assert_same_as_interpreter(unit("float_ops"), built["float_ops"], [x, y])


@pytest.mark.parametrize("value", [
    0.0, -0.0, 0.1, 1e21, 1e-7, 1.5e-7, 1e10, 9999999999.999998, 12345678901.00390625,
    1e-10, 1.7976931348623157e308, 5e-324, 123456.789, 6.02e23, 4503599627370495.5,
    2.0 ** -18, -(2.0 ** -18), 3 * 2.0 ** -18, 1e10 + 1 / 256, 0.5, 1e18, 1e17 + 16,
    float("inf"), float("-inf"), float("nan"),
])
def test_float_printing_edge_cases(built, value):
    import struct
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    assert_same_as_interpreter(unit("float_bits"), built["float_bits"], [bits])


def test_float_printing_on_thousands_of_values(built):
    got = assert_same_as_interpreter(unit("float_print_many"), built["float_print_many"],
                                     [3000, 12345])
    assert got.stdout.count("\n") == 3000


@pytest.mark.parametrize("c, n", [
    ("a", 98), ("é", 20013), ("😀", 65), ("z", 1114111), ("中", 55295), ("b", 57344),
    ("a", 55296), ("a", 57343), ("a", -1), ("a", 1114112),
])
def test_chars(built, c, n):
    assert_same_as_interpreter(unit("chars"), built["chars"], [c, n])


def test_print_of_every_kind(built):
    got = assert_same_as_interpreter(unit("print_kinds"), built["print_kinds"])
    assert got.stdout == "-3 true 2.50000000000000000 x [object Object]\n\n"


@pytest.mark.parametrize("mode, message", [
    (0, "Uninitialized heap location 0 and/or illegal offset 2"),
    (1, "Uninitialized heap location 0 and/or illegal offset -1"),
    (2, "Pointer q points to uninitialized data"),
    (3, "Uninitialized heap location 0 and/or illegal offset 0"),
    (4, "Tried to free illegal memory location base: 0, offset: 0. Offset must be 0."),
    (5, "Tried to free illegal memory location base: 0, offset: 1. Offset must be 0."),
    (6, "Some memory locations have not been freed by end of execution."),
    (7, "must allocate a positive amount of memory: 0 <= 0"),
    (8, "cannot allocate 5000000000 entries"),
    (9, None),                     # a billion cells, one used: allocated lazily
    (10, None),
])
def test_heap_errors(built, mode, message):
    got = assert_same_as_interpreter(unit("heap"), built["heap"], [mode])
    if message is not None:
        assert got.stderr == f"error: {message}\n"


def test_heap_cells_of_every_kind(built):
    assert_same_as_interpreter(unit("heap_kinds"), built["heap_kinds"], [40])


@pytest.mark.parametrize("mode", range(5))
def test_the_region_table_after_thousands_of_regions(built, mode):
    # (small regions live in their table entry; 3,000 regions allocated and freed
    # give whole pages of the table back: a use of a region freed there is the
    # interpreter's error)
    got = assert_same_as_interpreter(unit("heap_table"), built["heap_table"], [mode, 1000])
    assert got.stdout.startswith("499500\n")


@pytest.mark.parametrize("mode, expected", [
    (0, "1\n"),                    # an inner commit returns to the outer speculation
    (1, "2\n1\n"),                 # an inner abort stays in the outer one
    (2, None),                     # an abort unsets variables assigned while speculating
    (3, None),                     # one commit too many
])
def test_speculation(built, mode, expected):
    got = assert_same_as_interpreter(unit("speculation"), built["speculation"], [mode])
    if expected is not None:
        assert got.stdout == expected


def test_speculation_in_a_loop_releases_its_snapshots(built):
    # 20 million snapshots would not fit the 1 GB stack if each kept its space.
    got = run_native(built["spec_loop"], [20_000_000])
    assert got.returncode == 0, got.stderr
    assert_same_as_interpreter(unit("spec_loop"), built["spec_loop"], [1000])


@pytest.mark.parametrize("mode", sorted(RESTORES_EXPECTED))
def test_an_abort_restores_what_its_target_reads(built, mode):
    got = assert_same_as_interpreter(unit("spec_restores"), built["spec_restores"], [mode])
    assert got.stdout == RESTORES_EXPECTED[mode][0]


@pytest.mark.parametrize("name", ["spec_call", "spec_ret", "spec_implicit_ret",
                                  "abort_outside"])
def test_speculation_errors(built, name):
    got = assert_same_as_interpreter(unit(name), built[name])
    assert got.returncode == 2


@pytest.mark.parametrize("mode", range(8))
def test_ssa2_shadows_and_undef(built, mode):
    # Shadows rolled back by an abort (undef again), undef met by each kind of
    # use (add, print, call argument, store, and, br), a get with no set.
    got = assert_same_as_interpreter(unit("ssa2"), built["ssa2"], [mode])
    assert got.stdout.startswith("1\n")
    assert got.returncode == (0 if mode == 7 else 2)


# Our benchmarks converted by `bril-opt to-ssa` (the ssa2 form Bril users get).
SSA2_CONVERTED = ["loops/collatz-max", "memory/merge-sort", "float/simpson", "char/caesar"]


@pytest.mark.parametrize("name", SSA2_CONVERTED)
def test_benchmarks_converted_to_ssa2(tmp_path, name):
    from bril.passes.ssa import to_ssa
    path = BENCHMARKS / f"{name}.bril"
    prog = to_ssa(parse_program(path.read_text()))
    assert any(i.get("op") == "get" for f in prog["functions"] for i in f["instrs"])
    got = assert_same_as_interpreter(prog, build(prog, tmp_path / "prog"), args_of(path))
    assert got.stdout == path.with_suffix(".out").read_text()


@pytest.mark.parametrize("mode", sorted(DYNAMIC_LOOP_ERRORS))
def test_any_values_of_every_kind_and_their_errors(built, mode):
    # ptr<any> cells, `any` parameters and results, typed variables holding what a
    # load or `id` gave them; each mode meets a value of the wrong kind at run time.
    got = assert_same_as_interpreter(unit("dynamic_loop"), built["dynamic_loop"], [mode, 20])
    message = DYNAMIC_LOOP_ERRORS[mode]
    assert got.stderr == (f"error: {message}\n" if message else "total_dyn_inst: 882\n")


@pytest.mark.parametrize("name, mode", [(n, m) for n, (_, errors) in DYNAMIC_MODES.items()
                                        for m in errors])
def test_any_values_with_undef_and_pointers(built, name, mode):
    # ssa2's undef held as `any`; load/store/ptradd through a pointer declared `any`.
    got = assert_same_as_interpreter(unit(name), built[name], [mode])
    message = DYNAMIC_MODES[name][1][mode]
    assert (got.stderr == f"error: {message}\n") if message else got.returncode == 0


@pytest.mark.parametrize("name", sorted(DYNAMIC_UNITS))
def test_any_values_at_the_edges(built, name):
    assert_same_as_interpreter(unit(name), built[name])


def test_a_pointer_of_another_type_held_as_any_is_refused_when_used(built):
    from bril.ir import messages as M
    got = run_native(built["any_pointer_of_another_type"])
    assert got.stdout == "1\n"
    assert (got.returncode, got.stderr) == (
        2, "error: " + M.text(M.ANY_POINTER, type="ptr<int>") + "\n")


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_a_value_returned_by_a_function_without_a_return_type(built, mode):
    got = assert_same_as_interpreter(unit("void_returns_a_value"), built["void_returns_a_value"],
                                     [mode])
    assert got.returncode == 2


@pytest.mark.parametrize("arg", ["true", "false"])
def test_undefined_variable_only_on_the_path_that_reads_it(built, arg):
    assert_same_as_interpreter(unit("undefined_var"), built["undefined_var"], [arg])


@pytest.mark.parametrize("arg", ["true", "false"])
def test_ill_typed_instruction_fails_only_when_it_runs(built, arg):
    assert_same_as_interpreter(unit("ill_typed_when_run"), built["ill_typed_when_run"], [arg])


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 4])
def test_static_errors_are_raised_when_they_run(built, mode):
    assert_same_as_interpreter(unit("static_errors_when_run"), built["static_errors_when_run"],
                               [mode])


@pytest.mark.parametrize("name", ["nonvoid_returns_nothing", "typed_call_without_dest",
                                  "void_call_with_dest"])
def test_call_result_errors(built, name):
    got = assert_same_as_interpreter(unit(name), built[name])
    assert got.returncode == 2


@pytest.mark.parametrize("args", [
    ["42", "2.5", "true", "x"],
    [" 7 ", "1e400", "false", "é"],
    ["0x10", "-0", "true", "🐱"],
    ["1e3", ".5", "false", "a"],
    ["-0", "5.", "true", "a"],
    ["", "-Infinity", "true", "a"],
    [str(INT_MAX), "0.1", "true", "a"],
    [str(INT_MIN), "1e-400", "true", "a"],
    ["0b101", " 3.25 ", "true", "a"],
    ["9223372036854775808", "1", "true", "a"],
    ["0xffffffffffffffff", "1", "true", "a"],
    ["1.5", "1", "true", "a"],
    ["true", "1", "true", "a"],
    ["Infinity", "1", "true", "a"],
    ["1", "abc", "true", "a"],
    ["1", "0x10", "true", "a"],
    ["1", "0x0", "true", "a"],
    ["1", "", "true", "a"],
    ["1", "1.5e", "true", "a"],
    ["1", "1", "1", "a"],
    ["1", "1", "True", "a"],
    ["1", "1", "true", "ab"],
    ["1", "1", "true", ""],
    ["1", "1", "true"],
    ["1", "1", "true", "a", "b"],
])
def test_main_arguments(built, args):
    prog = unit("main_args")
    want_out, _, want_error = run_outcome(prog, args)
    got = run_native(built["main_args"], args, profile=False)
    assert got.stdout == want_out
    if want_error is None:
        assert (got.returncode, got.stderr) == (0, "")
    else:
        assert (got.returncode, got.stderr) == (2, f"error: {want_error}\n")


def test_profile_flag_may_come_anywhere_and_negative_numbers_pass(built):
    b = built["arith"]
    done = subprocess.run([str(b.exe), "-5", "-p", "3"], capture_output=True, text=True)
    assert done.stdout == "-2 -8 -15\n-1\n"
    assert done.stderr == "total_dyn_inst: 6\n"


def test_deep_recursion(built):
    got = run_native(built["recursion"], [150_000])
    assert (got.returncode, got.stdout) == (0, "150000\n")


def test_runaway_recursion_is_an_error(built):
    got = run_native(built["recursion"], [1_000_000])
    assert got.returncode == 2
    assert got.stderr == "error: recursion too deep (more than 200000 nested calls)\n"


@settings(max_examples=20, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(case=strategies.cases())
def test_random_programs_behave_as_in_the_interpreter(tmp_path_factory, case):
    # Random well-typed programs (test/strategies.py): calls, recursion, loops,
    # speculation, memory, shadow variables, run-time errors; on two inputs each,
    # as generated and converted to ssa2 by `bril-opt to-ssa`.
    from bril.passes.ssa import to_ssa
    for prog in (case.prog, to_ssa(case.prog)):     # and its ssa2 form (set/get/undef)
        b = build(prog, tmp_path_factory.mktemp("random") / "prog")
        for argv in (case.argv, case.alt_argv):
            assert_same_as_interpreter(prog, b, argv)


# --- 3. brilc, the op table, the JIT ---------------------------------------------------------

def test_every_op_is_lowered_or_declared_unsupported():
    from bril.backend.llvm_lower import LOWER, UNSUPPORTED as NOT_LOWERED
    assert set(LOWER) | set(NOT_LOWERED) == set(OPS)
    assert not set(LOWER) & set(NOT_LOWERED)


def brilc(args, input=None, cwd=None):
    return subprocess.run([sys.executable, "-P", "-m", "bril.cli.brilc", *args], input=input,
                          capture_output=True, cwd=cwd, timeout=120)


SUM = program_text("sum_below_n")


def test_brilc_builds_an_executable_from_json(tmp_path):
    prog = parse_program(SUM)
    exe = tmp_path / "sum"
    done = brilc(["-o", str(exe)], input=json.dumps(prog).encode())
    assert done.returncode == 0 and done.stderr == b""
    run_done = subprocess.run([str(exe), "-p", "10"], capture_output=True, text=True)
    want_out, want_count, _ = run_outcome(prog, [10])
    assert (run_done.stdout, run_done.stderr) == (want_out, f"total_dyn_inst: {want_count}\n")


def test_brilc_reads_text_files_and_names_the_output_after_them(tmp_path):
    (tmp_path / "sum.bril").write_text(SUM)
    done = brilc(["-f", "sum.bril", "-O", "0"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_done = subprocess.run([str(tmp_path / "sum"), "4"], capture_output=True, text=True)
    assert run_done.stdout == "6\n"


def test_brilc_replaces_its_output_whole_and_leaves_nothing_beside_it(tmp_path):
    # (each output is written under another name beside it, then renamed)
    (tmp_path / "sum.bril").write_text(SUM)
    for args, out in ((["-o", "sum"], "sum"), (["-c"], "sum.o"),
                      (["--emit-llvm", "-o", "sum.ll"], "sum.ll")):
        (tmp_path / out).write_text("an older file")
        assert brilc(["-f", "sum.bril"] + args, cwd=tmp_path).returncode == 0
        assert (tmp_path / out).read_bytes() != b"an older file"
    bad = brilc(["-f", "missing.bril", "-o", "sum"], cwd=tmp_path)
    assert bad.returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sum", "sum.bril", "sum.ll", "sum.o"]
    assert subprocess.run([str(tmp_path / "sum"), "4"], capture_output=True,
                          text=True).stdout == "6\n"


def test_brilc_emits_llvm_ir_and_objects(tmp_path):
    (tmp_path / "sum.bril").write_text(SUM)
    ir = brilc(["-f", "sum.bril", "--emit-llvm"], cwd=tmp_path)
    assert ir.returncode == 0
    assert b"define void @bril_start" in ir.stdout
    obj = brilc(["-f", "sum.bril", "-c"], cwd=tmp_path)
    assert obj.returncode == 0
    assert (tmp_path / "sum.o").read_bytes()[:4] == b"\x7fELF"


def test_no_count_executables_refuse_profiling(tmp_path):
    (tmp_path / "sum.bril").write_text(SUM)
    assert brilc(["-f", "sum.bril", "--no-count"], cwd=tmp_path).returncode == 0
    plain = subprocess.run([str(tmp_path / "sum"), "5"], capture_output=True, text=True)
    assert plain.stdout == "10\n"
    prof = subprocess.run([str(tmp_path / "sum"), "-p", "5"], capture_output=True, text=True)
    assert prof.returncode == 2 and prof.stderr.startswith("error: -p needs instruction counts")


@pytest.mark.parametrize("args, src, message", [
    ([], "@main(x: any) { print x; }", "error: brilc does not support a any parameter of @main"),
    ([], "@main { a: int = const 1; b: bool = const true; set s a; set s b; }",
     "error: brilc does not support shadow variable s with two types"),
    ([], "@main { a: int = const 1; a: bool = const true; }",
     "error: brilc does not support variable a with two types"),
    ([], "@main(p: ptr<int>) { }", "error: brilc does not support a ptr<int> parameter"),
    ([], "@notmain { }", "error: no function of name main found"),
    (["-O", "7"], SUM, "error: argument -O: invalid choice"),
    (["--bogus"], SUM, "error: unrecognized arguments: --bogus"),
], ids=["any", "ssa2-two-types", "two-types", "ptr-param", "no-main", "bad-level", "bad-option"])
def test_brilc_errors_are_one_line(tmp_path, args, src, message):
    done = brilc(args + ["-o", str(tmp_path / "x")],
                 input=json.dumps(parse_program(src)).encode())
    err = done.stderr.decode()
    assert done.returncode == 2
    assert err.startswith(message) and err.count("\n") == 1


@pytest.mark.parametrize("where, reason", [
    ("missing/x", "No such file or directory"), (".", "Is a directory")],
    ids=["no-folder", "a-folder"])
def test_brilc_says_when_it_cannot_write_its_output(tmp_path, where, reason):
    # (the linker's message named a temporary file; a rename onto a folder was an
    # "internal error")
    out = tmp_path / where
    done = brilc(["-o", str(out)], input=json.dumps(parse_program(SUM)).encode())
    assert done.returncode == 2
    assert done.stderr.decode() == f"error: cannot write {out}: {reason}\n"
    assert list(tmp_path.iterdir()) == []          # (nothing left beside it)


def test_jit_compiles_in_process_with_a_cache_and_callbacks():
    from llvmlite import ir
    i64 = ir.IntType(64)
    module = ir.Module("jit_test")
    callback = ir.Function(module, ir.FunctionType(i64, [i64]), "py_twice")
    fn = ir.Function(module, ir.FunctionType(i64, [i64]), "plus_twice")
    bld = ir.IRBuilder(fn.append_basic_block())
    bld.ret(bld.add(fn.args[0], bld.call(callback, [fn.args[0]])))

    jit = native.JIT()
    proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
    twice = proto(lambda x: 2 * x)
    jit.add_symbol("py_twice", ctypes.cast(twice, ctypes.c_void_p).value, keep=twice)
    addresses = jit.compile(module)
    assert jit.compile(str(module)) is addresses       # the same IR is compiled once
    assert proto(addresses["plus_twice"])(5) == 15
