"""Resume data: how a frame's variables cross between the interpreter and native code.

The JIT hands a loop's variables to native code in an array of 64-bit slots
and takes them back at a region's exit: exactly the interpreter's state at the
block where it goes on (LuaJIT's snapshots and PyPy's resume data play this
part).  One module writes and reads that layout, on both sides:

- `Slots`: the variables of a region, their types, and where each lives:
  three slots a variable -- a definedness flag (0/1; 2: ssa2's undefined
  value, for variables that may hold it), its value (int as is,
  bool 0/1, float bit-cast, char its code point, a pointer's region id) and a
  pointer's offset -- then, after them, the block to start at.  A variable native
  code holds as an `any` value has its tag in the first slot instead of the flag
  (0: unset; tags are never 0);
- `marshal_source`: the Python side, `_in(locals, S, D)` (frame -> slots; False
  if a value is not of its declared kind) and `_out(S, D)` (slots -> the locals
  native code assigned);
- the native side, the same layout as LLVM IR, is `bril.backend.llvm_lower`'s
  (`decode_slot`, `decode_tagged`, `encode_slot`): this module needs no llvmlite.
Functions called natively whole take their arguments in the same encoding,
three slots a value (an `any` value's tag, value, pointer offset), and return
their result in slots 0-2.
"""

from .pynames import shadow_name, var_name
from ..ir.values import UNDEF

# --- `any` values: a tag saying a value's type, beside its encoding ------------------------
#
# Native code holds a value of the dynamic extension's type `any` as {tag, value, pointer
# offset}: the value and offset encoded as in a slot (below), the tag its type: a scalar's
# code, or a pointer's, its element's code plus 8 per `ptr<...>` (ptr<any> is 13), so
# every module and the interpreter's side agree without a table.  0 is no value.

TAG_BASES = {"int": 1, "bool": 2, "float": 3, "char": 4, "any": 5}
TAG_PTR_STEP = 8
# ssa2's undefined value, which a ptr<any> cell can hold (the interpreter stores it).
TAG_UNDEF = 6
# In a ptr<any> cell a pointer's region id sits above its tag (`put_cell`): tags
# stay below 2^16 (a pointer type nested fewer than 8,191 deep).
CELL_RID_SHIFT = 16

# brilrt's region table (brilrt.c `brt_region`, keep in step): an entry is
# {data, length, REGION_INLINE_BYTES bytes where a small region's cells live},
# REGION_ENTRY_BYTES in all; brt_alloc's cell size with NO_FLAGS_BIT: cells
# without "initialised" flags (ptr<any>: a cell's tag word is its flag).
REGION_ENTRY_BYTES = 64
REGION_INLINE_BYTES = 48
NO_FLAGS_BIT = 0x100


def value_tag(key):
    """The tag of a value of type key ('int', ('ptr', key)...; not 'any' itself)."""
    depth = 0
    while not isinstance(key, str):
        key = key[1]
        depth += 1
    return TAG_BASES[key] + TAG_PTR_STEP * depth


def tag_type(tag):
    """The type key a tag stands for (value_tag's inverse)."""
    depth, base = divmod(tag, TAG_PTR_STEP)
    key = next(k for k, b in TAG_BASES.items() if b == base)
    for _ in range(depth):
        key = ("ptr", key)
    return key


_PY_TAGS = {int: 1, bool: 2, float: 3, str: 4}


def python_tag(v):
    """The tag of an interpreter value (a pointer's from its region's element type)."""
    tag = _PY_TAGS.get(type(v))
    if tag is not None:
        return tag
    if type(v) is tuple:
        elem, depth = v[2].elem, 1
        while isinstance(elem, dict):
            elem, depth = elem["ptr"], depth + 1
        return TAG_BASES[elem] + TAG_PTR_STEP * depth
    return TAG_UNDEF


