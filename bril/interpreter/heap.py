"""The Bril heap (memory extension), behind a small interface.

Representation: every `alloc` makes one region, a Python list of values with
None for "never stored".  A pointer is the tuple `(data, offset, region)`:
`data` is the region's list (shared by all pointers into the region), `offset`
an exact int (any value; checked when used), `region` the `HeapRegion` record
(its base number for messages, its element type for `store` checks).  Freeing
empties the list, so a later access through any pointer to it fails the same
bounds check as an out-of-range offset; the reference reports both with the
same message.

The generated code reads and writes memory with the templates below
(`load_lines`, `store_lines`, `ptradd_expr`); nothing else in the engine knows
the representation, so it can change (for a native engine: typed buffers per
region plus an "initialised" bitmap, a pointer as region index + offset) by
changing this module only.

The native heap (`NativeHeap`, `native_*_lines`, below; `compile_program(...,
native_heap=True)`) is that other representation: regions in brilrt's table,
memoryviews over their cells, shared with code compiled by the JIT.
"""

from ..ir import messages as M
from ..ir.errors import BrilError
from ..ir.ops import INT_MAX, INT_MIN, wrap64
from ..ir.values import UNDEF, js_type_text

# Bit masks of value kinds a region accepts in `store` (the reference's typeCheck
# against the region's element type; pointer element types are not compared).
KIND_BITS = {"int": 1, "bool": 2, "float": 4, "char": 8, "ptr": 16, "undef": 32}
_ANY_BITS = 63

# Regions larger than JavaScript arrays allow are refused ("cannot allocate N entries";
# the reference crashes there).  Regions are filled lazily, so size costs nothing.
MAX_REGION = (1 << 32) - 1
# Regions of at most this many cells are allocated whole (see `Heap.alloc`).
SMALL_REGION = 64


def kind_bits(typ):
    """The value kinds that `typeCheck(value, typ)` accepts."""
    if typ == "any":
        return _ANY_BITS
    if isinstance(typ, dict) and "ptr" in typ:
        return KIND_BITS["ptr"]
    return KIND_BITS.get(typ, 0) if isinstance(typ, str) else 0


class HeapRegion:
    __slots__ = ("base", "elem", "accepts", "size", "live")

    def __init__(self, base, elem, size):
        self.base = base
        self.elem = elem                # the element type (JSON form)
        self.accepts = kind_bits(elem)  # kinds `store` accepts
        self.size = size
        self.live = True


class Heap:
    """Regions start as empty lists and grow (geometrically) when stored to, so a
    large allocation that is barely used costs little, as in the reference."""

    def __init__(self):
        self.live = {}          # base -> HeapRegion, for the allocated regions
        self.next_base = 0

    def alloc(self, amount, elem):
        if amount <= 0:
            raise BrilError(M.text(M.ALLOC_NOT_POSITIVE, amount=amount))
        if amount > MAX_REGION:
            raise BrilError(M.text(M.ALLOC_TOO_LARGE, amount=amount))
        base = self.next_base
        self.next_base = base + 1
        region = HeapRegion(base, elem, amount)
        self.live[base] = region
        # A small region gets its cells at once (a store then never takes the slow
        # path that grows the list); a big one grows as it is stored to.
        return ([None] * amount if amount <= SMALL_REGION else [], 0, region)

    def free(self, ptr):
        data, offset, region = ptr
        if offset == 0 and region.live:
            region.live = False
            del self.live[region.base]
            data.clear()
            return
        raise BrilError(M.text(M.BAD_FREE, base=region.base, offset=offset))

    def leaked(self):
        return bool(self.live)


# --- slow paths and errors of the generated code ---------------------------------------

def bad_access(ptr):
    """Out of bounds, or the region was freed."""
    raise BrilError(M.text(M.BAD_ACCESS, base=ptr[2].base, offset=ptr[1]))


def uninitialized(name):
    raise BrilError(M.text(M.UNINITIALIZED, name=name))


def load_miss(ptr, name):
    """A load past the end of the region's list: never stored, or a bad access."""
    data, offset, region = ptr
    if region.live and 0 <= offset < region.size:
        uninitialized(name)
    bad_access(ptr)


def store_grow(ptr, value):
    """A store past the end of the region's list: grow it, or a bad access."""
    data, offset, region = ptr
    if not (region.live and 0 <= offset < region.size):
        bad_access(ptr)
    new_len = min(region.size, max(offset + 1, 2 * len(data), 16))
    data.extend([None] * (new_len - len(data)))
    data[offset] = value


