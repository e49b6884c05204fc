"""Lower Bril to LLVM IR (an `llvmlite.ir.Module`).

    lower_program(prog, ...) -> ir.Module      the whole program (for `brilc`)

Values: int -> i64, bool -> i1, float -> double, char -> i32 (a code point),
pointer -> `{i64 region, i64 offset}` (see brilrt.c for the heap: a table of
regions indexed by the id the error messages print; every load and store
tests `(unsigned) offset < length` and an "initialised" flag per cell, inline).
Every variable lives in an `alloca` (promoted to registers by LLVM), so a
`speculate` snapshot is a copy of the variables and an abort copies them back.

The supported language is Bril where every variable has one declared type and
every instruction produces a value of its destination's type, plus the dynamic
extension: an `any` value is a tagged value (`TAGGED`, `Lowering.tag`/`untag`),
and so is every variable the interpreter may give a value of another type
unchecked (`LoweredFunction._dynamic`); a function that may return a value of
another type than declared returns it tagged, and its caller checks it.
Programs outside it (a variable of two types, a `ptr` or `any` argument to
@main, the ssa extension's `phi`) are rejected by `Unsupported`, a one-line
`BrilError`.  ssa2 is supported: a shadow variable
is one more slot (key ("shadow", name)) with a flag saying a `set` wrote it,
and a variable that may hold `undef`'s value has an undef bit beside it
(`Lowering.lower_ssa2`).  Everything the interpreter reports at
run time is reported at run time here too, with the same message, and only
if the instruction runs: division by zero, heap errors, bad char codes,
speculation errors, an undefined variable, and the errors the interpreter
finds late that are static here (an operand of the wrong type, a call with
the wrong arity, an unknown label or opcode) -- those compile into a call of
the run-time error function.

Structure, with the future JIT in mind:

* `LOWER` maps every op name of `bril.ir.ops.OPS` to the function lowering one
  instruction of it (or `UNSUPPORTED` says why not).  They see only a
  `Lowering` context: a builder, the run-time declarations, `read`/`write` of
  variables, `fail`, and hooks for control (`jump`, `branch`, `guard`,
  `ret`, `call`, `speculate`, `commit`).
* `Lowering.lower_instr` checks arity and operand types and calls the table.
* `FunctionLowering` is the scaffolding of one whole Bril function: allocas,
  one LLVM block per Bril block (the engines' blocks, `bril.analysis.blocks`), the
  dynamic instruction count, calls and returns, the speculation stack.  A
  trace region for the JIT (`speculate ... guard ... commit`, straight-line)
  reuses `Lowering.lower_instr` with another scaffolding: variables loaded
  from an array of i64 slots at entry, `guard` returning its exit number
  (an abort needs no copy: the slots are untouched until an exit writes the
  live variables back), `call`/`ret` refused.  Slots would hold int as is,
  float bit-cast, bool 0/1, char its code point, a pointer in two slots
  (region id, offset).
"""

from ..ir import messages as M
from ..ir.values import UNSET, const_value
from ..ir.support import argcount_message, call_funcs_message, nonvoid_message, operand_message
from llvmlite import ir

from ..ir.errors import BrilError
from ..ir.ops import OPS, SSA_OPS
from ..analysis.blocks import build_blocks
from ..analysis import typecheck as tc
from ..analysis.invariants import worth_constants
from ..ir.linker import link
from ..ir.values import js_type_text, type_cmp
from ..native_runtime.resume import (value_tag, CELL_RID_SHIFT, TAG_BASES, TAG_PTR_STEP, TAG_UNDEF,
                                     REGION_INLINE_BYTES, NO_FLAGS_BIT)

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F64 = ir.DoubleType()
VOID = ir.VoidType()
PTR = ir.PointerType()                       # opaque machine pointer
POINTER = ir.LiteralStructType([I64, I64])   # a Bril pointer: {region id, offset}
# brilrt's region entry: {data, length, a small region's cells} (brilrt.c brt_region)
REGION = ir.LiteralStructType([PTR, I64, ir.ArrayType(I8, REGION_INLINE_BYTES)])
# A value of the dynamic extension's type `any`: {tag, value, pointer offset}
# (`bril.native_runtime.resume.value_tag`).
TAGGED = ir.LiteralStructType([I64, I64, I64])
UNDEF_TAGGED = ir.Constant(TAGGED, [ir.Constant(I64, TAG_UNDEF), ir.Constant(I64, 0),
                                    ir.Constant(I64, 0)])
# A ptr<any> region's cell holds a tagged value in two words (16 bytes, not
# TAGGED's 24: the cells are the memory a loop over them streams through):
# {tag, value}, or for a pointer {tag | region id << CELL_RID_SHIFT, offset}
# (`bril.native_runtime.resume.put_cell`).
ANY_CELL = ir.LiteralStructType([I64, I64])

SCALARS = {"int": I64, "bool": I1, "float": F64, "char": I32}
# Deeper pointer types are not compiled: their tags would not fit below a region id
# in a ptr<any> cell (`ANY_CELL`).
MAX_PTR_DEPTH = ((1 << CELL_RID_SHIFT) - max(TAG_BASES.values())) // TAG_PTR_STEP - 1
# Instructions a function's loop copies (`LoweredFunction._loop_versions`) may add.
VERSIONED_INSTRS = 2000


class Unsupported(BrilError):
    """A program outside what the native compiler handles (reported at compile time)."""

    def __init__(self, what, func=None):
        where = f" (in @{func})" if func is not None else ""
        super().__init__(f"brilc does not support {what}{where}")


# --- types -----------------------------------------------------------------------------

def type_key(typ):
    """A hashable Bril type: 'int' | 'bool' | 'float' | 'char' | 'any' | ('ptr', key);
    None if the type is not one of those (unknown names, malformed)."""
    depth = 0
    while isinstance(typ, dict) and set(typ) == {"ptr"}:
        typ = typ["ptr"]
        depth += 1
    if not isinstance(typ, str) or (typ not in SCALARS and typ != "any") \
            or depth > MAX_PTR_DEPTH:
        return None
    key = typ
    for _ in range(depth):
        key = ("ptr", key)
    return key


def _ptr_depth(key):
    """(scalar, number of ptr<...> around it) of a type key."""
    depth = 0
    while not isinstance(key, str):
        key = key[1]
        depth += 1
    return key, depth


def _tag_of(key):
    """The tag analysis's tag for values of type key (`bril.analysis.typecheck`)."""
    if kind(key) == "ptr":
        return "ptr:" + ("ptr" if kind(key[1]) == "ptr" else key[1])
    return key


def _key_of_tags(tags):
    """The one type key of values with these tags, or None if there is none (several
    kinds, a pointer into a region of pointers: its type is not known)."""
    if len(tags) != 1:
        return None
    (tag,) = tags
    if tag in tc.PRIMS:
        return tag
    elem = tag[4:] if tag.startswith("ptr:") else None
    if elem in tc.PRIMS or elem == "any":
        return ("ptr", elem)
    return None


def type_text(key):
    base, depth = _ptr_depth(key)
    return "ptr<" * depth + base + ">" * depth


def kind(key):
    """'int', 'bool', 'float', 'char', 'any' or 'ptr'."""
    return key if isinstance(key, str) else "ptr"


def llvm_type(key):
    if key == "any":
        return TAGGED
    return SCALARS[key] if isinstance(key, str) else POINTER


def cell_type(key):
    """How a value of type key is stored in a heap cell: its natural size (bool one
    byte 0/1, char a 32-bit code point, int and float 8 bytes, a pointer 16, an
    `any` value 16: `ANY_CELL`)."""
    if key == "bool":
        return I8
    if key == "any":
        return ANY_CELL
    return llvm_type(key)


def cell_size(key):
    return {"bool": 1, "char": 4, "any": 16}.get(key, 16 if kind(key) == "ptr" else 8)


def alloc_cell_size(key):
    """brt_alloc's cell-size argument for cells of type key: a ptr<any> cell is its
    own "initialised" flag (its tag word), so its region has no flag bytes."""
    return cell_size(key) | (NO_FLAGS_BIT if key == "any" else 0)


def tag_value(bld, v, key):
    """IR: the `any` value holding v, a value of type key."""
    if key == "any":
        return v
    t = ir.Constant(TAGGED, [const_int(value_tag(key)), const_int(0), const_int(0)])
    if kind(key) == "ptr":
        t = bld.insert_value(t, bld.extract_value(v, 0), 1)
        return bld.insert_value(t, bld.extract_value(v, 1), 2)
    return bld.insert_value(t, encode_slot(bld, key, v), 1)


# --- slots: values as the interpreter hands them over (`resume`'s layout) ----------------

def decode_slot(bld, key, raw, second):
    """IR: the value of type `key` from its slot `raw` (and `second()`, the offset
    slot of a pointer)."""
    if key == "int":
        return raw
    if key == "bool":
        return bld.icmp_unsigned("!=", raw, const_int(0))
    if key == "float":
        return bld.bitcast(raw, F64)
    if key == "char":
        return bld.trunc(raw, I32)
    p = bld.insert_value(ir.Constant(POINTER, ir.Undefined), raw, 0)
    return bld.insert_value(p, second(), 1)


def decode_tagged(bld, load):
    """IR: the `any` value in three slots, `load(j)` giving slot j (tag, value, offset)."""
    v = ir.Constant(TAGGED, ir.Undefined)
    for j in range(3):
        v = bld.insert_value(v, load(j), j)
    return v


def encode_slot(bld, key, v):
    """IR: a value of type `key` (not a pointer: its two parts are stored apart) as
    its 64-bit slot."""
    if key in ("bool", "char"):
        return bld.zext(v, I64)
    if key == "float":
        return bld.bitcast(v, I64)
    return v


# --- the run-time library --------------------------------------------------------------

# name: (return type, parameter types, never returns)
RUNTIME_FUNCTIONS = {
    "brt_fail": (VOID, [PTR], True),
    "brt_fail_access": (VOID, [I64, I64], True),
    "brt_fail_uninit": (VOID, [PTR], True),
    "brt_fail_char": (VOID, [I64], True),
    "brt_fail_depth": (VOID, [], True),
    "brt_print_int": (VOID, [I64, I32], False),
    "brt_print_bool": (VOID, [I32, I32], False),
    "brt_print_float": (VOID, [F64, I32], False),
    "brt_print_char": (VOID, [I32, I32], False),
    "brt_print_ptr": (VOID, [I32], False),
    "brt_print_newline": (VOID, [], False),
    "brt_alloc": (I64, [I64, I64], False),
    "brt_free": (VOID, [I64, I64], False),
    "brt_check_arity": (VOID, [I64, I64], False),
    "brt_arg_int": (I64, [PTR], False),
    "brt_arg_float": (F64, [PTR], False),
    "brt_arg_bool": (I32, [PTR], False),
    "brt_arg_char": (I32, [PTR], False),
    "llvm.stacksave.p0": (PTR, [], False),
    "llvm.stackrestore.p0": (VOID, [PTR], False),
}