def put_tagged(v, S, D, i, to_pair):
    """Store interpreter value v as an `any` value at S[i] (tag), S[i + 1] (value),
    S[i + 2] (pointer offset); D is S's memory as doubles."""
    tag = S[i] = python_tag(v)
    if tag > TAG_PTR_STEP:
        S[i + 1], S[i + 2] = to_pair(v)
    else:
        _put_value(v, tag, S, D, i + 1)


def get_tagged(S, D, i, from_pair, undef):
    """The interpreter value of the `any` value at S[i..i + 2] (put_tagged's inverse;
    tag 0, a function's result that is no value: None)."""
    tag = S[i]
    if tag == 0:
        return None
    if tag > TAG_PTR_STEP:
        return from_pair(S[i + 1], S[i + 2], json_type(tag_type(tag)[1]))
    return _get_value(tag, S, D, i + 1, undef)


def put_cell(v, S, D, i, to_pair):
    """Store interpreter value v in the ptr<any> cell at S[i], S[i + 1]: {tag, value},
    or for a pointer {tag | region id << CELL_RID_SHIFT, offset} (as native code's
    `Lowering.pack_cell`); D is S's memory as doubles."""
    tag = python_tag(v)
    if tag > TAG_PTR_STEP:
        rid, S[i + 1] = to_pair(v)
        S[i] = tag | rid << CELL_RID_SHIFT
    else:
        S[i] = tag
        _put_value(v, tag, S, D, i + 1)


def get_cell(S, D, i, from_pair, undef):
    """The interpreter value in the ptr<any> cell at S[i], S[i + 1] (put_cell's inverse)."""
    head = S[i]
    tag = head & ((1 << CELL_RID_SHIFT) - 1)
    if tag > TAG_PTR_STEP:
        return from_pair(head >> CELL_RID_SHIFT, S[i + 1], json_type(tag_type(tag)[1]))
    return _get_value(tag, S, D, i + 1, undef)


def _put_value(v, tag, S, D, j):
    """The value word S[j] of a value (not a pointer) with this tag."""
    if tag == 3:
        D[j] = v
    elif tag == 4:
        S[j] = ord(v)
    elif tag != TAG_UNDEF:
        S[j] = v


def _get_value(tag, S, D, j, undef):
    """The value (not a pointer) whose tag is `tag` and value word S[j]."""
    if tag == 1:
        return S[j]
    if tag == 2:
        return S[j] != 0
    if tag == 3:
        return D[j]
    if tag == 4:
        return chr(S[j])
    return undef        # (TAG_UNDEF: ssa2's undefined value)


class Slots:
    """Where each variable lives in the slot array, and what the region assigns.
    A name is a variable's, or ("shadow", s) for an ssa2 shadow variable."""

    def __init__(self, names, types, written, function_name, undef=()):
        self.names = names              # variables, in slot order
        self.types = types              # name -> type key (bril.backend.llvm_lower.type_key)
        self.written = written          # names the region may assign (written back)
        self.function_name = function_name
        self.undef = set(undef)         # names that may hold ssa2's undefined value
        self.size = 3 * len(names)

    def index(self, name):
        return 3 * self.names.index(name)

    def as_data(self):
        return (list(self.names), dict(self.types), sorted(self.written, key=str),
                self.function_name, sorted(self.undef, key=str))

    @classmethod
    def from_data(cls, data):
        names, types, written, function_name, undef = data
        return cls(list(names), dict(types), set(written), function_name, undef)


def local_name(name):
    """The generated code's local for a variable or ("shadow", s)."""
    return var_name(name) if isinstance(name, str) else shadow_name(name[1])


def json_type(key):
    """A type key ('int', ('ptr', key)...) as a Bril JSON type."""
    return key if isinstance(key, str) else {"ptr": json_type(key[1])}