def bad_store(region, value):
    raise BrilError(M.text(M.STORE_KIND, type=js_type_text(region.elem)))


# Names the templates use; the engine puts them in the generated code's globals.
HELPERS = {
    "_hbad": bad_access,
    "_huninit": uninitialized,
    "_hmiss": load_miss,
    "_hgrow": store_grow,
    "_hbadstore": bad_store,
    "_KIND_BITS": KIND_BITS,
}


# --- templates for generated code ---------------------------------------------------
#
# Each returns Python source lines (no indentation).  `ptr` is a plain local name.
# `unpack_line` loads a pointer into the temporaries _hd (data), _ho (offset), _hr
# (region); the other templates assume the temporaries hold `ptr` (the code
# generator skips the unpacking when they already do).

def unpack_line(ptr):
    return f"_hd, _ho, _hr = {ptr}"


def load_lines(dest, ptr, ptr_name):
    """dest = load ptr; errors: bad access, uninitialised data."""
    return [
        f"if _ho < 0: _hbad({ptr})",
        "try:",
        f"    {dest} = _hd[_ho]",
        "except IndexError:",
        f"    _hmiss({ptr}, {ptr_name!r})",
        f"if {dest} is None: _huninit({ptr_name!r})",
    ]


def store_check_line(value, value_kind):
    """The region element-type check of `store` (None if not needed).

    value_kind: the value's kind if statically known, None if not."""
    if value_kind is None:
        # (a region of `any` takes every value: no look-up of the value's kind)
        return (f"if _hr.accepts != {_ANY_BITS} and "
                f"not _hr.accepts & _KIND_BITS[_kind({value})]: _hbadstore(_hr, {value})")
    return f"if not _hr.accepts & {KIND_BITS[value_kind]}: _hbadstore(_hr, {value})"


def store_lines(ptr, value):
    return [
        f"if _ho < 0: _hbad({ptr})",
        "try:",
        f"    _hd[_ho] = {value}",
        "except IndexError:",
        f"    _hgrow({ptr}, {value})",
    ]


def ptradd_lines(dest, offset):
    """dest = ptradd ptr offset; afterwards the temporaries hold dest."""
    return [f"_ho = _ho + {offset}", f"{dest} = (_hd, _ho, _hr)"]


def region_kind_mismatch(ptr, kind):
    """An expression true unless ptr's region holds elements of exactly this kind."""
    return f"{ptr}[2].accepts != {KIND_BITS[kind]}"


# --- the native heap: regions in brilrt's table, shared with native code ---------------
#
# `NativeHeap(rt)` (rt: `bril.native_runtime.nativert.runtime_library()`) keeps every region in
# brilrt's region table (`brt_regions`), so that code compiled by the JIT and
# the interpreter see the same memory, with the same region ids and messages.
# A pointer is still the tuple `(data, offset, region)`: `data` is a memoryview
# of the region's cells in the element's natural format ('q' int, 'd' float,
# '?' bool, 'i' char as a code point, 'q' pairs {region id, offset} for a
# pointer), `region` a `NativeRegion` whose `flags` is a view of the region's
# "initialised" bytes (set by a store of zero: a scalar cell that reads other than
# zero was stored to).  Freeing a region releases both views, so a later access
# through any pointer into it raises ValueError (the templates' slow path turns
# that into the bounds error); memory freed by native code is noticed by
# `sync()`, which the JIT calls after every native call.  A region of `any` cells
# (the dynamic extension's ptr<any>) holds a tagged value in two words a cell, as
# native code does (`bril.native_runtime.resume.put_cell`), and its tag word, 0 until
# stored to, is its "initialised" flag; the templates' fast paths fail on it (its
# `data` and `flags` are None) and take the slow path, which reads the tag.

# element kind -> (memoryview format of the cells, cell size in bytes)
NATIVE_FORMATS = {"int": ("q", 8), "float": ("d", 8), "bool": ("?", 1), "char": ("i", 4),
                  "ptr": ("q", 16)}
_PyBUF_WRITE = 0x200

# Set by _native_setup() (when a NativeHeap is made, to keep brili's start-up
# fast): the C types (`bril.native_runtime.ffi`), PyMemoryView_FromMemory, the view a freed
# region's views are replaced by (released: every access fails), and native code's
# cell layout (`bril.native_runtime.resume`).
_ffi = _memory = _DEAD = None
get_cell = put_cell = NO_FLAGS_BIT = REGION_ENTRY_BYTES = None


