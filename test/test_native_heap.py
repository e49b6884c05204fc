"""The interpreter's native heap (`bril.interpreter.heap.NativeHeap`) and brilrt in process
(`bril.native_runtime.nativert.runtime_library`), which the JIT shares the heap through.

1. Every conformance program that uses memory and that brilc accepts (statically
   typed: the native heap's domain), and our benchmarks/memory programs, run with
   `native_heap=True` exactly as with the list heap: stdout, `-p` count, error.
2. Heap edge cases: freed regions, bounds, uninitialised cells, pointers stored
   in memory, every element kind, leaks, a fresh heap per run.
3. runtime_library: native code (llvmlite, MCJIT) that allocates, stores through
   brt_regions, prints, fails and frees, run through `rt.call`, sharing the heap
   with the interpreter's NativeHeap.
"""

import ctypes
import io

import pytest
from corpus import BENCHMARKS, CONFORMANCE, args_of, case_id, program_text

from bril.backend import native
from bril.native_runtime import nativert
from bril.ir.errors import BrilError
from bril.interpreter.heap import NativeHeap
from bril.interpreter.interp import run
from bril.ir.text import parse_program

pytestmark = pytest.mark.skipif(nativert.c_compiler() is None,
                                reason="no C compiler to build the run-time library")


def load(path):
    return parse_program(path.read_text(), filename=str(path))


def outcome(prog, argv, native_heap):
    """(stdout, count or error message) of a run."""
    out = io.StringIO()
    try:
        result = run(prog, list(argv), out=out, native_heap=native_heap)
    except BrilError as e:
        result = "error: " + e.message
    return out.getvalue(), result


def _memory_programs():
    found = []
    for folder in ("benchmarks", "test/interp", "test/interp-error"):
        for path in sorted((CONFORMANCE / folder).rglob("*.bril")):
            if "alloc" in path.read_text():
                found.append(path)
    return found


def _statically_typed(path):
    from bril.backend.llvm_lower import lower_program
    try:
        lower_program(load(path), base_dir=path.parent)
        return True
    except BrilError:
        return False


MEMORY = _memory_programs()
OURS = sorted((BENCHMARKS / "memory").glob("*.bril"))


def test_corpus_is_present():
    assert len(MEMORY) > 40 and len(OURS) >= 5


# --- 1. the corpus --------------------------------------------------------------------------

@pytest.mark.parametrize("path", MEMORY, ids=case_id)
def test_conformance_program(path):
    if not _statically_typed(path):
        pytest.skip("refused by the native lowering: outside the native heap")
    prog = load(path)
    expected = outcome(prog, args_of(path), False)
    assert outcome(prog, args_of(path), True) == expected
    out_file = path.with_suffix(".out")
    if out_file.exists():
        with open(out_file, newline="") as fh:
            assert expected[0] == fh.read()


@pytest.mark.parametrize("path", OURS, ids=lambda p: p.stem)
def test_our_memory_benchmark(path):
    prog = load(path)
    assert outcome(prog, args_of(path), True) == outcome(prog, args_of(path), False)


# --- 2. heap edge cases ---------------------------------------------------------------------

KINDS = """
@main {
  n: int = const 3;
  one: int = const 1;
  pi: ptr<int> = alloc n;
  pf: ptr<float> = alloc n;
  pb: ptr<bool> = alloc n;
  pc: ptr<char> = alloc n;
  pp: ptr<ptr<int>> = alloc n;
  ppp: ptr<ptr<ptr<int>>> = alloc one;
  big: int = const -9223372036854775808;
  f: float = const -0.0;
  t: bool = const true;
  c: char = const 'λ';
  q: ptr<int> = ptradd pi one;
  store q big;
  store pf f;
  store pb t;
  store pc c;
  store pp q;
  store ppp pp;
  pp2: ptr<ptr<int>> = load ppp;
  q2: ptr<int> = load pp2;
  v: int = load q2;
  fv: float = load pf;
  bv: bool = load pb;
  cv: char = load pc;
  print v fv bv cv q2;
  free pi; free pf; free pb; free pc; free pp; free ppp;
}
"""


def test_every_element_kind_round_trips():
    prog = parse_program(KINDS)
    assert outcome(prog, [], True) == outcome(prog, [], False)
    assert outcome(prog, [], True)[0] == \
        "-9223372036854775808 -0.00000000000000000 true λ [object Object]\n"


@pytest.mark.parametrize("kind, zero, other", [
    ("int", "0", "7"), ("float", "-0.0", "2.5"), ("bool", "false", "true"),
    ("char", "'x'", "'λ'")])