RUNTIME_GLOBALS = {
    "brt_regions": PTR,       # brt_region *: the region table
    "brt_dyn_count": I64,     # dynamic instruction count (for -p)
    "brt_depth": I64,         # nested Bril calls
}


class Runtime:
    """The run-time library's functions, globals and message strings in one module,
    declared on first use."""

    def __init__(self, module):
        self.module = module
        self._functions = {}
        self._globals = {}
        self._strings = {}
        self._tbaa = {}

    def fn(self, name):
        f = self._functions.get(name)
        if f is None:
            ret, params, noreturn = RUNTIME_FUNCTIONS[name]
            f = ir.Function(self.module, ir.FunctionType(ret, params), name)
            if noreturn:
                f.attributes.add("noreturn")
                f.attributes.add("cold")
            f.attributes.add("nounwind")
            self._functions[name] = f
        return f

    def glob(self, name):
        g = self._globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, RUNTIME_GLOBALS[name], name)
            self._globals[name] = g
        return g

    def tbaa(self, what):
        """A type-based alias tag: 'table' (the region table and its entries), 'cell'
        (heap cells) or 'flag' (initialised flags).  Stores to cells or flags then
        do not force reloading the table in a loop."""
        if not self._tbaa:
            self._tbaa["root"] = self.module.add_metadata(["bril heap"])
        tag = self._tbaa.get(what)
        if tag is None:
            node = self.module.add_metadata([what, self._tbaa["root"], const_int(0)])
            tag = self._tbaa[what] = self.module.add_metadata([node, node, const_int(0)])
        return tag

    def cstring(self, text):
        """A pointer to a NUL-terminated constant holding text (UTF-8)."""
        g = self._strings.get(text)
        if g is None:
            data = text.encode("utf-8", "replace") + b"\0"   # lone surrogates: '?'
            typ = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, typ, f".str{len(self._strings)}")
            g.linkage = "private"
            g.global_constant = True
            g.unnamed_addr = True
            g.initializer = ir.Constant(typ, bytearray(data))
            self._strings[text] = g
        return g


# --- one instruction --------------------------------------------------------------------

def const_int(n):
    return ir.Constant(I64, n)


def _binop(method):
    def lower(cx, instr, a, b):
        return getattr(cx.b, method)(a, b)
    return lower


def _icmp(op):
    def lower(cx, instr, a, b):
        return cx.b.icmp_signed(op, a, b)
    return lower


def _fcmp(op):
    # Ordered comparisons: false when either side is NaN, as in JavaScript.
    def lower(cx, instr, a, b):
        return cx.b.fcmp_ordered(op, a, b)
    return lower


def _lower_div(cx, instr, a, b):
    bld = cx.b
    cx.check(bld.icmp_signed("!=", b, const_int(0)), lambda: cx.raise_error(M.DIVISION_BY_ZERO))
    # sdiv traps on INT_MIN / -1; Bril wraps it (x / -1 is -x, wrapping): divide by
    # 1 instead and negate.
    minus_one = bld.icmp_signed("==", b, const_int(-1))
    q = bld.sdiv(a, bld.select(minus_one, const_int(1), b))
    return bld.select(minus_one, bld.sub(const_int(0), a), q)


def _lower_int2char(cx, instr, a):
    bld = cx.b
    # Valid: 0 <= a <= 0x10FFFF and not a surrogate (0xD800..0xDFFF).
    in_range = bld.icmp_unsigned("<=", a, const_int(0x10FFFF))
    surrogate = bld.icmp_unsigned("<", bld.sub(a, const_int(0xD800)), const_int(0x800))
    ok = bld.and_(in_range, bld.not_(surrogate))
    rt = cx.rt
    cx.check(ok, lambda: bld.call(rt.fn("brt_fail_char"), [a]))
    return bld.trunc(a, I32)


def _lower_const(cx, instr):
    """The value `bril.ir.values.const_value` gives (the interpreter's), as a constant of
    the destination's type; a value of another kind than the variable's type is
    beyond native code (the interpreter would hold a value of that other kind)."""
    key = cx.dest_type(instr)
    if key is None:
        return None                             # no destination: nothing to do
    try:
        value = const_value(instr)
    except BrilError as e:
        cx.fail(e.message)
        return None
    if value is UNSET:
        # No value: the reference stores `undefined`, i.e. the variable becomes unset.
        cx.unset(instr.get("dest"))
        return None
    have = {bool: "bool", int: "int", float: "float", str: "char"}[type(value)]
    if have != key and key != "any":            # (an `any` variable: tagged by lower_instr)
        raise Unsupported(f"`const` of a {have} value into a {type_text(key)} variable",
                          cx.func_name)
    key = have
    if key == "float":
        return ir.Constant(F64, value)
    if key == "int":
        return const_int(value)
    if key == "bool":
        return ir.Constant(I1, int(value))
    return ir.Constant(I32, ord(value))


_PRINTERS = {"int": "brt_print_int", "float": "brt_print_float", "char": "brt_print_char"}


def _lower_print(cx, instr):
    names = instr.get("args") or []
    values = []
    for i in range(len(names)):
        v = cx.read(instr, i)
        if v is None:
            return None
        values.append(v)
    for name in names:              # every value is formatted before anything is printed
        cx.not_undef(name, lambda: M.PRINT_UNDEFINED)
    bld, rt = cx.b, cx.rt
    if not values:
        bld.call(rt.fn("brt_print_newline"), [])
    for i, (name, v) in enumerate(zip(names, values)):
        end = ir.Constant(I32, ord("\n") if i == len(values) - 1 else ord(" "))
        k = kind(cx.var_type(name))
        if k == "any":
            cx.print_any(v, end)
        elif k == "bool":
            bld.call(rt.fn("brt_print_bool"), [bld.zext(v, I32), end])
        elif k == "ptr":
            bld.call(rt.fn("brt_print_ptr"), [end])
        else:
            bld.call(rt.fn(_PRINTERS[k]), [v, end])
    return None


def _lower_alloc(cx, instr, n):
    key = type_key(instr.get("type"))
    if kind(key) != "ptr":
        cx.fail(M.text(M.ALLOC_NON_POINTER, type=js_type_text(instr.get("type"))))
        return None
    rid = cx.b.call(cx.rt.fn("brt_alloc"), [n, const_int(alloc_cell_size(key[1]))])
    return cx.make_pointer(rid, const_int(0))


def _lower_free(cx, instr, p):
    bld = cx.b
    bld.call(cx.rt.fn("brt_free"), [bld.extract_value(p, 0), bld.extract_value(p, 1)])
    return None


# Element kinds whose cell, read as other than zero, was stored to: the cells start
# zeroed, and a store of zero sets the cell's flag (the interpreter's stores set it
# for a zero only: `bril.interpreter.heap.native_store_lines`).
_SCALAR_CELLS = ("int", "float", "bool", "char")


def _lower_load(cx, instr, p):
    elem = cx.arg_keys[0][1]
    name = instr["args"][0]
    scalar = elem in _SCALAR_CELLS
    cell, flag = cx.heap_cell(p, elem, check_init=None if scalar else name)
    v = cx.b.load(cell, typ=cell_type(elem))
    v.set_metadata("tbaa", cx.rt.tbaa("cell"))
    if scalar:
        cx.check_stored(v, flag, name)
    return cx.from_cell(v, elem)


def _lower_store(cx, instr, p, v):
    elem = cx.arg_keys[0][1]
    cell, flag = cx.heap_cell(p, elem)
    cx.b.store(cx.to_cell(v, elem), cell).set_metadata("tbaa", cx.rt.tbaa("cell"))
    if flag is not None:
        cx.b.store(ir.Constant(I8, 1), flag).set_metadata("tbaa", cx.rt.tbaa("flag"))
    return None


def _lower_ptradd(cx, instr, p, k):
    bld = cx.b
    return bld.insert_value(p, bld.add(bld.extract_value(p, 1), k), 1)


def _lower_by_table(op):
    """The lowering the op table gives an op (`Op.llvm`), or its own function."""
    spec = op.llvm
    if spec is None:
        return _OWN_LOWERING[op.name]
    kind = spec[0]
    if kind == "binop":
        return _binop(spec[1])
    if kind == "icmp":
        return _icmp(spec[1])
    if kind == "fcmp":
        return _fcmp(spec[1])
    if kind == "unop":
        return lambda cx, instr, a: getattr(cx.b, spec[1])(a)
    if kind == "cast":
        target = SCALARS[spec[2]]
        return lambda cx, instr, a: getattr(cx.b, spec[1])(a, target)
    assert kind == "id", spec
    return lambda cx, instr, a: a


# Ops whose lowering is more than one IR instruction, or touches the frame.
_OWN_LOWERING = {
    "div": _lower_div,
    "int2char": _lower_int2char,
    "const": _lower_const,
    "nop": lambda cx, instr: None,
    "print": _lower_print,
    "jmp": lambda cx, instr: cx.jump(),
    "br": lambda cx, instr, c: cx.branch(c),
    "ret": lambda cx, instr: cx.ret(instr),
    "call": lambda cx, instr: cx.call(instr),
    "alloc": _lower_alloc,
    "free": _lower_free,
    "store": _lower_store,
    "load": _lower_load,
    "ptradd": _lower_ptradd,
    "speculate": lambda cx, instr: cx.speculate(),
    "commit": lambda cx, instr: cx.commit(),
    "guard": lambda cx, instr, c: cx.guard(c),
    # ssa2: `Lowering.lower_ssa2` (the shadow operand of `set` is not a variable).
    "set": None,
    "get": None,
    "undef": None,
}

UNSUPPORTED = {
    "phi": "the SSA extension (phi)",
}
SSA2_OPS = SSA_OPS - set(UNSUPPORTED)

LOWER = {name: _lower_by_table(op) for name, op in OPS.items() if name not in UNSUPPORTED}