def _native_setup():
    global _ffi, _memory, _DEAD, get_cell, put_cell, NO_FLAGS_BIT, REGION_ENTRY_BYTES
    if _ffi is None:
        from ..native_runtime import ffi
        from ..native_runtime.resume import (get_cell, put_cell, NO_FLAGS_BIT,
                                             REGION_ENTRY_BYTES)
        memory = ffi.function(ffi.symbol(ffi.dlopen(None), "PyMemoryView_FromMemory"),
                              ffi.py_object, ffi.c_void_p, ffi.c_ssize_t, ffi.c_int,
                              python_api=True)
        dead = memoryview(b"")
        dead.release()
        _memory, _DEAD, _ffi = memory, dead, ffi


def elem_kind(elem):
    """'int' | 'bool' | 'float' | 'char' | 'ptr' for a concrete element type, else None."""
    if isinstance(elem, dict) and "ptr" in elem:
        return "ptr"
    return elem if isinstance(elem, str) and elem in NATIVE_FORMATS else None


class _ElemInfo:
    """What the native heap needs to know about an element type (cached per type object)."""
    __slots__ = ("elem", "kind", "fmt", "cell", "accepts", "inner")

    def __init__(self, elem):
        kind = "any" if elem == "any" else elem_kind(elem)
        if kind is None:
            raise BrilError(f"internal error: the native heap cannot hold {js_type_text(elem)}")
        self.elem = elem
        self.kind = kind
        self.fmt, self.cell = NATIVE_FORMATS[kind] if kind != "any" else ("q", 16)
        self.accepts = kind_bits(elem)
        self.inner = elem["ptr"] if kind == "ptr" else None  # a loaded pointer's element type


class NativeRegion:
    """A region of brilrt's table as Python sees it (`base` is its id)."""
    __slots__ = ("base", "elem", "accepts", "size", "live", "kind", "inner", "data", "flags",
                 "heap", "cells")

    def kill(self):
        """The region was freed: no access through any pointer reaches its memory."""
        if self.live:
            self.live = False
            for view in (self.data, self.flags) + (self.cells or ()):
                if view is not None:
                    view.release()