def test_generated_code_tells_a_stored_zero_from_an_uninitialised_cell(kind, zero, other):
    # Generated code over the native heap reads a cell's flag only when the cell
    # reads zero (cells start zeroed): a stored zero loads, an unstored cell fails,
    # as in the cold tier and over the Python heap.
    body = (f"n: int = const 3; one: int = const 1; p: ptr<{kind}> = alloc n;\n"
            f"q: ptr<{kind}> = ptradd p one; z: {kind} = const {zero}; o: {kind} = const {other};\n"
            f"store p z; store q o; a: {kind} = load p; b: {kind} = load q; print a b;\n"
            f"r: ptr<{kind}> = ptradd q one; c: {kind} = load r; print c; free p;")
    prog = parse_program("@main {\n" + body + "\n}\n")
    if kind == "char":              # (the text form has no NUL character)
        next(i for i in prog["functions"][0]["instrs"] if i.get("dest") == "z")["value"] = "\0"
    got = [outcome_in(prog, tier, native) for tier in ("fast", "cold") for native in (True, False)]
    assert got[0][1] == "error: Pointer r points to uninitialized data"
    assert got[0][0].count(" ") == 1 and all(g == got[0] for g in got), got


def outcome_in(prog, tier, native_heap):
    out = io.StringIO()
    try:
        result = run(prog, [], out=out, native_heap=native_heap, tier=tier)
    except BrilError as e:
        result = "error: " + e.message
    return out.getvalue(), result


def test_any_cells_hold_every_kind():
    # (a ptr<any> cell keeps a pointer's region id above its tag: regions 2 and 3,
    # offset 39, here)
    prog = parse_program(program_text("dynamic/any_cells_every_kind"))
    got = outcome(prog, [], True)
    assert got == outcome(prog, [], False)
    assert got[0].splitlines() == ["-9223372036854775807", "-2.50000000000000000", "true", "λ",
                                   "[object Object]", "[object Object]",
                                   "40 -2.50000000000000000"]


