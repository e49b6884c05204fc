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
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

import strategies
from corpus import BENCHMARKS, args_of, bril_files, case_id
from test_speculation import EXPECTED as RESTORES_EXPECTED, RESTORES
from dynamic_programs import DYNAMIC_LOOP, DYNAMIC_LOOP_ERRORS, DYNAMIC_MODES, DYNAMIC_UNITS
from bril.backend import native
from bril.native_runtime import nativert
from bril.ir.errors import BrilError
from bril.interpreter.interp import run
from bril.ir.ops import OPS
from bril.ir.text import parse_program

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None,
                                reason="no C compiler (cc, gcc or clang) to link executables")

INT_MAX = (1 << 63) - 1
INT_MIN = -(1 << 63)


# --- building and running -----------------------------------------------------------------

class Built:
    def __init__(self, exe=None, error=None):
        self.exe = exe          # path of the executable, or None
        self.error = error      # the BrilError brilc raised, or None


def build(prog, exe, base_dir=None, lib_dirs=(), filename=None):
    from bril.backend import llvm_lower
    try:
        module = llvm_lower.lower_program(prog, base_dir=base_dir, lib_dirs=lib_dirs,
                                          filename=filename)
        native.build_executable(module, exe)
    except BrilError as e:
        return Built(error=e)
    except Exception as e:      # a bug: fail the one test that needs this program
        return Built(error=BrilError(f"crashed: {type(e).__name__}: {e}"))
    return Built(exe=exe)


class Run:
    def __init__(self, done):
        self.returncode = done.returncode
        self.stdout = done.stdout.decode("utf-8")
        self.stderr = done.stderr.decode("utf-8")


def run_native(built, args=(), profile=True):
    assert built.error is None, f"brilc failed: {built.error}"
    argv = [str(built.exe)] + (["-p"] if profile else []) + ["--"] + [str(a) for a in args]
    return Run(subprocess.run(argv, capture_output=True, timeout=120))


def interp_result(prog, args=()):
    """(stdout, count or None, error message or None) of the interpreter."""
    out = io.StringIO()
    try:
        count = run(prog, [str(a) for a in args], out=out)
        return out.getvalue(), count, None
    except BrilError as e:
        return out.getvalue(), None, e.message


def assert_same_as_interpreter(prog, built, args=()):
    want_out, want_count, want_error = interp_result(prog, args)
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

# Small programs for section 2 (Bril text), built alongside the corpus.
UNIT = {}

UNIT["ssa2"] = """
@f(a: int): int {
  set r a;
  r: int = get;
  ret r;
}
@main(mode: int) {
  zero: int = const 0; one: int = const 1; two: int = const 2; three: int = const 3;
  four: int = const 4; five: int = const 5; six: int = const 6;
  u: int = undef;
  v: int = id u;
  set s v;
  b: bool = undef;
  set bs b;
  set k one;
  speculate;
  set k two;
  set s one;
  no: bool = const false;
  guard no .aborted;
  commit;
.aborted:
  k: int = get;
  print k;
  s: int = get;
  m0: bool = eq mode zero;
  br m0 .add .n1;
.add:
  x: int = add s one;
  ret;
.n1:
  m1: bool = eq mode one;
  br m1 .print .n2;
.print:
  print k s;
  ret;
.n2:
  m2: bool = eq mode two;
  br m2 .call .n3;
.call:
  y: int = call @f s;
  ret;
.n3:
  m3: bool = eq mode three;
  br m3 .store .n4;
.store:
  p: ptr<int> = alloc one;
  store p s;
  free p;
  ret;
.n4:
  bs: bool = get;
  m4: bool = eq mode four;
  br m4 .and .n5;
.and:
  c: bool = and bs bs;
  ret;
.n5:
  m5: bool = eq mode five;
  br m5 .br .n6;
.br:
  br bs .n6 .n6;
.n6:
  m6: bool = eq mode six;
  br m6 .noset .fine;
.noset:
  nothere: int = get;
  ret;
.fine:
  w: int = id s;
  z: int = call @f k;
  print z;
}
"""

UNIT["arith"] = """
@main(a: int, b: int) {
  s: int = add a b;
  d: int = sub a b;
  m: int = mul a b;
  print s d m;
  q: int = div a b;
  print q;
}"""

UNIT["int_min_runtime"] = """
@main {
  one: int = const 1;
  two: int = const 2;
  x: int = const 4611686018427387904;
  min: int = mul x two;
  m1: int = sub one two;
  q: int = div min m1;
  n: int = mul min m1;
  max: int = sub min one;
  print min q n max;
}"""

