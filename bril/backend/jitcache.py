"""What `brili --jit` keeps across runs: compiled units, in the code cache.

A *unit* is one piece of native code: a loop region of a function, or a
function compiled whole (for native calls), with every function it calls
compiled into it, so that it stands alone.  It is kept as a shared object
(loaded with `bril.native_runtime.ffi`: no llvmlite, no LLVM at all on a hit) plus what the
interpreter needs to use it without lowering it again: its symbol, the slot
layout of the variables it reads and writes, the layout ids of the blocks it
can leave to.  Its key hashes what the machine code is made from:
`bril.native_runtime.nativert.native_digest` (our lowering and run-time sources, llvmlite's
version, the optimisation level, the C compiler, this machine) and the Bril
of the function and of every function it calls, with how their calls
resolve, and the region's blocks.  Editing a function re-keys the units that
compiled it in, and no other.

A *profile* (`bril.backend.jitprofile`) says which of them a program used.
"""

import marshal

from ..native_runtime import resume
from ..cache.codecache import hasher
from .jitprofile import FORMAT

# QUICK units.  What a run asks its compile server for while it goes on is built
# twice: first quick -- LLVM's light pipeline, then its code generator as at -O2:
# a third to a half of -O2's time (mat-mul compiled whole: 46 ms against 137),
# code within 2x of -O2's (which may fold a loop away) -- under a key of its own
# (`unit_key`), then, once the server has nothing else to do, at the full level.
# The run swaps the full build in when it lands (`bril.backend.jit.Jit._upgrade`),
# a quick region leaving at its next back edge for it
# (`bril.backend.jit_lower.RegionLowering.tier_check`); a later run takes the full
# build, else the quick one.


def region_kinds(kinds, entries):
    """The kinds a region entered at `entries` assumes, in one form (the key's, the
    profile's): ((header, ((variable, kind), ...)), ...) of the headers among
    `entries` that `kinds` ({header: {variable: kind}}, or that form read back from
    JSON) gives kinds for; None if none."""
    if not kinds:
        return None
    items = kinds.items() if isinstance(kinds, dict) else kinds
    entries = set(entries or ())
    out = tuple(sorted((int(h), tuple(sorted((str(v), str(k)) for v, k in
                                             (vs.items() if isinstance(vs, dict) else vs))))
                       for h, vs in items if int(h) in entries and vs))
    return out or None


def kinds_data(kinds):
    """`region_kinds`'s form as a profile keeps it (lists)."""
    return [[h, [list(p) for p in vs]] for h, vs in kinds]


def unit_key(linked, kind, index, blocks, entries, level, constants=None, kinds=None,
             quick=False):
    """The key of a unit: `kind` 'region' (blocks, entries: block indices) or 'call';
    `constants`: the variables its code takes as constants (a region of @main:
    `bril.analysis.invariants.main_constants`), which a unit of other values is not;
    `kinds`: the kinds its `any` variables are assumed to hold at its loop headers
    (`region_kinds`); `quick`: the unit's quick build (see `QUICK`)."""
    from ..native_runtime.nativert import native_digest
    h = hasher(FORMAT + native_digest(level) + (b"quick" if quick else b""))
    h.update(repr((kind, index, sorted(blocks or ()), sorted(entries or ()))).encode())
    if constants:
        h.update(repr(sorted(constants.items())).encode())
    if kinds:
        h.update(repr(("kinds", kinds)).encode())
    # The function and everything it calls, transitively (compiled into the unit).
    from ..cache.codekeys import call_graph_digest
    h.update(call_graph_digest(linked, index, inlined_only=False))
    return h.hexdigest()


class RunKeys:
    """The unit keys and constants of one run's units, the same in the run and in its
    compile server: a region of @main reads the @main arguments its loops compute
    with as constants (`bril.analysis.invariants.main_constants`: fixed for the run,
    and no function calls @main), named in its key; any other unit takes none."""

    def __init__(self, linked, level, main_args):
        self.linked, self.level, self.main_args = linked, level, main_args
        self._main_constants = None

    def constants(self, index):
        """{variable: int} a region of function `index` reads as constants."""
        if index != self.linked.main_index():
            return {}
        if self._main_constants is None:
            from ..analysis.invariants import main_constants
            self._main_constants = main_constants(self.linked, self.main_args)
        return self._main_constants

    def key(self, kind, index, blocks, entries, kinds=None, quick=False):
        """The key of a unit: `kind` 'region' (blocks, entries; `kinds`: see
        `region_kinds`) or 'call'; `quick`: its quick build."""
        return unit_key(self.linked, kind, index, blocks, entries, self.level,
                        self.constants(index) if kind == "region" else None,
                        region_kinds(kinds, entries) if kind == "region" else None, quick)


def tried_here(profile, level):
    """What the compile server (`bril.backend.jit_server`) has tried to build for this
    profile with today's compiler (`native_digest`: after an upgrade, whose
    units the cache no longer finds, everything is tried again)."""
    from ..native_runtime.nativert import native_digest
    if profile.get("tried_for") != native_digest(level).hex():
        return []
    return profile.get("tried", [])


def mark_tried(profile, what, level):
    """Note in the profile that building `what` failed with today's compiler."""
    from ..native_runtime.nativert import native_digest
    profile["tried"] = tried_here(profile, level) + [what]
    profile["tried_for"] = native_digest(level).hex()