def marshal_source(slots, heap_names):
    """Python source of `_in(L, S, D)` (frame locals -> slots; False if a value does
    not have its declared kind) and `_out(S, D)` (slots -> {local: value}).
    Pointer element types it needs are named in heap_names (repr -> global name)."""
    lines = ["def _in(L, S, D):"]
    for n in slots.names:
        key = slots.types[n]
        i = slots.index(n)
        py = local_name(n)
        lines.append(f"    v = L.get({py!r}, _M)")
        lines.append("    if v is _M:")
        lines.append(f"        S[{i}] = 0")
        if n in slots.undef:
            lines.append("    elif v is _U:")
            lines.append(f"        S[{i}] = 2")
        lines.append("    else:")
        if key == "any":
            lines.append(f"        _put(v, S, D, {i}, _to_pair)")
            continue
        test, store = {
            "int": ("int", f"S[{i + 1}] = v"),
            "bool": ("bool", f"S[{i + 1}] = v"),
            "float": ("float", f"D[{i + 1}] = v"),
            "char": ("str", f"S[{i + 1}] = ord(v)"),
        }.get(key, ("tuple", f"S[{i + 1}], S[{i + 2}] = _to_pair(v)"))
        lines.append(f"        if type(v) is not {test}: return False")
        lines.append(f"        S[{i}] = 1; {store}")
    lines.append("    return True")
    lines.append("def _out(S, D):")
    lines.append("    r = {}")
    for n in slots.names:
        if n not in slots.written:
            continue
        key = slots.types[n]
        i = slots.index(n)
        py = local_name(n)
        if key == "any":
            lines.append(f"    if S[{i}]: r[{py!r}] = _get(S, D, {i}, _from_pair, _U)")
            continue
        value = {
            "int": f"S[{i + 1}]",
            "bool": f"S[{i + 1}] != 0",
            "float": f"D[{i + 1}]",
            "char": f"chr(S[{i + 1}])",
        }.get(key)
        if value is None:
            elem = heap_names.setdefault(repr(key[1]), f"_T{len(heap_names)}")
            value = f"_from_pair(S[{i + 1}], S[{i + 2}], {elem})"
        if n in slots.undef:
            lines.append(f"    if S[{i}] == 2: r[{py!r}] = _U")
            lines.append(f"    elif S[{i}]: r[{py!r}] = {value}")
        else:
            lines.append(f"    if S[{i}]: r[{py!r}] = {value}")
    lines.append("    return r")
    return "\n".join(lines) + "\n"


def needs_heap(key, allocates):
    """Whether values of type key may be pointers (native code then needs the shared
    heap): pointer types, and `any` in a program that allocates (`allocates`: no
    pointer exists before an `alloc`)."""
    return (key == "any" and allocates) or not isinstance(key, str)


# --- whole functions called natively (three slots a value) -----------------------------

_PY_TYPE = {"int": int, "bool": bool, "float": float, "char": str, "ptr": tuple}


def encode_arguments(types, args, S, D, to_pair):
    """Put a call's arguments into the slots (S: as ints, D: the same memory as
    doubles); False if a value is not of its parameter's type."""
    for i, (key, v) in enumerate(zip(types, args)):
        j = 3 * i + 1
        if key == "any":
            put_tagged(v, S, D, j - 1, to_pair)
            continue
        if type(v) is not _PY_TYPE[key if isinstance(key, str) else "ptr"]:
            return False
        if key == "float":
            D[j] = v
        elif key == "char":
            S[j] = ord(v)
        elif isinstance(key, str):
            S[j] = v
        else:
            S[j], S[j + 1] = to_pair(v)
    return True


def decode_result(key, S, D, from_pair):
    """A call's result from slots 0-2 (None for a function without one)."""
    if key is None:
        return None
    if key == "any":
        return get_tagged(S, D, 0, from_pair, UNDEF)
    if key == "int":
        return S[1]
    if key == "bool":
        return S[1] != 0
    if key == "float":
        return D[1]
    if key == "char":
        return chr(S[1])
    return from_pair(S[1], S[2], json_type(key[1]))