UNIT["float_ops"] = """
@main(x: float, y: float) {
  a: float = fadd x y;
  s: float = fsub x y;
  m: float = fmul x y;
  d: float = fdiv x y;
  print a s m d;
  e: bool = feq x y;
  l: bool = flt x y;
  le: bool = fle x y;
  g: bool = fgt x y;
  ge: bool = fge x y;
  print e l le g ge;
}"""

UNIT["float_bits"] = """
@main(bits: int) {
  f: float = bits2float bits;
  back: int = float2bits f;
  print f back;
}"""

# Thousands of floats: random bit patterns, values in the fixed-point range
# [1e-10, 1e10) with random mantissas, exact ties at the 17th decimal (odd
# multiples of 2**-18) and at the 18th significant digit (1e10 + odd/256).
UNIT["float_print_many"] = """
@main(n: int, seed: int) {
  x: int = id seed;
  a: int = const 6364136223846793005;
  c: int = const 1442695040888963407;
  zero: int = const 0;
  one: int = const 1;
  p52: int = const 4503599627370496;
  d4096: int = const 4096;
  d67: int = const 67;
  e0: int = const 990;
  min: int = const -9223372036854775807;
  min: int = sub min one;
  k: float = const 1;
  two: float = const 2;
  tick: float = const 0.000003814697265625;
  big: float = const 10000000000;
  frac: float = const 0.00390625;
  i: int = const 0;
.loop:
  more: bool = lt i n;
  br more .body .done;
.body:
  x: int = mul x a;
  x: int = add x c;
  f: float = bits2float x;
  m: int = div x d4096;
  neg: bool = lt m zero;
  br neg .flip .mant;
.flip:
  m: int = sub zero m;
.mant:
  q: int = div i d67;
  q: int = mul q d67;
  e: int = sub i q;
  e: int = add e e0;
  bits: int = mul e p52;
  bits: int = add bits m;
  g: float = bits2float bits;
  gn: int = add bits min;
  h: float = bits2float gn;
  t: float = fmul k tick;
  u: float = fmul k frac;
  u: float = fadd big u;
  print f g h t u;
  k: float = fadd k two;
  i: int = add i one;
  jmp .loop;
.done:
}"""

UNIT["chars"] = """
@main(c: char, n: int) {
  i: int = char2int c;
  print c i;
  d: char = int2char n;
  lt: bool = clt c d;
  le: bool = cle c d;
  eq: bool = ceq c d;
  ge: bool = cge c d;
  gt: bool = cgt c d;
  print d lt le eq ge gt;
}"""

UNIT["print_kinds"] = """
@main {
  i: int = const -3;
  b: bool = const true;
  f: float = const 2.5;
  c: char = const 'x';
  one: int = const 1;
  p: ptr<int> = alloc one;
  print i b f c p;
  print;
  free p;
}"""

# Heap errors, one scenario per value of `mode`.
UNIT["heap"] = """
@main(mode: int) {
  two: int = const 2;
  one: int = const 1;
  p: ptr<int> = alloc two;
  store p two;
  v: int = load p;
  print v;
  m: int = const 0;
  is: bool = eq mode m;
  br is .oob .n1;
.oob:
  q: ptr<int> = ptradd p two;
  w: int = load q;
.n1:
  m: int = add m one;
  is: bool = eq mode m;
  br is .negative .n2;
.negative:
  m1: int = sub m two;
  q: ptr<int> = ptradd p m1;
  store q two;
.n2:
  m: int = add m one;
  is: bool = eq mode m;
  br is .uninit .n3;
.uninit:
  q: ptr<int> = ptradd p one;
  w: int = load q;
.n3:
  m: int = add m one;
  is: bool = eq mode m;
  br is .after_free .n4;
.after_free:
  free p;
  w: int = load p;
.n4:
  m: int = add m one;
  is: bool = eq mode m;
  br is .double_free .n5;
.double_free:
  free p;
  free p;
.n5:
  m: int = add m one;
  is: bool = eq mode m;
  br is .free_offset .n6;
.free_offset:
  q: ptr<int> = ptradd p one;
  free q;
.n6:
  m: int = add m one;
  is: bool = eq mode m;
  br is .leak .n7;
.leak:
  print mode;
  ret;
.n7:
  m: int = add m one;
  is: bool = eq mode m;
  br is .zero .n8;
.zero:
  z: int = const 0;
  r: ptr<int> = alloc z;
.n8:
  m: int = add m one;
  is: bool = eq mode m;
  br is .huge .n9;
.huge:
  h: int = const 5000000000;
  r: ptr<int> = alloc h;
.n9:
  m: int = add m one;
  is: bool = eq mode m;
  br is .lazy .n10;
.lazy:
  h: int = const 1000000000;
  r: ptr<int> = alloc h;
  k: int = const 1000;
  e: ptr<int> = ptradd r k;
  store e h;
  w: int = load e;
  print w;
  free r;
.n10:
  free p;
}"""

