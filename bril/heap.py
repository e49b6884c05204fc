"""The Bril heap (memory extension), behind a small interface.

Representation: every `alloc` makes one region, a Python list of values with
None for "never stored".  A pointer is the tuple `(data, offset, region)`:
`data` is the region's list (shared by all pointers into the region), `offset`
an exact int (any value; checked when used), `region` the `Region` record
(its base number for messages, its element type for `store` checks).  Freeing
empties the list, so a later access through any pointer to it fails the same
bounds check as an out-of-range offset; the reference reports both with the
same message.

The generated code reads and writes memory with the templates below
(`load_lines`, `store_lines`, `ptradd_expr`); nothing else in the engine knows
the representation, so it can change (for a native engine: typed buffers per
region plus an "initialised" bitmap, a pointer as region index + offset) by
changing this module only.
"""

from .errors import BrilError
from .values import js_type_text

# Bit masks of value kinds a region accepts in `store` (the reference's typeCheck
# against the region's element type; pointer element types are not compared).
KIND_BITS = {"int": 1, "bool": 2, "float": 4, "char": 8, "ptr": 16, "undef": 32}
_ANY_BITS = 63

# Regions larger than JavaScript arrays allow are refused ("cannot allocate N entries";
# the reference crashes there).  Regions are filled lazily, so size costs nothing.
MAX_REGION = (1 << 32) - 1


def kind_bits(typ):
    """The value kinds that `typeCheck(value, typ)` accepts."""
    if typ == "any":
        return _ANY_BITS
    if isinstance(typ, dict) and "ptr" in typ:
        return KIND_BITS["ptr"]
    return KIND_BITS.get(typ, 0) if isinstance(typ, str) else 0


class Region:
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
        self.live = {}          # base -> Region, for the allocated regions
        self.next_base = 0

    def alloc(self, amount, elem):
        if amount <= 0:
            raise BrilError(f"must allocate a positive amount of memory: {amount} <= 0")
        if amount > MAX_REGION:
            raise BrilError(f"cannot allocate {amount} entries")
        base = self.next_base
        self.next_base = base + 1
        region = Region(base, elem, amount)
        self.live[base] = region
        return ([], 0, region)

    def free(self, ptr):
        data, offset, region = ptr
        if offset == 0 and region.live:
            region.live = False
            del self.live[region.base]
            data.clear()
            return
        raise BrilError(f"Tried to free illegal memory location base: {region.base}, "
                        f"offset: {offset}. Offset must be 0.")

    def leaked(self):
        return bool(self.live)


# --- slow paths and errors of the generated code ---------------------------------------

def bad_access(ptr):
    """Out of bounds, or the region was freed."""
    raise BrilError(f"Uninitialized heap location {ptr[2].base} and/or illegal offset {ptr[1]}")


def uninitialized(name):
    raise BrilError(f"Pointer {name} points to uninitialized data")


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


def bad_store(region, value, op="store"):
    raise BrilError(f"{op} argument 1 must be a {js_type_text(region.elem)}")


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
        return (f"if not _hr.accepts & _KIND_BITS[_kind({value})]: "
                f"_hbadstore(_hr, {value})")
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