class LoadedUnit:
    """A unit in this process: the address of its entry function and its data."""

    def __init__(self, address, meta, lib=None):
        self.address = address
        self.meta = meta
        self.lib = lib              # the shared object (kept loaded)


def load_unit(cache, key):
    """The unit stored under key, loaded without LLVM; None if it is not there."""
    data = cache.get("unitdata", key)
    path = cache.entry_path("unit", key) if data is not None else None
    if path is None:
        return None
    try:
        meta = marshal.loads(data)
        from ..native_runtime.nativert import load_unit as dlopen, symbol_address
        lib = dlopen(path)
        return LoadedUnit(symbol_address(lib, meta["symbol"]), meta, lib)
    except Exception:           # (a cache failure is a miss, never an error)
        return None


def region_marshal_code(cache, slots, index, header):
    """(code object, {type repr: global name}) of the functions moving a region's
    variables between a frame and its slot array (`resume.marshal_source`), the code
    kept in the code cache by the source's hash: a large region's take tens of ms to
    compile, more than loading its native unit.  A run entering the region defines
    them; the compile server that built its unit makes them too, so that the next
    run finds them (`index`, `header`: the region's function and loop header, its
    code's file name)."""
    from ..cache.codecache import compiled_code
    heap_names = {}
    src = resume.marshal_source(slots, heap_names)
    return (compiled_code(cache, "marshal", src, f"<jit region {index} {header}>"),
            heap_names)


def stored_meta(cache, key):
    """The data of the unit stored under key if the cache has it whole, else None
    (without loading it)."""
    data = cache.get_marshalled("unitdata", key)
    if isinstance(data, dict) and cache.entry_path("unit", key) is not None:
        return data
    return None


def store_unit(cache, key, shared_object, meta):
    """Keep a built unit; returns it loaded from the cache, or None if it could not
    be stored there (the caller then uses its own copy)."""
    if not cache.put_marshalled("unitdata", key, meta):
        return None
    if not cache.put("unit", key, shared_object):
        return None
    return load_unit(cache, key)


# --- making units (the running JIT, and the compile server) ------------------------------

class NeedsHeap(Exception):
    """The unit touches memory, and the interpreter's heap is not the shared one."""


def lower_region_unit(linked, index, shape, blocks, entries, name, prefix="u", shared=(),
                      heap=True, constants=None, kinds=None, quick=False):
    """(module, meta, defined, used, slots) of a loop region of function `index`, whose
    blocks and loops `shape` holds (its `bril.analysis.layout.FunctionShape`, or the
    FunctionCode built on it: lowering analyses the function itself): the lowered
    module and what using it needs (see the module docstring).
    `constants`: {variable: int} the region reads as those values; `kinds`: the
    kinds its `any` variables hold at its headers (see `unit_key`); `quick`: its
    quick build (`QUICK`)."""
    from .jit_lower import lower_region
    module, slots, defined, used, assumed = lower_region(
        linked, index, blocks, sorted(entries), name, prefix=prefix,
        compiled_functions=shared, parents=loop_parents(shape, blocks), constants=constants,
        kinds=region_kinds(kinds, entries), quick=quick)
    allocates = linked.allocates()
    needs_heap = any(resume.needs_heap(t, allocates) for t in slots.types.values())
    if needs_heap and not heap:
        raise NeedsHeap()
    lids = {bi: b.lid for bi, b in enumerate(shape.blocks_by_index) if b.lid is not None}
    meta = {"symbol": name, "heap": needs_heap, "slots": slots.as_data(), "lids": lids,
            "instrs": sum(shape.blocks_by_index[bi].size for bi in blocks),
            # (the kinds its entries must find: `bril.backend.jit.Jit.enter` tests them)
            "assumed": {h: dict(vs) for h, vs in assumed.items()}}
    return module, meta, defined, used, slots


def loop_parents(shape, blocks):
    """{header of a loop of `shape` (a function's FunctionShape or FunctionCode) in
    `blocks`: the innermost loop header around it that is in `blocks` too, or None}."""
    out = {}
    for loop in shape.loops:
        if loop.header in blocks:
            p = loop.parent
            while p is not None and p.header not in blocks:
                p = p.parent
            out[loop.header] = None if p is None else p.header
    return out


def lower_call_unit(linked, index, name, prefix="u", shared=(), heap=True):
    """(module, meta, defined, used) of function `index` compiled whole, for calls."""
    from .jit_lower import lower_call
    module, types, result, defined, used = lower_call(linked, index, name, prefix=prefix,
                                                      compiled_functions=shared)
    allocates = linked.allocates()
    needs_heap = any(resume.needs_heap(t, allocates) for t in types + [result] if t is not None)
    if needs_heap and not heap:
        raise NeedsHeap()
    meta = {"symbol": name, "types": types, "result": result, "heap": needs_heap}
    return module, meta, defined, used


def keep_unit(cache, key, module, meta, level, quick=False):
    """Compile a lowered unit to a shared object into the cache (not loaded here:
    the compile server's; `quick`: its quick build, see `QUICK`); False if it could
    not be kept."""
    from .native import build_shared_object
    so = build_shared_object(module, level, quick=quick)
    return cache.put("unit", key, so) and cache.put_marshalled("unitdata", key, meta)


def build_unit(cache, key, module, meta, level):
    """Compile a lowered unit to a shared object and keep it; the unit, loaded (or None
    if it could not be kept)."""
    from .native import build_shared_object
    return store_unit(cache, key, build_shared_object(module, level), meta)