ERRORS = {
    "use after free": ("p: ptr<int> = alloc n; free p; x: int = load p;",
                       "Uninitialized heap location 0 and/or illegal offset 0"),
    "store after free": ("p: ptr<int> = alloc n; free p; store p n;",
                         "Uninitialized heap location 0 and/or illegal offset 0"),
    "negative offset": (("p: ptr<int> = alloc n; m: int = const -1; q: ptr<int> = ptradd p m; "
                         "store q n;"), "Uninitialized heap location 0 and/or illegal offset -1"),
    "past the end": ("p: ptr<int> = alloc n; q: ptr<int> = ptradd p n; x: int = load q;",
                     "Uninitialized heap location 0 and/or illegal offset 2"),
    "uninitialised": ("p: ptr<float> = alloc n; x: float = load p;",
                      "Pointer p points to uninitialized data"),
    "uninitialised any cell": ("p: ptr<any> = alloc n; o: int = const 1; q: ptr<any> = ptradd p o; "
                               "store p o; x: any = load p; y: any = load q;",
                               "Pointer q points to uninitialized data"),
    "uninitialised pointer cell": ("p: ptr<ptr<int>> = alloc n; x: ptr<int> = load p;",
                                   "Pointer p points to uninitialized data"),
    "double free": ("p: ptr<int> = alloc n; free p; free p;",
                    "Tried to free illegal memory location base: 0, offset: 0. Offset must be 0."),
    "free inside": ("p: ptr<int> = alloc n; o: int = const 1; q: ptr<int> = ptradd p o; free q;",
                    "Tried to free illegal memory location base: 0, offset: 1. Offset must be 0."),
    "zero": ("z: int = const 0; p: ptr<int> = alloc z;",
             "must allocate a positive amount of memory: 0 <= 0"),
    "too big": ("z: int = const 4294967296; p: ptr<int> = alloc z;",
                "cannot allocate 4294967296 entries"),
    "leak": ("p: ptr<int> = alloc n; print n;",
             "Some memory locations have not been freed by end of execution."),
    "dangling pointer in memory": (
        ("p: ptr<int> = alloc n; pp: ptr<ptr<int>> = alloc n; store pp p; free p; "
         "q: ptr<int> = load pp; free pp; x: int = load q;"),
        "Uninitialized heap location 0 and/or illegal offset 0"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_the_list_heap(name):
    body, message = ERRORS[name]
    prog = parse_program("@main {\n n: int = const 2;\n" + body.replace("; ", ";\n") + "\n}\n")
    expected = outcome(prog, [], False)
    assert expected[1] == "error: " + message
    assert outcome(prog, [], True) == expected


def test_ids_start_at_zero_in_every_run():
    prog = parse_program("@main { n: int = const 2; p: ptr<int> = alloc n; free p; free p; }")
    for _ in range(2):
        assert outcome(prog, [], True)[1].startswith(
            "error: Tried to free illegal memory location base: 0,")


def test_a_new_heap_releases_the_old_heaps_views():
    rt = nativert.runtime_library()
    old = NativeHeap(rt)
    data, _, region = old.alloc(4, "int")
    NativeHeap(rt)
    assert not region.live
    with pytest.raises(ValueError):
        data[0]


# --- 3. the run-time library in process --------------------------------------------------------

def _module():
    """Functions `int64_t f(int64_t *slots)` using brilrt:
    make(slots): region of slots[0] ints, cell 1 := slots[1], prints it; slots[2] := id
    fail(slots): prints 7 and 8, then fails an access at (slots[0], slots[1])
    drop(slots): frees region slots[0]; returns 5
    count(slots): brt_dyn_count += slots[0]; returns brt_dyn_count"""
    from llvmlite import ir
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    ptr = ir.PointerType()
    void = ir.VoidType()
    from bril.backend.llvm_lower import REGION as region    # (brilrt's table entry)
    m = ir.Module("native_heap_test")

    def decl(name, ret, args):
        return ir.Function(m, ir.FunctionType(ret, args), name)

    alloc = decl("brt_alloc", i64, [i64, i64])
    free = decl("brt_free", void, [i64, i64])
    print_int = decl("brt_print_int", void, [i64, i32])
    fail_access = decl("brt_fail_access", void, [i64, i64])
    table = ir.GlobalVariable(m, ptr, "brt_regions")
    dyn = ir.GlobalVariable(m, i64, "brt_dyn_count")
    sig = ir.FunctionType(i64, [ptr])

    def define(name):
        f = ir.Function(m, sig, name)
        return f, ir.IRBuilder(f.append_basic_block())

    def slot(b, f, i):
        return b.gep(f.args[0], [ir.Constant(i64, i)], source_etype=i64)

    f, b = define("make")
    n = b.load(slot(b, f, 0), typ=i64)
    value = b.load(slot(b, f, 1), typ=i64)
    rid = b.call(alloc, [n, ir.Constant(i64, 8)])
    entry = b.gep(b.load(table, typ=ptr), [rid], source_etype=region)
    data = b.load(entry, typ=ptr)
    length = b.load(b.gep(entry, [ir.Constant(i32, 0), ir.Constant(i32, 1)],
                          source_etype=region), typ=i64)
    one = ir.Constant(i64, 1)
    b.store(value, b.gep(data, [one], source_etype=i64))
    b.store(ir.Constant(i8, 1), b.gep(data, [b.add(b.mul(length, ir.Constant(i64, 8)), one)],
                                      source_etype=i8))
    b.call(print_int, [value, ir.Constant(i32, 10)])
    b.store(rid, slot(b, f, 2))
    b.ret(ir.Constant(i64, 0))

    f, b = define("fail")
    b.call(print_int, [ir.Constant(i64, 7), ir.Constant(i32, 32)])
    b.call(print_int, [ir.Constant(i64, 8), ir.Constant(i32, 10)])
    b.call(fail_access, [b.load(slot(b, f, 0), typ=i64), b.load(slot(b, f, 1), typ=i64)])
    b.ret(ir.Constant(i64, 3))

    f, b = define("drop")
    b.call(free, [b.load(slot(b, f, 0), typ=i64), ir.Constant(i64, 0)])
    b.ret(ir.Constant(i64, 5))

    f, b = define("count")
    total = b.add(b.load(dyn, typ=i64), b.load(slot(b, f, 0), typ=i64))
    b.store(total, dyn)
    b.ret(total)
    return m


@pytest.fixture(scope="module")
def compiled():
    rt = nativert.runtime_library()
    assert nativert.runtime_library() is rt           # loaded once per process
    jit = native.JIT()                              # (the code lives as long as the JIT)
    yield rt, jit.compile(_module())
    del jit


def test_native_code_shares_the_heap_and_the_output(compiled):
    rt, fns = compiled
    heap = NativeHeap(rt)
    rt.take_output()
    data, _, mine = heap.alloc(2, "int")            # region 0, from Python
    slots = (ctypes.c_int64 * 3)(4, 41, -1)
    assert rt.call(fns["make"], slots) == 0
    rid = slots[2]
    assert rid == 1 and rt.take_output() == "41\n"
    # the region native code made, seen from Python
    p = heap.from_pair(rid, 1, "int")
    assert p[2].base == 1 and p[2].size == 4 and p[0][1] == 41 and p[2].flags[1] == 1
    assert heap.to_pair(p) == (1, 1)
    assert heap.to_pair((p[0], (1 << 64) + 5, p[2])) == (1, 5)
    assert heap.from_pair(rid, 0, "int")[2] is p[2]
    slots[:2] = [2, 0]
    rt.call(fns["make"], slots)
    with pytest.raises(BrilError, match="internal error: heap region 2 does not hold bool"):
        heap.from_pair(slots[2], 0, "bool")     # 8-byte cells: a view of 1-byte cells is refused
    heap.free(heap.from_pair(slots[2], 0, "int"))
    rt.take_output()
    # native code frees it; after sync, Python can no longer reach its memory
    slots[0] = rid
    assert rt.call(fns["drop"], slots) == 5         # (rt.call syncs the heap)
    assert not p[2].live
    with pytest.raises(ValueError):
        p[0][1]
    assert heap.from_pair(rid, 0, "int")[2].live is False
    heap.free((data, 0, mine))
    assert not heap.leaked()


def test_sync_drops_regions_freed_by_any_native_call(compiled):
    rt, fns = compiled
    heap = NativeHeap(rt)
    ptr = heap.alloc(3, "char")
    drop = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fns["drop"])
    assert drop((ctypes.c_int64 * 1)(0)) == 5      # not through rt.call
    assert ptr[2].live
    heap.sync()
    assert not ptr[2].live and not heap.leaked()
    with pytest.raises(ValueError):
        ptr[0][0]
    heap.sync()                                     # nothing more to do


def test_native_errors_become_brilerrors_after_the_output(compiled):
    rt, fns = compiled
    NativeHeap(rt)
    slots = (ctypes.c_int64 * 2)(3, -2)
    out = io.StringIO()
    with pytest.raises(BrilError) as info:
        rt.call(fns["fail"], slots, out=out)
    assert info.value.message == "Uninitialized heap location 3 and/or illegal offset -2"
    assert out.getvalue() == "7 8\n"
    # the trampoline is reusable after an error; without `out` the output stays buffered
    with pytest.raises(BrilError):
        rt.call(fns["fail"], slots)
    assert rt.take_output() == "7 8\n" and rt.take_output() == ""


def test_counters_are_shared(compiled):
    rt, fns = compiled
    NativeHeap(rt)
    assert rt.dyn_count == 0
    rt.dyn_count = 100
    assert rt.call(fns["count"], (ctypes.c_int64 * 1)(23)) == 123
    assert rt.dyn_count == 123
    rt.depth = 5
    assert rt.depth == 5
    rt.depth = 0


def test_python_alloc_errors_do_not_exit(compiled):
    rt, _ = compiled
    heap = NativeHeap(rt)
    with pytest.raises(BrilError, match="must allocate a positive amount of memory: -1 <= 0"):
        heap.alloc(-1, "int")
    p = heap.alloc(1, {"ptr": "char"})
    heap.free(p)
    with pytest.raises(BrilError, match="Tried to free illegal memory location base: 0"):
        heap.free(p)


def test_ffi_types_are_the_ones_ctypes_makes():
    # bril.native_runtime.ffi makes them from _ctypes (importing ctypes costs a warm run 1.5 ms):
    # the same sizes here, and a C function called through them.
    import ctypes
    from bril.native_runtime import ffi
    for name in ("c_int64", "c_int", "c_double", "c_void_p", "c_size_t", "c_ssize_t",
                 "c_char", "c_char_p", "py_object"):
        ours, theirs = getattr(ffi, name), getattr(ctypes, name)
        assert ctypes.sizeof(ours) == ctypes.sizeof(theirs), name
    process = ffi.dlopen(None)
    strlen = ffi.function(ffi.symbol(process, "strlen"), ffi.c_size_t, ffi.c_char_p)
    assert strlen(b"bril") == 4
    cells = (ffi.c_int64 * 2)(7, -1)
    assert ffi.string_at(ctypes.addressof(cells), 16) == bytes(cells)
    with pytest.raises(AttributeError):
        ffi.symbol(process, "no_such_symbol_in_bril")