# Nested regions, pointers to pointers, every element type.
UNIT["heap_kinds"] = """
@main(n: int) {
  ps: ptr<ptr<float>> = alloc n;
  bs: ptr<bool> = alloc n;
  cs: ptr<char> = alloc n;
  i: int = const 0;
  one: int = const 1;
  half: float = const 0.5;
  onef: float = const 1;
  acc: float = const 0;
  c: char = const 'λ';
.fill:
  more: bool = lt i n;
  br more .body .use;
.body:
  row: ptr<float> = alloc n;
  slot: ptr<ptr<float>> = ptradd ps i;
  store slot row;
  acc: float = fadd acc half;
  store row acc;
  odd: bool = flt acc onef;
  b: ptr<bool> = ptradd bs i;
  store b odd;
  cp: ptr<char> = ptradd cs i;
  store cp c;
  i: int = add i one;
  jmp .fill;
.use:
  i: int = const 0;
.read:
  more: bool = lt i n;
  br more .rbody .end;
.rbody:
  slot: ptr<ptr<float>> = ptradd ps i;
  row: ptr<float> = load slot;
  v: float = load row;
  b: ptr<bool> = ptradd bs i;
  bv: bool = load b;
  cp: ptr<char> = ptradd cs i;
  cv: char = load cp;
  print v bv cv row;
  free row;
  i: int = add i one;
  jmp .read;
.end:
  free ps;
  free bs;
  free cs;
}"""

UNIT["speculation"] = """
@main(mode: int) {
  f: bool = const false;
  t: bool = const true;
  v: int = const 1;
  zero: int = const 0;
  one: int = const 1;
  two: int = const 2;
  is: bool = eq mode zero;
  br is .nested .m1;
.nested:
  speculate;
  v: int = const 2;
  speculate;
  v: int = const 3;
  commit;
  guard f .out;
  commit;
.out:
  print v;
  ret;
.m1:
  is: bool = eq mode one;
  br is .inner .m2;
.inner:
  speculate;
  v: int = const 2;
  speculate;
  v: int = const 3;
  guard f .in_abort;
.in_abort:
  print v;
  guard t .still;
.still:
  guard f .outer;
.outer:
  print v;
  ret;
.m2:
  is: bool = eq mode two;
  br is .unset .m3;
.unset:
  speculate;
  y: int = const 5;
  guard f .after;
.after:
  print y;
  ret;
.m3:
  speculate;
  speculate;
  commit;
  commit;
  commit;
}"""

UNIT["spec_loop"] = """
@main(n: int) {
  i: int = const 0;
  s: int = const 0;
  one: int = const 1;
  three: int = const 3;
.loop:
  more: bool = lt i n;
  br more .body .done;
.body:
  speculate;
  s: int = add s i;
  q: int = div i three;
  q: int = mul q three;
  r: bool = eq q i;
  notr: bool = not r;
  guard notr .undo;
  commit;
.undo:
  i: int = add i one;
  jmp .loop;
.done:
  print s;
}"""

UNIT["spec_restores"] = RESTORES     # (test_speculation.py)
UNIT["spec_call"] = "@f { } @main { speculate; call @f; }"
UNIT["spec_ret"] = "@main { speculate; ret; }"
UNIT["spec_implicit_ret"] = "@main { speculate; }"
UNIT["abort_outside"] = """
@main { t: bool = const true; guard t .x; print t; f: bool = const false; guard f .x; .x: nop; }"""

UNIT["undefined_var"] = """
@main(b: bool) {
  br b .def .skip;
.def:
  x: int = const 1;
.skip:
  print b;
  print x;
}"""

UNIT["ill_typed_when_run"] = """
@main(b: bool) {
  x: int = const 1;
  br b .bad .ok;
.bad:
  y: bool = not x;
.ok:
  print b;
}"""