def produced_type(instr, arg_types):
    """The type of the value instr produces, from its operands' types (None: no value)."""
    op = instr["op"]
    info = OPS[op]
    if op == "const":
        v = instr.get("value")
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float)):
            return "float" if instr.get("type") == "float" else "int"
        if isinstance(v, str):
            return "char"
        return type_key(instr.get("type"))      # no value: unsets the variable
    if op == "id":
        return arg_types[0]
    if op == "load":
        return arg_types[0][1]
    if op == "ptradd":
        return arg_types[0]
    if op == "alloc":
        return type_key(instr.get("type"))
    return info.result if info.result in SCALARS else None


class Lowering:
    """What lowering one instruction needs: a builder positioned in a block, the
    run-time declarations, variable access, errors, and control hooks (the
    subclass gives them meaning: a whole function, or a JIT trace region)."""

    b: ir.IRBuilder
    rt: Runtime
    func_name: str

    # --- hooks ----------------------------------------------------------------------------

    def var_type(self, name):
        """The static type key of a variable (None if it is never assigned)."""
        raise NotImplementedError

    def read_var(self, name, instr, i):
        """The value of variable `name`, argument i of instr (emits an undefined check
        where needed); None if reading it always fails (the error is emitted)."""
        raise NotImplementedError

    def write(self, name, value):
        raise NotImplementedError

    def unset(self, name):
        raise NotImplementedError

    def jump(self):
        raise NotImplementedError

    def branch(self, cond):
        raise NotImplementedError

    def guard(self, cond):
        raise NotImplementedError

    def ret(self, instr):
        raise NotImplementedError

    def call(self, instr):
        raise NotImplementedError

    def speculate(self):
        raise NotImplementedError

    def commit(self):
        raise NotImplementedError

    # --- helpers --------------------------------------------------------------------------

    def read(self, instr, i):
        return self.read_var(instr["args"][i], instr, i)

    def dest_type(self, instr):
        return self.var_type(instr.get("dest"))

    def new_block(self, name):
        return self.b.function.append_basic_block(name)

    def raise_error(self, message):
        """End the current block with the run-time error `message`."""
        self.b.call(self.rt.fn("brt_fail"), [self.rt.cstring(message)])
        self.b.unreachable()

    def fail(self, message):
        """Raise the run-time error `message` here; later code lands in a dead block."""
        self.raise_error(message)
        self.b.position_at_end(self.new_block("dead"))

    def check(self, ok, on_failure):
        """Continue if the i1 `ok` holds, else run on_failure() (which must not return)."""
        bld = self.b
        bad = self.new_block("fail")
        good = self.new_block("ok")
        br = bld.cbranch(ok, good, bad)
        br.set_weights([1 << 20, 1])
        bld.position_at_end(bad)
        on_failure()
        if not bld.block.is_terminated:
            bld.unreachable()
        bld.position_at_end(good)

    def make_pointer(self, rid, offset):
        p = self.b.insert_value(ir.Constant(POINTER, ir.Undefined), rid, 0)
        return self.b.insert_value(p, offset, 1)

    def heap_cell(self, p, elem, check_init=None):
        """(address of the cell p points to, address of its initialised flag or None
        for a ptr<any> cell), after the bounds test; with check_init (the pointer's
        variable name) the cell must have been stored to."""
        bld, rt = self.b, self.rt
        rid = bld.extract_value(p, 0)
        off = bld.extract_value(p, 1)
        table = bld.load(rt.glob("brt_regions"), typ=PTR)
        table.set_metadata("tbaa", rt.tbaa("table"))
        entry = bld.gep(table, [rid], source_etype=REGION)
        length = bld.load(bld.gep(entry, [ir.Constant(I32, 0), ir.Constant(I32, 1)],
                                  source_etype=REGION), typ=I64)
        length.set_metadata("tbaa", rt.tbaa("table"))
        # Unsigned: a negative offset is out of range too.  A freed region has length 0.
        self.check(bld.icmp_unsigned("<", off, length),
                   lambda: bld.call(rt.fn("brt_fail_access"), [rid, off]))
        data = bld.load(entry, typ=PTR)
        data.set_metadata("tbaa", rt.tbaa("table"))
        cell = bld.gep(data, [off], source_etype=cell_type(elem))
        if elem == "any":
            # A ptr<any> cell is its own flag: its tag word is 0 (the memory starts
            # zeroed) until a value, whose tag is not, is stored.
            if check_init is not None:
                head = bld.load(cell, typ=I64)
                head.set_metadata("tbaa", rt.tbaa("cell"))
                self.check(bld.icmp_unsigned("!=", head, const_int(0)),
                           lambda: bld.call(rt.fn("brt_fail_uninit"), [rt.cstring(check_init)]))
            return cell, None
        flag = bld.gep(data, [bld.add(bld.mul(length, const_int(cell_size(elem))), off)],
                       source_etype=I8)
        if check_init is not None:
            stored = bld.load(flag, typ=I8)
            stored.set_metadata("tbaa", rt.tbaa("flag"))
            self.check(bld.icmp_unsigned("!=", stored, ir.Constant(I8, 0)),
                       lambda: bld.call(rt.fn("brt_fail_uninit"), [rt.cstring(check_init)]))
        return cell, flag

    def check_stored(self, v, flag, name):
        """A scalar cell just loaded as `v` was stored to: it reads other than zero,
        or its flag (read only then) is set; else the uninitialised-data error."""
        bld, rt = self.b, self.rt
        bits = bld.bitcast(v, I64) if v.type == F64 else v
        zero = self.new_block("load.zero")
        stored = self.new_block("load.stored")
        br = bld.cbranch(bld.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0)), stored, zero)
        br.set_weights([1 << 10, 1])
        bld.position_at_end(zero)
        f = bld.load(flag, typ=I8)
        f.set_metadata("tbaa", rt.tbaa("flag"))
        self.check(bld.icmp_unsigned("!=", f, ir.Constant(I8, 0)),
                   lambda: bld.call(rt.fn("brt_fail_uninit"), [rt.cstring(name)]))
        bld.branch(stored)
        bld.position_at_end(stored)

    def to_cell(self, v, key):
        if key == "any":
            return self.pack_cell(v)
        return self.b.zext(v, I8) if key == "bool" else v

    def from_cell(self, v, key):
        if key == "any":
            return self.unpack_cell(v)
        return self.b.trunc(v, I1) if key == "bool" else v

    def pack_cell(self, v):
        """TAGGED -> ANY_CELL: a pointer's region id moves above its tag."""
        bld = self.b
        tag, value, offset = (bld.extract_value(v, i) for i in range(3))
        is_ptr = bld.icmp_unsigned(">", tag, const_int(TAG_PTR_STEP))
        head = bld.select(is_ptr, bld.or_(tag, bld.shl(value, const_int(CELL_RID_SHIFT))), tag)
        cell = bld.insert_value(ir.Constant(ANY_CELL, ir.Undefined), head, 0)
        return bld.insert_value(cell, bld.select(is_ptr, offset, value), 1)

    def unpack_cell(self, c):
        """ANY_CELL -> TAGGED (`pack_cell`'s inverse)."""
        bld = self.b
        head, low = bld.extract_value(c, 0), bld.extract_value(c, 1)
        tag = bld.and_(head, const_int((1 << CELL_RID_SHIFT) - 1))
        is_ptr = bld.icmp_unsigned(">", tag, const_int(TAG_PTR_STEP))
        value = bld.select(is_ptr, bld.lshr(head, const_int(CELL_RID_SHIFT)), low)
        v = bld.insert_value(ir.Constant(TAGGED, ir.Undefined), tag, 0)
        v = bld.insert_value(v, value, 1)
        return bld.insert_value(v, bld.select(is_ptr, low, const_int(0)), 2)

    # --- the driver -----------------------------------------------------------------------

    def lower_instr(self, instr):
        op = instr.get("op")
        info = OPS.get(op)
        if info is None:
            self.fail(M.text(M.UNKNOWN_OPCODE, op=op))
            return
        if op in UNSUPPORTED:
            raise Unsupported(UNSUPPORTED[op], self.func_name)
        if op in SSA2_OPS:
            self.lower_ssa2(instr, op)
            return
        if op in ("and", "or") and len(instr.get("args") or []) == 2:
            self._lower_short_circuit(instr, op)
            return
        args = instr.get("args") or []
        if (op in ("load", "store", "ptradd") and info.args is not None
                and len(args) == len(info.args) and self.var_type(args[0]) == "any"
                and self.pointer_type(args[0], op) is None):
            self.lower_through_any(instr, op)
            return
        if op == "const" or info.args is None:
            values, arg_types = (), ()
        else:
            args = instr.get("args") or []
            if len(args) != len(info.args):
                self.fail(argcount_message(op, len(info.args), len(args)))
                return
            values, arg_types = [], []
            for i, (name, want) in enumerate(zip(args, info.args)):
                v = self.read(instr, i)
                if v is None:
                    return
                have = self.var_type(name)
                if have == "any" and want != "T":
                    # An `any` value where a kind is wanted: the interpreter's operand
                    # check, at run time.
                    have = want if want != "ptr" else self.pointer_type(name, op)
                    v = self.untag(v, have, operand_message(op, i, want), exact=op != "free")
                message = self._operand_error(instr, i, want, have, arg_types)
                if message is not None:
                    self.fail(message)
                    return
                elem = arg_types[0][1] if op == "store" and i == 1 else None
                if elem == "any":       # a ptr<any> cell holds undef too
                    v, have = self.tag_maybe_undef(v, have, self.undef_bit(name)), "any"
                elif op != "id":
                    self.not_undef(name, lambda: self._undef_message(instr, i, want,
                                                                     arg_types))
                if op == "store" and i == 1:
                    if elem == "any" or have == "any":
                        # A ptr<any> cell holds the value tagged; an `any` value stored
                        # into a typed region must be of its kind.
                        v = self.convert(v, have, elem, M.text(
                            M.STORE_KIND, type=js_type_text(_json_type(elem))))
                        have = elem
                values.append(v)
                arg_types.append(have)
        self.arg_keys = arg_types
        dest = instr.get("dest")
        keep = info.is_value and op != "call" and isinstance(dest, str)
        tag = None
        if keep:
            made = produced_type(instr, arg_types)
            declared = self.var_type(dest)
            if declared == "any" and made is not None:
                tag = made              # an `any` variable holds the value tagged
            elif made != declared:
                raise Unsupported(
                    f"ill-typed `{op}`: it gives {dest} (type "
                    f"{type_text(declared) if declared else '?'}) a value of type "
                    f"{type_text(made) if made else '?'}",
                    self.func_name)
        result = LOWER[op](self, instr, *values)
        if keep and result is not None:
            if tag is not None:
                result = self.tag(result, tag)
            self.write(dest, result, self.undef_bit(instr["args"][0]) if op == "id" else None)

    def _lower_short_circuit(self, instr, op):
        """`and`/`or` as the interpreter runs them: when the first argument decides,
        the second is not looked up (so it may be undefined, or not a bool)."""
        bld = self.b
        name0, name1 = instr["args"]
        a = self.read(instr, 0)
        if a is None:
            return
        have = self.var_type(name0)
        if have == "any":
            a, have = self.untag(a, "bool", operand_message(op, 0, "bool")), "bool"
        message = self._operand_error(instr, 0, "bool", have, [])
        if message is not None:
            self.fail(message)
            return
        self.not_undef(name0, lambda: operand_message(op, 0, "bool"))
        decided = a if op == "or" else bld.not_(a)
        before = bld.block
        rest = self.new_block(f"{op}.rest")
        join = self.new_block(f"{op}.join")
        bld.cbranch(decided, join, rest)
        bld.position_at_end(rest)
        result = a
        b = self.read(instr, 1)
        if b is not None:
            have = self.var_type(name1)
            if have == "any":
                b, have = self.untag(b, "bool", operand_message(op, 1, "bool")), "bool"
            message = self._operand_error(instr, 1, "bool", have, ["bool"])
            if message is not None:
                self.fail(message)
            else:
                self.not_undef(name1, lambda: operand_message(op, 1, "bool"))
                result = bld.or_(a, b) if op == "or" else bld.and_(a, b)
        if not bld.block.is_terminated:
            bld.branch(join)
        rest_end = bld.block
        bld.position_at_end(join)
        value = bld.phi(I1)
        value.add_incoming(a, before)
        value.add_incoming(result, rest_end)
        dest = instr.get("dest")
        if isinstance(dest, str):
            declared = self.var_type(dest)
            if declared == "any":
                value = self.tag(value, "bool")
            elif declared != "bool":
                raise Unsupported(
                    f"ill-typed `{op}`: it gives {dest} (type "
                    f"{type_text(declared) if declared else '?'}) a value of type bool",
                    self.func_name)
            self.write(dest, value)

    def _operand_error(self, instr, i, want, have, earlier):
        """The run-time message of an operand of the wrong type, or None if it fits."""
        op = instr["op"]
        if want == "T":
            if op != "store":
                return None          # `id`: any type
            elem = earlier[0][1]
            if elem == "any" or have == "any":
                return None          # checked at run time (`convert`)
            if kind(have) != kind(elem):
                return M.text(M.STORE_KIND, type=js_type_text(_json_type(elem)))
            if have != elem:
                raise Unsupported(f"storing a value of type {type_text(have)} through a "
                                  f"{type_text(earlier[0])}", self.func_name)
            return None
        if kind(have) == want:
            return None
        return operand_message(op, i, want)


    # --- `any` values (the dynamic extension) ------------------------------------------------

    def pointer_type(self, name, op):
        """The pointer type an `any` variable used as op's pointer must have: its declared
        one (the cells' layout depends on it); None for a variable declared `any`
        (`lower_through_any`)."""
        raise NotImplementedError

    def lower_through_any(self, instr, op):
        """load, store or ptradd through a pointer in a variable declared `any`: its
        type, hence its cells' layout, is known at run time only, from its tag (one
        case per pointer type of the program)."""
        bld = self.b
        args = instr["args"]
        p = self.read(instr, 0)
        if p is None:
            return
        tag = bld.extract_value(p, 0)
        self.check(bld.icmp_unsigned(">", tag, const_int(TAG_PTR_STEP)),
                   lambda: self.raise_error(operand_message(op, 0, "ptr")))
        v = None
        if op != "load":
            v = self.read(instr, 1)
            if v is None:
                return
            have = self.var_type(args[1])
        dest = instr.get("dest") if op != "store" else None
        if op == "ptradd":
            if have == "any":
                v = self.untag(v, "int", operand_message(op, 1, "int"))
            elif have != "int":
                self.fail(operand_message(op, 1, "int"))
                return
            else:
                self.not_undef(args[1], lambda: operand_message(op, 1, "int"))
            result = bld.insert_value(p, bld.add(bld.extract_value(p, 2), v), 2)
            if isinstance(dest, str):
                self.write(dest, self.convert(result, "any", self.var_type(dest),
                                              operand_message(op, 0, "ptr")))
            return
        done = self.new_block(f"{op}.done")
        other = self.new_block(f"{op}.other")
        switch = bld.switch(tag, other)
        loaded = []
        for key in self.program.pointer_types():
            blk = self.new_block(f"{op}.{type_text(key)}")
            switch.add_case(const_int(value_tag(key)), blk)
            bld.position_at_end(blk)
            ptr = decode_slot(bld, key, bld.extract_value(p, 1), lambda: bld.extract_value(p, 2))
            elem = key[1]
            self.arg_keys = [key, elem]
            if op == "load":
                value = _lower_load(self, instr, ptr)
                loaded.append((self.tag(value, elem), bld.block))
            else:
                if elem == "any":
                    x = self.tag_maybe_undef(v, have, self.undef_bit(args[1]))
                elif have == "any":
                    x = self.untag(v, elem, M.text(M.STORE_KIND,
                                                   type=js_type_text(_json_type(elem))))
                elif kind(have) != kind(elem):
                    self.raise_error(M.text(M.STORE_KIND, type=js_type_text(_json_type(elem))))
                    continue
                elif have != elem:
                    self.raise_error(M.text(M.ANY_POINTER, type=type_text(("ptr", have))))
                    continue
                else:
                    self.not_undef(args[1], lambda: self._undef_message(instr, 1, "T", [key]))
                    x = v
                _lower_store(self, instr, ptr, x)
            bld.branch(done)
        bld.position_at_end(other)      # (no pointer of another type exists)
        self.raise_error(M.text(M.ANY_POINTER, type="pointer"))
        bld.position_at_end(done)
        if loaded and isinstance(dest, str):
            value = bld.phi(TAGGED)
            for x, blk in loaded:
                value.add_incoming(x, blk)
            self.write(dest, value)

    def tag(self, v, key):
        """The `any` value holding v, of type key."""
        return tag_value(self.b, v, key)

    def untag(self, v, key, message, exact=True):
        """The value of type key that the `any` value v holds; the run-time error
        `message` if it holds a value of another kind (the interpreter's check).
        exact=False: any pointer will do for a pointer type key (`free`)."""
        bld = self.b
        tag = bld.extract_value(v, 0)
        if kind(key) == "ptr" and not exact:
            self.check(bld.icmp_unsigned(">", tag, const_int(TAG_PTR_STEP)),
                       lambda: self.raise_error(message))
        elif kind(key) == "ptr":
            # (the interpreter compares kinds only: a pointer of another type is beyond
            # native code, which lays cells out by the pointer's type)
            is_ptr = bld.icmp_unsigned(">", tag, const_int(TAG_PTR_STEP))
            self.check(is_ptr, lambda: self.raise_error(message))
            self.check(bld.icmp_unsigned("==", tag, const_int(value_tag(key))),
                       lambda: self.raise_error(M.text(M.ANY_POINTER, type=type_text(key))))
        else:
            self.check(bld.icmp_unsigned("==", tag, const_int(value_tag(key))),
                       lambda: self.raise_error(message))
        return decode_slot(bld, key, bld.extract_value(v, 1), lambda: bld.extract_value(v, 2))

    def convert(self, v, have, want, message):
        """v (of type have) as a value of type want, one of them `any` (message: the
        error if an `any` value is not of want's kind)."""
        if have == want:
            return v
        if want == "any":
            return self.tag(v, have)
        return self.untag(v, want, message)

    def print_any(self, v, end):
        """Print an `any` value as the type its tag says."""
        bld, rt = self.b, self.rt
        tag = bld.extract_value(v, 0)
        raw = bld.extract_value(v, 1)
        done = self.new_block("print.done")
        pointer = self.new_block("print.ptr")
        switch = bld.switch(tag, pointer)
        for key in ("int", "bool", "float", "char"):
            blk = self.new_block("print." + key)
            switch.add_case(const_int(value_tag(key)), blk)
            bld.position_at_end(blk)
            x = decode_slot(bld, key, raw, None)
            if key == "bool":
                bld.call(rt.fn("brt_print_bool"), [bld.zext(x, I32), end])
            else:
                bld.call(rt.fn(_PRINTERS[key]), [x, end])
            bld.branch(done)
        bld.position_at_end(pointer)
        bld.call(rt.fn("brt_print_ptr"), [end])
        bld.branch(done)
        bld.position_at_end(done)

    def _undef_message(self, instr, i, want, earlier):
        """The run-time message of operand i of instr holding ssa2's undefined value."""
        if instr["op"] == "store" and i == 1:
            return M.text(M.STORE_KIND, type=js_type_text(_json_type(earlier[0][1])))
        return operand_message(instr["op"], i, want)

    # --- ssa2 ------------------------------------------------------------------------------
    #
    # A shadow variable s lives beside the variables under the key ("shadow", s), with a
    # flag saying whether a `set` wrote it.  A variable (or shadow) that may hold the
    # undefined value of `undef` has an "undef bit" beside it (`undef_bit`), copied by
    # id/set/get; any other use of it tests the bit and fails as the interpreter does.

    def undef_bit(self, name):
        """The i1 undef bit of a variable or shadow, or None if it never holds undef."""
        raise NotImplementedError

    def not_undef(self, name, message):
        """Fail with message() at run time if variable `name` holds the undefined value."""
        if self.var_type(name) == "any":
            bit = self.b.icmp_unsigned("==", self.var_tag(name), const_int(TAG_UNDEF))
        else:
            bit = self.undef_bit(name)
        if bit is not None:
            self.check(self.b.not_(bit), lambda: self.raise_error(message()))

    def var_tag(self, name):
        """The tag of a variable held tagged (i64)."""
        raise NotImplementedError

    def tag_maybe_undef(self, v, key, bit):
        """The `any` value of v (type key), or undef's if the i1 `bit` (None: 0) is set."""
        v = self.tag(v, key)
        if bit is None:
            return v
        return self.b.select(bit, UNDEF_TAGGED, v)

    def lower_ssa2(self, instr, op):
        args = instr.get("args") or []
        dest = instr.get("dest")
        if op == "set":
            if len(args) != 2:
                self.fail(argcount_message(op, 2, len(args)))
                return
            v = self.read(instr, 1)
            if v is not None:
                shadow = ("shadow", args[0])
                v = self.convert(v, self.var_type(args[1]), self.var_type(shadow), None)
                self.write(shadow, v, self.undef_bit(args[1]))
            return
        if args:
            self.fail(argcount_message(op, 0, len(args)))
            return
        if not isinstance(dest, str):
            if op == "get":
                self.fail(M.text(M.NO_SET, name="undefined"))
            return
        if op == "undef":
            if self.var_type(dest) == "any":
                self.write(dest, UNDEF_TAGGED)
                return
            self.write(dest, ir.Constant(llvm_type(self.var_type(dest)), None),
                       ir.Constant(I1, 1))
            return
        v = self.read_shadow(dest)
        self.write(dest, v, self.undef_bit(("shadow", dest)))

    def read_shadow(self, name):
        """The value of shadow variable `name` (a run-time error if no `set` wrote it)."""
        raise NotImplementedError