class NativeHeap:
    """The interface of `Heap` (alloc, free, leaked) over brilrt's region table, plus
    `sync()`, `from_pair(region id, offset, elem)` and `to_pair(ptr)` for the JIT.

    Creating one resets brilrt's heap (ids start at 0 again; a previous
    NativeHeap's regions are freed and its views released): one program at a
    time per process."""

    def __init__(self, rt):
        _native_setup()
        self.rt = rt
        lib = self.lib = rt.lib
        old = rt.heap_owner
        if old is not None:
            old.invalidate()
        lib.brt_heap_reset()
        rt.heap_owner = self
        self.regions = {}       # region id -> NativeRegion, for the live regions Python has seen
        self._infos = {}        # id(element type) -> _ElemInfo
        self._py_alloc = lib.brt_py_alloc
        self._py_free = lib.brt_py_free
        self._live = lib.brt_live_regions
        self._count = lib.brt_region_count
        self._id = _ffi.c_int64()
        self._id_ref = _ffi.byref(self._id)
        self._freed_len = rt.variable("brt_freed_len", _ffi.c_int64)
        self._freed = rt.variable("brt_freed", _ffi.c_void_p)
        self._table = rt.variable("brt_regions", _ffi.c_void_p)
        self._cell_sizes = rt.variable("brt_cell_sizes", _ffi.c_void_p)

    def _info(self, elem):
        info = self._infos.get(id(elem))
        if info is None or info.elem is not elem:
            if len(self._infos) > 1000:     # (callers passing fresh type objects)
                self._infos.clear()
            info = self._infos[id(elem)] = _ElemInfo(elem)
        return info

    def _make(self, rid, info, size, address):
        r = NativeRegion()
        r.heap = self
        r.base = rid
        r.elem = info.elem
        r.accepts = info.accepts
        r.kind = info.kind
        r.inner = info.inner
        r.size = size
        if address:
            r.live = True
            # (a ptr<any> region has no flag bytes: brilrt.c's BRT_NO_FLAGS)
            raw = _memory(address, size * (info.cell + (info.kind != "any")), _PyBUF_WRITE)
            split = size * info.cell
            r.data = raw[:split].cast(info.fmt)
            r.cells = None
            r.flags = raw[split:]
            if info.kind == "any":      # (int64 and double views of the same cells)
                r.cells = (r.data, raw[:split].cast("d"))
                # (a ptr<any> cell is its own flag, its tag word: None makes the
                # templates' fast paths fail over to the slow path, which knows it)
                r.data = r.flags = None
            self.regions[rid] = r
        else:                               # already freed
            r.live = False
            r.data = r.flags = _DEAD
            r.cells = None
        return r

    # --- the Heap interface (the generated code's _alloc and _free) ---------------------

    def alloc(self, amount, elem):
        if amount <= 0:
            raise BrilError(M.text(M.ALLOC_NOT_POSITIVE, amount=amount))
        if amount > MAX_REGION:
            raise BrilError(M.text(M.ALLOC_TOO_LARGE, amount=amount))
        info = self._info(elem)
        address = self._py_alloc(amount, info.cell | (NO_FLAGS_BIT if info.kind == "any" else 0),
                                 self._id_ref)
        if not address:
            raise BrilError(self.rt.error_message())
        region = self._make(self._id.value, info, amount, address)
        return (region.data, 0, region)

    def free(self, ptr):
        _, offset, region = ptr
        if offset == 0 and region.live:
            if self._py_free(region.base, 0) < 0:
                raise BrilError(self.rt.error_message())
            self.regions.pop(region.base, None)
            region.kill()
            return
        raise BrilError(M.text(M.BAD_FREE, base=region.base, offset=offset))

    def leaked(self):
        return self._live() != 0

    # --- sharing with native code -------------------------------------------------------

    def sync(self):
        """Drop the views of regions native code freed since the last sync (cheap if none)."""
        n = self._freed_len.value
        if n:
            ids = (_ffi.c_int64 * n).from_address(self._freed.value)
            regions = self.regions
            for rid in list(ids):
                r = regions.pop(rid, None)
                if r is not None:
                    r.kill()
            self._freed_len.value = 0

    def from_pair(self, rid, offset, elem):
        """The Python pointer to (region id, offset) of a region of `elem` (the pointer's
        element type, used if Python has not seen the region yet)."""
        region = self.regions.get(rid)
        if region is None:
            region = self._region(rid, elem)
        return (region.data, offset, region)

    @staticmethod
    def to_pair(ptr):
        """(region id, offset) of a Python pointer, as native code holds it."""
        off = ptr[1]
        if not INT_MIN <= off <= INT_MAX:
            off = wrap64(off)
        return ptr[2].base, off

    def _region(self, rid, elem):
        """The NativeRegion of id rid, made from brilrt's table entry."""
        if not 0 <= rid < self._count():
            raise BrilError(f"internal error: no heap region {rid}")
        entry = (_ffi.c_int64 * 2).from_address(self._table.value + REGION_ENTRY_BYTES * rid)
        address, size = entry[0], entry[1]
        info = self._info(elem)
        # brilrt keeps the cell size native code chose: a view of the wrong size
        # would reach outside the region's memory.
        if address and _ffi.c_uint8.from_address(self._cell_sizes.value + rid).value != info.cell:
            raise BrilError(f"internal error: heap region {rid} does not hold "
                            f"{js_type_text(elem)}")
        return self._make(rid, info, size, address)

    def invalidate(self):
        """Release every view (before brilrt's heap is reset or reused)."""
        for r in self.regions.values():
            r.kill()
        self.regions.clear()
        if self.rt.heap_owner is self:
            self.rt.heap_owner = None


# --- slow paths of the native-heap templates ----------------------------------------------

def _native_check(ptr, name):
    """Raise the error of a load through ptr, if it fails."""
    _, offset, region = ptr
    if not (region.live and 0 <= offset < region.size):
        bad_access(ptr)
    if region.cells is not None:
        stored = region.cells[0][2 * offset]    # (a ptr<any> cell's tag word: 0 until stored to)
    else:
        stored = region.flags[offset] or (region.kind != "ptr" and region.data[offset])
    if not stored:
        uninitialized(name)


def native_load(ptr, name):
    """load through ptr, any element kind (also the templates' slow path)."""
    _native_check(ptr, name)
    data, offset, region = ptr
    kind = region.kind
    if kind == "any":
        q, d = region.cells
        return get_cell(q, d, 2 * offset, region.heap.from_pair, UNDEF)
    if kind == "char":
        return chr(data[offset])
    if kind == "ptr":
        return region.heap.from_pair(data[2 * offset], data[2 * offset + 1], region.inner)
    return data[offset]