UNIT["static_errors_when_run"] = """
@f(a: int): int { ret a; }
@main(mode: int) {
  x: int = const 1;
  zero: int = const 0;
  is: bool = eq mode zero;
  br is .arity .m1;
.arity:
  y: int = call @f x x;
.m1:
  one: int = const 1;
  is: bool = eq mode one;
  br is .nofun .m2;
.nofun:
  call @nowhere;
.m2:
  two: int = const 2;
  is: bool = eq mode two;
  br is .label .m3;
.label:
  jmp .nowhere;
.m3:
  three: int = const 3;
  is: bool = eq mode three;
  br is .argtype .m4;
.argtype:
  b: bool = const true;
  y: int = call @f b;
.m4:
  print x;
}"""

UNIT["main_args"] = """
@main(i: int, f: float, b: bool, c: char) {
  print i f b c;
}"""

UNIT["recursion"] = """
@down(n: int): int {
  zero: int = const 0;
  done: bool = le n zero;
  br done .base .rec;
.base:
  ret zero;
.rec:
  one: int = const 1;
  m: int = sub n one;
  r: int = call @down m;
  r: int = add r one;
  ret r;
}
@main(n: int) {
  d: int = call @down n;
  print d;
}"""

UNIT["nonvoid_returns_nothing"] = """
@f(a: int): int { print a; }
@main { x: int = const 7; y: int = call @f x; print y; }"""

UNIT["typed_call_without_dest"] = """
@f(a: int): int { ret a; }
@main { x: int = const 7; call @f x; }"""

UNIT["void_call_with_dest"] = """
@f(a: int) { print a; }
@main { x: int = const 7; y: int = call @f x; }"""


# --- the fixture ------------------------------------------------------------------------------

UNIT["dynamic_loop"] = DYNAMIC_LOOP
UNIT.update({name: src for name, (src, _) in DYNAMIC_MODES.items()})
UNIT.update(DYNAMIC_UNITS)
# A ptr<float> stored in a ptr<any> cell and loaded as a ptr<int>: the interpreter goes
# on (reading the float region), native code lays cells out by the pointer's type and
# stops (bril.ir.messages.ANY_POINTER).
# A function without a return type that returns a value on one path: what the
# caller does with the result decides the error (it is returned as an `any` value).
UNIT["void_returns_a_value"] = """
@v(b: bool) {
  br b .r .n;
.r:
  x: int = const 3;
  ret x;
.n:
}
@main(m: int) {
  t: bool = const true;
  f: bool = const false;
  zero: int = const 0;
  one: int = const 1;
  two: int = const 2;
  m0: bool = eq m zero;
  br m0 .a .b;
.a:
  call @v f;
  print zero;
  call @v t;
.b:
  m1: bool = eq m one;
  br m1 .c .d;
.c:
  x: int = call @v t;
.d:
  m2: bool = eq m two;
  br m2 .e .g;
.e:
  y: bool = call @v t;
.g:
  z: int = call @v f;
}
"""
UNIT["any_pointer_of_another_type"] = """
@main {
  one: int = const 1;
  outer: ptr<any> = alloc one;
  fs: ptr<float> = alloc one;
  store outer fs;
  q: ptr<int> = load outer;
  print one;
  x: int = load q;
}
"""


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
    want_out, _, want_error = interp_result(prog, args)
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
    return subprocess.run([sys.executable, "-m", "bril.cli.brilc", *args], input=input,
                          capture_output=True, cwd=cwd, timeout=120)


SUM = """
@main(n: int) {
  i: int = const 0;
  s: int = const 0;
  one: int = const 1;
.loop:
  c: bool = lt i n;
  br c .body .done;
.body:
  s: int = add s i;
  i: int = add i one;
  jmp .loop;
.done:
  print s;
}
"""


def test_brilc_builds_an_executable_from_json(tmp_path):
    prog = parse_program(SUM)
    exe = tmp_path / "sum"
    done = brilc(["-o", str(exe)], input=json.dumps(prog).encode())
    assert done.returncode == 0 and done.stderr == b""
    run_done = subprocess.run([str(exe), "-p", "10"], capture_output=True, text=True)
    want_out, want_count, _ = interp_result(prog, [10])
    assert (run_done.stdout, run_done.stderr) == (want_out, f"total_dyn_inst: {want_count}\n")


def test_brilc_reads_text_files_and_names_the_output_after_them(tmp_path):
    (tmp_path / "sum.bril").write_text(SUM)
    done = brilc(["-f", "sum.bril", "-O", "0"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_done = subprocess.run([str(tmp_path / "sum"), "4"], capture_output=True, text=True)
    assert run_done.stdout == "6\n"


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