def _bril_type_text(typ):
    """A Bril type (JSON form) as Bril text, also for types we do not support."""
    depth = 0
    while isinstance(typ, dict) and set(typ) == {"ptr"}:
        typ = typ["ptr"]
        depth += 1
    inner = typ if isinstance(typ, str) else repr(typ)
    return "ptr<" * depth + inner + ">" * depth


def _json_type(key):
    base, depth = _ptr_depth(key)
    for _ in range(depth):
        base = {"ptr": base}
    return base


# --- whole functions -------------------------------------------------------------------------

class LoweredFunction:
    """What lowering a function needs to know before its body: variable types,
    blocks, definedness, its LLVM signature."""

    def __init__(self, index, func, module, count, symbol=None, main=False, assumed=None,
                 constants=None, generic=None, number=0, loops=None):
        self.index = index
        self.func = func
        self.name = func.get("name", "")
        self.blocks = build_blocks(func)
        # `assumed` ({parameter declared `any`: type key}): this is the function's
        # variant for calls passing such values (`ProgramLowering.variants`), entered
        # from `generic`'s entry once its tags say so: those parameters, and the
        # `any` variables that then only ever hold one type's values, are held
        # unboxed; and the parameters in `constants` ({name: int or bool}) hold
        # those values (value speculation: LLVM folds them).
        self.assumed = assumed or {}
        self.constants = constants or {}
        self.types = tc.infer(func, self.blocks, {p: {_tag_of(key)} for p, key in
                                                  self.assumed.items()} or None)
        self.declared = self._variable_types()
        self.var_types = self._dynamic(self.declared)
        self.params = [p.get("name") for p in func.get("args") or []]
        self.ret_type = None
        if func.get("type") is not None:
            self.ret_type = self._type(func["type"], "return type")
        self.maybe_unbound = {
            name for b in self.blocks for instr in b.instrs
            for name, unbound in zip(instr.get("args") or [],
                                     self.types.arg_unbound.get(id(instr), ()))
            if unbound}
        self.shadow_types, maybe_undef = self._ssa2()
        if self.assumed:
            self.var_types.update(self._unboxed(maybe_undef))
        self.is_variant = generic is not None
        # (a variable held tagged holds undef as its tag, TAG_UNDEF: no undef bit)
        self.maybe_undef = {n for n in maybe_undef if self.type_of(n) != "any"}
        # What the function returns: its declared type's values, or `any` values when
        # it is declared so or may return a value of another type (a variable held
        # tagged, a value of another type or maybe undef, a value from a function
        # declared without one: tag 0 is "no value").  `ret` checks nothing: the
        # interpreter's caller checks what it gets.
        self.ret_repr = self.ret_type
        if generic is not None:
            self.ret_repr = generic.ret_repr        # (its callers take either's result)
        elif not main and self.ret_type != "any" and any(
                instr.get("op") == "ret" and len(instr.get("args") or []) == 1
                and (self.var_types.get(instr["args"][0]) not in (self.ret_type, None)
                     or instr["args"][0] in self.maybe_undef)
                for b in self.blocks for instr in b.instrs):
            self.ret_repr = "any"
        self.has_spec = self.types.has_spec
        self.count = count
        self.versions = self._loop_versions(loops or {})
        ret = llvm_type(self.ret_repr) if self.ret_repr is not None else VOID
        params = [llvm_type(self.var_types[p]) for p in self.params]
        # `symbol`: an externally visible name (the JIT shares compiled functions
        # between the modules of one run); otherwise internal to the module.
        suffix = "" if generic is None else f".variant{number}"
        self.llvm = ir.Function(module, ir.FunctionType(ret, params),
                                symbol or f"bril.{index}.{self.name}{suffix}")
        if symbol is None:
            self.llvm.linkage = "internal"

    def _loop_versions(self, loops):
        """{loop header (block index): ([{variable: type key}, ...], the loop's blocks)}:
        the copies of loops kept for the kinds of `any` values a profile saw at their
        headers (`loops`: {label: [{variable: type key}, ...]}).  A combination keeps
        the variables held tagged, certainly assigned and live there, whose kind the
        tag analysis does not know; a loop is copied only while the copies stay
        within VERSIONED_INSTRS in all."""
        if not loops or self.has_spec or not self.types.precise or any(
                instr.get("op") in ("phi", "set", "get") for b in self.blocks
                for instr in b.instrs):
            return {}
        from ..analysis.blocks import block_graph
        from ..analysis.cfg import natural_loops
        by_label = {b.label: b.index for b in self.blocks if b.label is not None}
        bodies = {loop.header: loop.body for loop in natural_loops(block_graph(self.blocks))}
        room = VERSIONED_INSTRS
        found = {}
        for label, combos in sorted(loops.items()):
            h = by_label.get(label)
            st = self.types.block_in[h] if h in bodies else None
            if st is None:
                continue
            live = self.types.live_at(h)
            kept = []
            for combo in combos:
                mine = {}
                for var, key in sorted(combo.items()):
                    tags = st.types.get(var)
                    if self.var_types.get(var) != "any" or var not in st.bound or (
                            live is not None and var not in live) or tags == {_tag_of(key)}:
                        continue
                    if tags is not None and _tag_of(key) not in tags and "?" not in tags:
                        mine = None         # (never so: the analysis says otherwise)
                        break
                    mine[var] = key
                if mine and mine not in kept:
                    kept.append(mine)
            size = sum(self.blocks[bi].size for bi in bodies[h]) * len(kept)
            if kept and size <= room:
                room -= size
                found[h] = (kept, bodies[h])
        return found

    def _type(self, typ, what):
        key = type_key(typ)
        if key is None:
            raise Unsupported(f"the type {_bril_type_text(typ)} ({what})", self.name)
        return key

    def type_of(self, name):
        """The type key of a variable, or of a shadow variable ("shadow", name)."""
        if isinstance(name, tuple):
            return self.shadow_types.get(name[1])
        return self.var_types.get(name)

    def _ssa2(self):
        """({shadow: type key}, {variables and ("shadow", s) that may hold undef}).
        A shadow has the type of the values `set` writes into it, which must be
        the type of the variable its `get` writes."""
        shadows = {}
        flows = {}                      # where an undefined value can go (id, set, get)
        undef = []
        for b in self.blocks:
            for instr in b.instrs:
                op = instr.get("op")
                dest, args = instr.get("dest"), instr.get("args") or []
                src = dst = None
                if op == "get" and isinstance(dest, str) and dest in self.var_types:
                    src, dst = ("shadow", dest), dest
                    what, key = dest, self.var_types[dest]
                elif op == "set" and len(args) == 2 and args[1] in self.var_types:
                    src, dst = args[1], ("shadow", args[0])
                    what, key = args[0], self.var_types[args[1]]
                elif op == "id" and len(args) == 1 and isinstance(dest, str):
                    flows.setdefault(args[0], []).append(dest)
                    continue
                elif op == "undef" and isinstance(dest, str):
                    undef.append(dest)
                    continue
                else:
                    continue
                flows.setdefault(src, []).append(dst)
                old = shadows.setdefault(what, key)
                if "any" in (old, key):
                    shadows[what] = "any"       # `set` tags a typed value
                elif old != key:
                    raise Unsupported(f"shadow variable {what} with two types, "
                                      f"{type_text(old)} and {type_text(key)}", self.name)
        seen = set(undef)
        while undef:
            for n in flows.get(undef.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    undef.append(n)
        return shadows, seen

    def _dynamic(self, declared):
        """The variables' types in native code: the declared ones, except `any` for the
        variables whose value may be of another type than declared -- those of type
        `any`, and those assigned from one as is (`id`, a ptr<any>'s `load`, ssa2's
        `set`/`get`), which the interpreter does not check."""
        flows = {}
        dynamic = [n for n, key in declared.items() if key == "any"]
        for b in self.blocks:
            for instr in b.instrs:
                op, dest, args = instr.get("op"), instr.get("dest"), instr.get("args") or []
                if op == "set" and len(args) == 2:
                    flows.setdefault(args[1], []).append(("shadow", args[0]))
                elif not isinstance(dest, str):
                    continue
                elif op == "id" and len(args) == 1:
                    flows.setdefault(args[0], []).append(dest)
                elif op == "get":
                    flows.setdefault(("shadow", dest), []).append(dest)
                elif op == "load" and len(args) == 1 and declared.get(args[0]) in (
                        ("ptr", "any"), "any"):
                    dynamic.append(dest)
        seen = set(dynamic)
        while dynamic:
            for n in flows.get(dynamic.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    dynamic.append(n)
        return {n: "any" if n in seen else key for n, key in declared.items()}

    def _unboxed(self, maybe_undef):
        """{variable: type key} for the `any` variables (assumed parameters included)
        that hold only one type's values when the assumptions hold: each assignment
        gives one (the tag analysis says so), never as is from a value held tagged
        (a call's result, a ptr<any> cell, ssa2's shadows, undef).  The others, and
        the assumed parameters assigned otherwise, stay tagged."""
        types = self.types
        if not types.precise:
            return {}
        shadowed = set(maybe_undef)
        defs = {p: [None] for p in self.assumed}
        for b in self.blocks:
            for instr in b.instrs:
                op, dest = instr.get("op"), instr.get("dest")
                if op in ("set", "get"):
                    shadowed.update(instr.get("args") or ())
                    shadowed.add(dest)
                if isinstance(dest, str) and self.var_types.get(dest) == "any":
                    defs.setdefault(dest, []).append(instr)
        found = {}
        for name, instrs in defs.items():
            if name in shadowed or self.declared.get(name) != "any":
                continue
            keys = set()
            for instr in instrs:
                if instr is None:
                    keys.add(self.assumed[name])
                    continue
                op = instr.get("op")
                if op in ("call", "get", "undef", "phi") or op not in OPS:
                    keys.add(None)
                    continue
                tags = tc.result_tags(instr, types.arg_tags.get(id(instr)) or ())
                keys.add(_key_of_tags(tags))
            if len(keys) == 1 and None not in keys:
                found[name] = keys.pop()
        # A copy (`id`) or a load gives its value as the source holds it: typed only
        # if the source is (or the pointer's cells are), down to a fixpoint.
        changed = True
        while changed:
            changed = False
            for name in list(found):
                for instr in defs[name]:
                    if instr is None or instr.get("op") not in ("id", "load"):
                        continue
                    src = (instr.get("args") or [None])[0]
                    have = found.get(src, self.var_types.get(src))
                    ok = (have == found[name] if instr["op"] == "id" else
                          kind(have) == "ptr" and have[1] == found[name])
                    if not ok:
                        del found[name]
                        changed = True
                        break
        return found

    def _variable_types(self):
        types = {}
        seen_params = set()
        for p in self.func.get("args") or []:
            name = p.get("name")
            if name in seen_params:
                raise Unsupported(f"two parameters named {name}", self.name)
            seen_params.add(name)
            types[name] = self._type(p.get("type"), f"parameter {name}")
        for b in self.blocks:
            for instr in b.instrs:
                dest = instr.get("dest")
                op = instr.get("op")
                if not isinstance(dest, str) or op not in OPS:
                    continue
                if not OPS[op].is_value and op != "call":
                    continue
                if "type" not in instr:
                    if op == "call":
                        continue        # reported when the call runs
                    raise Unsupported(f"{dest} without a type", self.name)
                key = self._type(instr["type"], f"variable {dest}")
                old = types.setdefault(dest, key)
                if old != key:
                    raise Unsupported(f"variable {dest} with two types, "
                                      f"{type_text(old)} and {type_text(key)}", self.name)
        return types


def _untagged(bld, v, key):
    return decode_slot(bld, key, bld.extract_value(v, 1), lambda: bld.extract_value(v, 2))


def _return(bld, result, repr_):
    if repr_ is None:
        bld.ret_void()
    else:
        bld.ret(result)


class FunctionLowering(Lowering):
    """One Bril function as one LLVM function."""

    def __init__(self, info, program):
        self.info = info
        self.program = program
        self.rt = program.rt
        self.func_name = info.name
        fn = self.fn = info.llvm
        variants = program.variants(info) if not info.is_variant else ()
        if variants:
            # The function callers call only picks a variant (or the generic code,
            # moved to a function of its own): small, so LLVM inlines it into each
            # caller, where the tags and values a call passes are often known and
            # the choice folds away (leaving a variant a caller may inline in turn).
            fn = self.fn = ir.Function(info.llvm.module, info.llvm.function_type,
                                       info.llvm.name + ".generic")
            fn.linkage = "internal"
            self.dispatch_to_variants(variants)
        shadows = [("shadow", s) for s in sorted(info.shadow_types)]
        self.frame(fn, sorted(info.var_types) + shadows,
                   set(info.maybe_unbound) | set(shadows), info.count)

    def frame(self, fn, names, flagged, count):
        """The entry block of fn and the allocas: a slot per variable in `names`, a
        definedness flag for those in `flagged`, an undef bit for those that may hold
        ssa2's undefined value, the count, the speculation stack.  A name is a
        variable's, or ("shadow", s) for an ssa2 shadow variable."""
        info = self.info
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.slots = {}
        self.flags = {}
        self.undefs = {}
        for name in names:
            text = name if isinstance(name, str) else "shadow." + name[1]
            self.slots[name] = self.b.alloca(llvm_type(info.type_of(name)), name=text)
            if name in flagged:
                self.flags[name] = self.b.alloca(I1, name=text + ".defined")
            if name in info.maybe_undef:
                self.undefs[name] = self.b.alloca(I1, name=text + ".undef")
        self.counter = self.b.alloca(I64, name=".count") if count else None
        self.spec_top = self.b.alloca(PTR, name=".spec") if info.has_spec else None
        self.snapshot_type = None
        if info.has_spec:
            # An abort restores the variables and shadows it may find changed and
            # its target may read (`FunctionTypes.snapshot_keys`), with their flags
            # and undef bits.
            fields = [PTR, PTR] + [c.allocated_type for c in self.snapshot_cells()]
            self.snapshot_type = ir.LiteralStructType(fields)
        self.block = None
        self.known = {}                 # variable -> value written in this block
        self.dirty = {}                 # ... and not yet stored in its slot

    def snapshot_cells(self):
        keys = self.info.types.snapshot_keys
        return [cells[k] for cells in (self.slots, self.flags, self.undefs)
                for k in cells if k in keys]

    # --- the body ------------------------------------------------------------------------

    def lower(self):
        info, bld = self.info, self.b
        for name in self.flags:
            bld.store(ir.Constant(I1, 0), self.flags[name])
        for name in self.undefs:
            bld.store(ir.Constant(I1, 0), self.undefs[name])
        for name, arg in zip(info.params, self.fn.args):
            self.write(name, arg)
        for name, v in info.constants.items():
            key = "bool" if type(v) is bool else "int"
            self.write(name, self.convert(ir.Constant(llvm_type(key), int(v)), key,
                                          self.var_type(name), None))
        if self.counter is not None:
            bld.store(const_int(0), self.counter)
        if self.spec_top is not None:
            bld.store(ir.Constant(PTR, None), self.spec_top)
        depth = self.rt.glob("brt_depth")
        self.depth = bld.load(depth, typ=I64)
        deeper = bld.add(self.depth, const_int(1))
        self.check(bld.icmp_signed("<=", deeper, const_int(M.MAX_CALL_DEPTH)),
                   lambda: bld.call(self.rt.fn("brt_fail_depth"), []))
        bld.store(deeper, depth)
        self.llvm_blocks = [self.fn.append_basic_block(f"b{b.index}" + (
            f".{b.label}" if b.label else "")) for b in info.blocks]
        # Copies of loops (`LoweredFunction.versions`): each entered through
        # `enter` blocks that retag its variables with their kinds, constants LLVM
        # folds the tag tests with; every edge into a copied loop's header tests
        # the kinds and goes to the copy they match, else to the generic loop.
        self.version = None             # (header, its loop's blocks, the copy's blocks)
        self.copies = {}                # (header, k) -> (enter block, {block index: block})
        for h, (combos, body) in sorted(info.versions.items()):
            for k in range(len(combos)):
                self.copies[h, k] = (self.fn.append_basic_block(f"v{h}.{k}.enter"), {
                    bi: self.fn.append_basic_block(f"v{h}.{k}.b{bi}") for bi in sorted(body)})
        self.store_written()
        bld.branch(self.target(0))
        for b in info.blocks:
            self.emit_block(b, self.llvm_blocks[b.index])
        for (h, k), (enter, copy) in sorted(self.copies.items(), key=lambda item: item[0]):
            combo, body = info.versions[h][0][k], info.versions[h][1]
            bld.position_at_end(enter)
            self.retag(combo)
            bld.branch(copy[h])
            self.version = (h, body, copy)
            for bi in sorted(body):
                self.emit_block(info.blocks[bi], copy[bi])
            self.version = None

    def emit_block(self, b, llvm_block):
        """Lower Bril block b (of the generic code, or of a loop's copy) into llvm_block."""
        bld = self.b
        self.begin_block(b, llvm_block)
        for instr in b.instrs:
            self.lower_instr(instr)
        if b.term is None and not bld.block.is_terminated:
            if b.falls_off:
                self.implicit_return()
            else:
                self.store_written()
                bld.branch(self.target(b.succs[0]))
        elif not bld.block.is_terminated:
            bld.unreachable()       # after an error in the terminator itself

    def retag(self, kinds):
        """Store each tagged variable's tag of `kinds` ({variable: type key}) as a
        constant (LLVM then folds the tests of it)."""
        bld = self.b
        for var, key in sorted(kinds.items()):
            slot = self.slots[var]
            bld.store(bld.insert_value(bld.load(slot, typ=TAGGED), const_int(value_tag(key)), 0),
                      slot)

    def holds(self, kinds):
        """IR: true if each tagged variable of `kinds` holds a value of its type key."""
        bld = self.b
        ok = None
        for var, key in sorted(kinds.items()):
            tag = bld.extract_value(bld.load(self.slots[var], typ=TAGGED), 0)
            same = bld.icmp_unsigned("==", tag, const_int(value_tag(key)))
            ok = same if ok is None else bld.and_(ok, same)
        return ok

    def dispatch(self, h):
        """A block sending an edge into copied loop header h to the copy whose kinds
        the variables hold, else to the generic header (slots stored)."""
        bld = self.b
        here = bld.block
        first = self.new_block(f"dispatch{h}")
        bld.position_at_end(first)
        for k, combo in enumerate(self.info.versions[h][0]):
            other = self.new_block(f"dispatch{h}.not{k}")
            bld.cbranch(self.holds(combo), self.copies[h, k][0], other)
            bld.position_at_end(other)
        bld.branch(self.llvm_blocks[h])
        bld.position_at_end(here)
        return first

    def dispatch_to_variants(self, variants):
        """The body of the function callers call: the call of the first variant whose
        types (and values) the arguments have, else of the generic code (`self.fn`).
        (Each keeps its own count and depth.)"""
        info = self.info
        bld = ir.IRBuilder(info.llvm.append_basic_block("entry"))
        args = list(info.llvm.args)
        for variant in variants:
            ok = None
            for name, arg in zip(info.params, args):
                key = variant.assumed.get(name)
                tests = []
                if key is not None:
                    tests.append(bld.icmp_unsigned("==", bld.extract_value(arg, 0),
                                                   const_int(value_tag(key))))
                    arg = _untagged(bld, arg, key)
                if name in variant.constants:
                    v = variant.constants[name]
                    tests.append(bld.icmp_unsigned("==", arg, ir.Constant(arg.type, int(v))))
                for same in tests:
                    ok = same if ok is None else bld.and_(ok, same)
            with bld.if_then(ok, likely=True):
                values = [_untagged(bld, arg, variant.var_types[name])
                          if name in variant.assumed and variant.var_types[name] != "any"
                          else arg for name, arg in zip(info.params, args)]
                _return(bld, bld.call(variant.llvm, values), variant.ret_repr)
        _return(bld, bld.call(self.fn, args), info.ret_repr)

    def untagged(self, v, key):
        """The value of type key an `any` value holds (its tag known to say so)."""
        return _untagged(self.b, v, key)

    def begin_block(self, b, llvm_block):
        """Lower Bril block b from the start of llvm_block: count its instructions,
        forget the values known from the block before."""
        self.block = b
        bld = self.b
        bld.position_at_end(llvm_block)
        # A variable written in this block is read from the value written, not
        # loaded back, and stored in its slot once, when the block is left (or a
        # snapshot taken): a long block no longer makes LLVM's SROA sort thousands
        # of loads and stores to one slot (superlinear: 100,000 adds took 1.1 s,
        # 200,000 2.6 s) and the IR is half as long.  Sound because a write happens
        # where the builder stands on the block's main line, which dominates the
        # rest of the block, and nothing but the block's own code reads the slots
        # before it is left: callees have frames of their own, an error ends the run.
        self.known = {}
        self.dirty = {}
        if self.counter is not None and b.size:
            bld.store(bld.add(bld.load(self.counter, typ=I64), const_int(b.size)),
                      self.counter)

    # --- variables -----------------------------------------------------------------------

    def var_type(self, name):
        return self.info.type_of(name)

    def pointer_type(self, name, op):
        key = self.info.declared.get(name)
        if kind(key) == "ptr":
            return key
        # (`free` needs no layout; a ptr<int> stands for any pointer type there)
        return ("ptr", "int") if op == "free" else None

    def read_var(self, name, instr, i):
        value = self.known.get(name)
        if value is not None:           # written earlier in this block: defined
            return value
        slot = self.slots.get(name)
        if slot is None:
            self.fail(M.text(M.UNDEFINED_VARIABLE, name=name))
            return None
        flag = self.flags.get(name)
        if flag is not None:
            unbound = self.info.types.arg_unbound.get(id(instr), ())
            if i < len(unbound) and unbound[i]:
                self.check(self.b.load(flag, typ=I1),
                           lambda: self.raise_error(M.text(M.UNDEFINED_VARIABLE, name=name)))
        return self.b.load(slot, typ=slot.allocated_type)

    def write(self, name, value, undef=None):
        """Assign a variable (or shadow); `undef`: its new undef bit (i1), if not 0."""
        if undef is not None and self.var_type(name) == "any":
            value = self.b.select(undef, UNDEF_TAGGED, value)
        if isinstance(name, str):
            self.known[name] = value
            self.dirty[name] = value    # stored at the block's end (`store_written`)
        else:
            self.b.store(value, self.slots[name])
        if name in self.flags:
            self.b.store(ir.Constant(I1, 1), self.flags[name])
        bit = self.undefs.get(name)
        if bit is not None:
            self.b.store(undef if undef is not None else ir.Constant(I1, 0), bit)

    def store_written(self):
        """Store the values written in this block into their slots: before it is
        left (a jump, a branch, a guard, falling through) or a snapshot taken."""
        for name, value in self.dirty.items():
            self.b.store(value, self.slots[name])
        self.dirty = {}

    def undef_bit(self, name):
        bit = self.undefs.get(name)
        return None if bit is None else self.b.load(bit, typ=I1)

    def var_tag(self, name):
        value = self.known.get(name)
        if value is None:
            value = self.b.load(self.slots[name], typ=TAGGED)
        return self.b.extract_value(value, 0)

    def read_shadow(self, name):
        key = ("shadow", name)
        flag = self.flags.get(key)
        if flag is None:                # no `set` of it anywhere
            self.fail(M.text(M.NO_SET, name=name))
            return ir.Constant(llvm_type(self.var_type(name)), None)
        self.check(self.b.load(flag, typ=I1),
                   lambda: self.raise_error(M.text(M.NO_SET, name=name)))
        return self.b.load(self.slots[key], typ=self.slots[key].allocated_type)

    def unset(self, name):
        self.known.pop(name, None)      # (a read now checks the flag)
        if name in self.flags:
            self.b.store(ir.Constant(I1, 0), self.flags[name])

    # --- control -------------------------------------------------------------------------

    def target(self, t):
        """The LLVM block for a jump to block index t, or to a block raising t's error."""
        if isinstance(t, int):
            v = self.version
            if v is not None and t != v[0] and t in v[1]:
                return v[2][t]              # (within a loop's copy)
            if t in self.info.versions:
                return self.dispatch(t)
            return self.llvm_blocks[t]
        here = self.b.block
        bad = self.new_block("badlabel")
        self.b.position_at_end(bad)
        self.raise_error(t)
        self.b.position_at_end(here)
        return bad

    def jump(self):
        self.store_written()
        self.b.branch(self.target(self.block.targets[0]))

    def branch(self, cond):
        self.store_written()
        t, f = self.block.targets
        self.b.cbranch(cond, self.target(t), self.target(f))

    def after_guard(self):
        """Where a passing guard continues."""
        b = self.block
        if b.falls_off:
            here = self.b.block
            tail = self.new_block("falloff")
            self.b.position_at_end(tail)
            self.implicit_return()
            self.b.position_at_end(here)
            return tail
        return self.llvm_blocks[b.succs[0]]

    def guard(self, cond):
        self.store_written()
        bld = self.b
        t = self.block.targets[0]
        abort = self.new_block("abort")
        bld.cbranch(cond, self.after_guard(), abort)
        bld.position_at_end(abort)
        if isinstance(t, str) and not t.startswith("label "):
            self.fail(t)                        # missing labels: before the state test
            return
        top = bld.load(self.spec_top, typ=PTR)
        self.check(bld.icmp_unsigned("!=", top, ir.Constant(PTR, None)),
                   lambda: self.raise_error(M.ABORT_OUTSIDE))
        self.restore(top)
        self.pop_snapshot(top)
        bld.branch(self.target(t))

    def flush_count(self):
        if self.counter is not None:
            bld = self.b
            total = self.rt.glob("brt_dyn_count")
            n = bld.load(self.counter, typ=I64)
            bld.store(bld.add(bld.load(total, typ=I64), n), total)
            bld.store(const_int(0), self.counter)

    def not_speculating(self, message):
        if self.spec_top is not None:
            top = self.b.load(self.spec_top, typ=PTR)
            self.check(self.b.icmp_unsigned("==", top, ir.Constant(PTR, None)),
                       lambda: self.raise_error(message))

    def emit_return(self, value):
        self.flush_count()
        self.b.store(self.depth, self.rt.glob("brt_depth"))
        if self.info.ret_repr is None:
            self.b.ret_void()
        elif value is None:         # (an `any` result: tag 0, no value)
            self.b.ret(ir.Constant(llvm_type(self.info.ret_repr), None))
        else:
            self.b.ret(value)

    def returns_nothing(self):
        """A return without a value: an error in a typed function (the interpreter
        raises it in every caller), except in @main, which the run time calls."""
        info = self.info
        if info.ret_type is not None and not self.program.is_main(info):
            self.fail(M.text(M.NONVOID_NO_VALUE, type=type_text(info.ret_type)))
        self.emit_return(None)

    def implicit_return(self):
        self.not_speculating(M.IMPLICIT_RETURN_IN_SPECULATION)
        self.returns_nothing()

    def ret(self, instr):
        self.not_speculating(M.RET_IN_SPECULATION)
        args = instr.get("args") or []
        if len(args) > 1:
            self.fail(M.text(M.RET_ARGCOUNT, found=len(args)))
            return None
        if not args:
            self.returns_nothing()
            return None
        value = self.read(instr, 0)
        if value is None:
            return None
        info = self.info
        have = self.var_type(args[0])
        if info.ret_repr == "any":
            # (which error an undefined value causes depends on the caller)
            value = self.tag_maybe_undef(value, have, self.undef_bit(args[0]))
        elif info.ret_type is None:
            value = None                        # @main's value is dropped
        elif have != info.ret_type:
            raise Unsupported(f"`ret {args[0]}` (type {type_text(have)}) in a function "
                              f"declared {type_text(info.ret_type)}", info.name)
        self.emit_return(value)
        return None

    def call(self, instr):
        bld = self.b
        self.not_speculating(M.CALL_IN_SPECULATION)
        funcs = instr.get("funcs")
        if not funcs:
            self.fail(call_funcs_message(funcs))
            return None
        callee = self.program.resolve(self.info.index, funcs[0])
        if isinstance(callee, str):
            self.fail(callee)
            return None
        args = instr.get("args") or []
        if len(args) != len(callee.params):
            self.fail(M.text(M.ARITY, expected=len(callee.params), found=len(args)))
            return None
        values = []
        # A callee with a variant for the types this call passes unboxed is that
        # variant's call (no tag to test).
        target = next((v for v in self.program.variants(callee) if not v.constants and all(
            param not in v.assumed or (self.var_type(name) == v.assumed[param]
                                       and name not in self.info.maybe_undef)
            for name, param in zip(args, callee.params))), callee)
        for i, (name, param) in enumerate(zip(args, callee.params)):
            v = self.read(instr, i)
            if v is None:
                return None
            have, want = self.var_type(name), callee.declared[param]
            if param in target.assumed:
                values.append(self.convert(v, have, target.var_types[param], None))
                continue
            if want == "any":
                v, have = self.tag_maybe_undef(v, have, self.undef_bit(name)), "any"
            else:
                if have == "any":       # the interpreter checks the argument's kind
                    v, have = self.untag(v, want, M.ARGUMENT_MISMATCH), want
                if kind(have) != kind(want):
                    self.fail(M.ARGUMENT_MISMATCH)
                    return None
                self.not_undef(name, lambda: M.ARGUMENT_MISMATCH)
                if have != want:
                    raise Unsupported(f"passing a value of type {type_text(have)} as a "
                                      f"{type_text(want)} to @{callee.name}", self.info.name)
            # (a parameter held as an `any` value: tagged)
            values.append(self.convert(v, have, target.var_types[param], None))
        self.flush_count()
        result = bld.call(target.llvm, values)
        dest = instr.get("dest")
        ftype = callee.ret_type
        have = callee.ret_repr
        if have == "any" and ftype is None:
            # A function without a return type that may return a value anyway.
            returned = bld.icmp_unsigned("!=", bld.extract_value(result, 0), const_int(0))
        if dest is None:
            if ftype is not None:
                # A typed callee returned a value (it fails inside if it returns none).
                self.fail(M.VALUE_WITHOUT_DEST)
            elif have == "any":
                self.check(bld.not_(returned), lambda: self.raise_error(M.VALUE_WITHOUT_DEST))
            return None
        if "type" not in instr:
            self.fail(M.UNTYPED_DEST)
            return None
        itype = self.info.declared.get(dest)
        if ftype is None:
            if have == "any":
                self.check(returned, lambda: self.raise_error(nonvoid_message(None)))
                if itype != "any":
                    self.untag(result, itype, M.RESULT_MISMATCH)
                self.fail(M.VOID_IN_VALUE_CALL)
            else:
                self.fail(nonvoid_message(None))
            return None
        if have == "any" and itype != "any":    # the interpreter checks the result's kind
            result, have = self.untag(result, itype, M.RESULT_MISMATCH), itype
        if itype != "any" and kind(itype) != kind(have):
            self.fail(M.RESULT_MISMATCH)
            return None
        if not type_cmp(_json_type(itype), _json_type(ftype)):
            self.fail(M.DECLARATION_MISMATCH)
            return None
        if self.var_type(dest) != "any" and have != itype:
            raise Unsupported(f"a call of @{callee.name} (type {type_text(have)}) into "
                              f"{dest} (type {type_text(itype)})", self.info.name)
        self.write(dest, self.convert(result, have, self.var_type(dest), None))
        return None

    # --- speculation: a stack of snapshots in dynamic allocas -----------------------------
    #
    # A snapshot holds {previous snapshot, stack pointer before it, every variable,
    # every definedness flag}.  Snapshots are made and dropped last-in first-out, so
    # each lives in stack memory released with llvm.stackrestore when it is dropped.

    def speculate(self):
        self.store_written()            # (the snapshot copies the slots)
        bld = self.b
        sp = bld.call(self.rt.fn("llvm.stacksave.p0"), [])
        frame = bld.alloca(self.snapshot_type)
        prev = bld.load(self.spec_top, typ=PTR)
        bld.store(frame, self.spec_top)
        # Reloaded as an opaque pointer: llvmlite types GEPs on an alloca by its
        # pointee, which would mistype the field addresses.
        snap = bld.load(self.spec_top, typ=PTR)
        fields = [prev, sp] + [bld.load(c, typ=c.allocated_type) for c in self.snapshot_cells()]
        for i, v in enumerate(fields):
            bld.store(v, self.snapshot_field(snap, i))
        return None

    def snapshot_field(self, snap, i):
        return self.b.gep(snap, [ir.Constant(I32, 0), ir.Constant(I32, i)],
                          source_etype=self.snapshot_type)

    def restore(self, snap):
        bld = self.b
        for i, cell in enumerate(self.snapshot_cells(), start=2):
            bld.store(bld.load(self.snapshot_field(snap, i), typ=cell.allocated_type), cell)

    def pop_snapshot(self, snap):
        bld = self.b
        prev = bld.load(self.snapshot_field(snap, 0), typ=PTR)
        sp = bld.load(self.snapshot_field(snap, 1), typ=PTR)
        bld.store(prev, self.spec_top)
        bld.call(self.rt.fn("llvm.stackrestore.p0"), [sp])

    def commit(self):
        bld = self.b
        top = bld.load(self.spec_top, typ=PTR)
        self.check(bld.icmp_unsigned("!=", top, ir.Constant(PTR, None)),
                   lambda: self.raise_error(M.COMMIT_OUTSIDE))
        self.pop_snapshot(top)
        return None


# --- whole programs ---------------------------------------------------------------------------

class ProgramLowering:
    """Every function reachable from @main, plus the entry `bril_start(argc, argv)`
    that brilrt's main() calls: it checks and parses @main's arguments and runs it."""

    def __init__(self, linked, *, count=True, name="bril", assumptions=None):
        self.linked = linked
        self.module = ir.Module(name=name)
        self.rt = Runtime(self.module)
        self.count = count
        self.infos = {}
        self.declared = []                      # indexes of self.infos, in declaration order
        self.main_index = linked.main_index()
        self._pointer_types = None
        # function name -> ([{`any` parameter: a type key}: the types its calls are
        # assumed to pass, each set a variant], {int or bool parameter: the value
        # they are assumed to pass}, {loop header label: [{`any` variable: a type
        # key}: the types it is assumed to hold there, each set a copy of the loop]})
        self.assumptions = assumptions or {}
        self.variants_of = {}                   # index -> [LoweredFunction]

    def info(self, index):
        info = self.infos.get(index)
        if info is None:
            func = self.linked.functions[index]
            info = self.infos[index] = LoweredFunction(
                index, func, self.module, self.count, main=index == self.main_index,
                loops=self.assumptions.get(func.get("name", ""), ((), {}, {}))[2])
            self.declared.append(index)
        return info

    def variants(self, info):
        """The variants of a function for the parameter types and values it is assumed
        to be called with (`assumptions`, from a profile), the most specific first:
        for the first set of types and the values, then for each set of types alone.
        Its entry enters the first whose assumptions the arguments meet (a value that
        changes keeps the types' variant); a caller holding the arguments unboxed
        calls a types' variant directly; the function itself is the fallback."""
        found = self.variants_of.get(info.index)
        if found is None:
            found = self.variants_of[info.index] = []
            kind_sets, values, loops = self.assumptions.get(info.name, ([], {}, {}))
            if info.has_spec:
                return found
            kind_sets = [{p: key for p, key in kinds.items() if info.declared.get(p) == "any"}
                         for kinds in kind_sets]
            kind_sets = [kinds for kinds in kind_sets if kinds]
            constants, with_values = {}, dict(kind_sets[0] if kind_sets else {})
            # (only where a constant pays: values its loops compute with, or a short
            # trip count)
            values = worth_constants(info.func.get("instrs") or (), values,
                                     main=self.is_main(info))
            for p, v in values.items() if not self._calls_others(info) else ():
                key = "bool" if type(v) is bool else "int"
                if info.declared.get(p) == "any" and with_values.get(p, key) == key:
                    with_values[p] = key
                elif info.declared.get(p) != key:
                    continue
                constants[p] = v
            for assume, consts in ([(with_values, constants)] if constants else []) + [
                    (kinds, {}) for kinds in kind_sets]:
                found.append(LoweredFunction(info.index, info.func, self.module, self.count,
                                             assumed=assume, constants=consts, generic=info,
                                             number=len(found), loops=loops))
        return found

    @staticmethod
    def _calls_others(info):
        """Does the function call another one?  Then it gets no value variant: with its
        generic code beside it, its callees have two callers where they had one, and
        LLVM no longer inlines them (fnv1-hash's @xor8: 1.24x slower for a variant
        of @fnv1a with its length known).  Calls of itself are fine."""
        return any(instr.get("op") == "call" and (instr.get("funcs") or [None])[0] != info.name
                   for b in info.blocks for instr in b.instrs)

    def resolve(self, caller_index, name):
        r = self.linked.resolve_call(caller_index, name)
        return r if isinstance(r, str) else self.info(r)

    def pointer_types(self):
        """Every pointer type of the program (what a pointer's tag can say), sorted."""
        if self._pointer_types is None:
            found = set()
            for f in self.linked.functions:
                types = [f.get("type")] + [a.get("type") for a in f.get("args") or []]
                types += [i.get("type") for i in f.get("instrs") or []]
                for typ in types:
                    key = type_key(typ)
                    while key is not None and kind(key) == "ptr":
                        found.add(key)
                        key = key[1]
            self._pointer_types = sorted(found, key=type_text)
        return self._pointer_types

    def is_main(self, info):
        return info.index == self.main_index

    def lower(self):
        main = self.info(self.main_index)
        done = set()
        while len(done) < len(self.infos):      # lowering a call declares its callee
            # Each round lowers the functions declared so far but not yet lowered
            # (in index order); `self.infos` only grows, in declaration order, so
            # the new ones are its tail: linear, however long a call chain.
            new = sorted(self.declared[len(done):])
            for index in new:
                done.add(index)
                FunctionLowering(self.infos[index], self).lower()
                for variant in self.variants(self.infos[index]):
                    FunctionLowering(variant, self).lower()
        self.lower_start(main)
        return self.module

    def lower_start(self, main):
        rt = self.rt
        fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, PTR]), "bril_start")
        argc, argv = fn.args
        bld = ir.IRBuilder(fn.append_basic_block("entry"))
        bld.call(rt.fn("brt_check_arity"), [const_int(len(main.params)), argc])
        values = []
        for i, name in enumerate(main.params):
            key = main.declared[name]
            text = bld.load(bld.gep(argv, [const_int(i)], source_etype=PTR), typ=PTR)
            if kind(key) in ("ptr", "any"):
                raise Unsupported(f"a {type_text(key)} parameter of @main", main.name)
            v = bld.call(rt.fn(f"brt_arg_{key}"), [text])
            v = bld.trunc(v, I1) if key == "bool" else v
            values.append(tag_value(bld, v, key) if main.var_types[name] == "any" else v)
        bld.call(main.llvm, values)
        bld.ret_void()
        counts = ir.GlobalVariable(self.module, I8, "bril_counts")
        counts.global_constant = True
        counts.initializer = ir.Constant(I8, int(self.count))