def native_store(ptr, value):
    """store value through ptr, any element kind (after the element check)."""
    data, offset, region = ptr
    if not (region.live and 0 <= offset < region.size):
        bad_access(ptr)
    kind = region.kind
    if kind == "any":
        q, d = region.cells
        put_cell(value, q, d, 2 * offset, NativeHeap.to_pair)
        return                      # (its tag word, never 0, says it is stored to)
    if kind == "char":
        data[offset] = ord(value)
    elif kind == "ptr":
        rid, off = NativeHeap.to_pair(value)
        data[2 * offset] = rid
        data[2 * offset + 1] = off
    else:
        data[offset] = value
    region.flags[offset] = 1


NATIVE_HELPERS = {
    "_hnload": native_load,
    "_hnstore": native_store,
}


# --- templates for generated code over the native heap ------------------------------------
#
# `native_unpack_line` loads a pointer into _hd (cells), _ho (offset) and _hr (region),
# whose flags (`_hr.flags`) only a zero cell's load and a zero's store read; `kind`
# is the element kind if known statically (from the op's type), else None: a
# helper call.  Every failure of the fast path (out of range, freed region:
# IndexError or ValueError of a memoryview) goes to the slow path, which raises the
# error.  Names: _hpair (NativeHeap.from_pair) and _hregs (its regions) are per
# program; the rest are NATIVE_HELPERS.

_NATIVE_FAIL = "except (IndexError, ValueError, TypeError, OverflowError):"


def native_unpack_line(ptr):
    return f"_hd, _ho, _hr = {ptr}"


def native_load_lines(dest, ptr, ptr_name, kind):
    if kind is None:
        return [f"{dest} = _hnload({ptr}, {ptr_name!r})"]
    if kind == "ptr":
        read = [f"    if not _hr.flags[_ho]: _huninit({ptr_name!r})",
                "    _hq = _ho + _ho",
                "    _hx = _hregs.get(_hd[_hq])",
                (f"    {dest} = (_hpair(_hd[_hq], _hd[_hq + 1], _hr.inner) if _hx is None "
                 f"else (_hx.data, _hd[_hq + 1], _hx))")]
    else:
        # A region's cells start zeroed, and a store of a scalar sets the cell's
        # flag unless it writes other than zero: a cell that reads other than zero
        # was stored to, and only a zero needs its flag (a memoryview read and a
        # write saved on most loads and stores; native code reads them alike,
        # `bril.backend.llvm_lower._lower_load`).
        # (into _hv first: `dest` may be the pointer's own variable, which the slow
        # path reads if chr() fails)
        read = ["    _hv = _hd[_ho]",
                f"    if not _hv and not _hr.flags[_ho]: _huninit({ptr_name!r})",
                f"    {dest} = chr(_hv)" if kind == "char" else f"    {dest} = _hv"]
    return [
        f"if _ho < 0: _hbad({ptr})",
        "try:",
        *read,
        _NATIVE_FAIL,
        f"    {dest} = _hnload({ptr}, {ptr_name!r})",
    ]


def native_store_lines(ptr, value, kind):
    if kind is None:
        return [f"_hnstore({ptr}, {value})"]
    if kind == "ptr":
        write = ["    _hq = _ho + _ho", f"    _hd[_hq] = {value}[2].base",
                 f"    _hd[_hq + 1] = {value}[1]", "    _hr.flags[_ho] = 1"]
    else:
        # (a scalar cell that reads other than zero was stored to: only a zero
        # needs its flag, see `native_load_lines`)
        write = [f"    _hv = ord({value})" if kind == "char" else f"    _hv = {value}",
                 "    _hd[_ho] = _hv",
                 "    if not _hv: _hr.flags[_ho] = 1"]
    return [
        f"if _ho < 0: _hbad({ptr})",
        "try:",
        *write,
        _NATIVE_FAIL,
        f"    _hnstore({ptr}, {value})",
    ]


def declared_kind(fc, name):
    """The element kind of variable `name`'s declared type in the function of `fc` (a
    `bril.interpreter.codegen.FunctionCode`) if it has exactly one, else None.  For a store's
    template only: a value of another kind makes the fast path fail over to the slow
    path (TypeError), never store wrongly."""
    table = getattr(fc, "_heap_declared_kinds", None)
    if table is None:
        kinds = {}
        for p in fc.func.get("args") or []:
            kinds.setdefault(p.get("name"), set()).add(elem_kind(p.get("type")))
        for instr in fc.func.get("instrs") or []:
            if isinstance(instr.get("dest"), str):
                kinds.setdefault(instr["dest"], set()).add(elem_kind(instr.get("type")))
        table = {n: next(iter(k)) for n, k in kinds.items() if len(k) == 1}
        fc._heap_declared_kinds = table
    return table.get(name)