def lower_linked(linked, *, count=True, profile=None):
    """An ir.Module for a linked program (`bril.ir.linker.LinkedProgram`).

    profile: {function name: {`any` parameter: Bril type}}, the types a run saw its
    calls pass (`bril.interpreter.type_profile.read`): each such function gets a
    variant for them beside its generic code.  Should a variant be beyond the
    lowering (`Unsupported`), the program is lowered without any."""
    if profile:
        try:
            return ProgramLowering(linked, count=count,
                                   assumptions=assumptions_of(profile)).lower()
        except Unsupported:
            pass
    return ProgramLowering(linked, count=count).lower()


def assumptions_of(profile):
    """`ProgramLowering`'s assumptions from a type profile (`type_profile.read`):
    {function name: ([{parameter: type key}, ...], {parameter: int or bool},
    {loop header label: [{variable: type key}, ...]})}."""
    def keys(sets):
        return [{v: key for v, typ in kinds.items() if (key := type_key(typ)) is not None}
                for kinds in sets]
    return {name: (keys(kinds), values, {label: keys(sets) for label, sets in loops.items()})
            for name, (kinds, values, loops) in profile.items()}


def lower_program(prog, *, base_dir=None, lib_dirs=(), filename=None, count=True,
                  profile=None):
    """An ir.Module for a Bril program (JSON dict); imports are linked as `brili` does.

    count: keep the dynamic instruction count (`total_dyn_inst` with `-p`);
    profile: see `lower_linked`."""
    linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
    return lower_linked(linked, count=count, profile=profile)
