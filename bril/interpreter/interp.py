"""The Bril interpreter (public API): link, compile to Python, run.

    run(prog, argv=(), *, out=None, base_dir=None, lib_dirs=()) -> int
    run_capture(prog, argv=(), timeout=None) -> (stdout text, count)

`run` links imports (`bril.ir.linker`), turns every function reachable from
@main into Python source (`bril.interpreter.codegen`, guided by `bril.analysis.typecheck`),
compiles it once, and calls @main with its command-line arguments parsed by
their declared types (`bril.ir.values`).  It returns the number of dynamic
instructions (what `brili -p` prints) and raises `BrilError` with the
reference interpreter's message for every Bril error; output printed before
an error has been written to `out` (and flushed) when the error is raised.

Semantics beyond the reference interpreter (all documented in the team brief):

* Integers are exact signed 64-bit values (wrapping), also in JSON constants
  and in @main arguments (read exactly, not through a double).
* Speculation nests as the spec says: `commit` ends the innermost
  speculation and returns to its parent.  An abort (failed `guard`) restores
  the variables, *including ssa2 shadow variables* (`set`), to their values
  at the matching `speculate` (the reference does not roll back shadow
  variables); the heap and the output are not rolled back.
* The classic SSA `phi` picks the argument whose label is the
  second-most-recently executed label (docs/lang/ssa.md).
* Deep recursion runs in a thread with a large stack and a high recursion
  limit; a runaway recursion ends in a one-line error.

For a tracer or a native engine: `compile_program(prog, ...)` returns the
`CompiledProgram`, whose `codes` map function indices to `FunctionCode`
objects (blocks in layout order, variables at block entry, generated source,
`entry_source()` to start a function at any block with given variables); see
`bril.interpreter.codegen`.  `run(..., recorder=R)` (or `run_recording`) reports function
entries, blocks and returns to R (`brili --trace`), the same events in every
tier: the cold tier reports them itself, and promotes hot functions to their
recording variants (`record`, `osrrecord`).
"""

import io
import sys

from ..ir.errors import BrilError
from ..ir import messages as M
from . import heap as heapmod
from ..ir.linker import link
from ..ir.ops import HELPERS as OP_HELPERS
from ..ir.support import CHECK_FUNCTIONS, SCALAR_KIND, any_variables
from ..ir.values import UNDEF, MISSING, format_float, format_value, kind_of, parse_main_args

# Python frames a Bril call takes at most: three in the cold tier (the call's
# closure, `invoke`, `activate`), four from there to a function the JIT stands in
# for; one from generated code to generated code.  Python's recursion limit lets
# M.MAX_CALL_DEPTH calls of the most through (`--tier cold` once stopped at 77,000,
# saying "more than 200000"): no run fails before native code would, and a failure's
# message is true.  A run whose calls take fewer frames may go deeper than native
# code, which counts them.
FRAMES_PER_CALL = 4
# Sets of kinds kept per loop header for the program's executable (`header_history`).
HEADER_KINDS_KEPT = 4
THREAD_STACK = 512 * 1024 * 1024


# --- helpers the generated code calls --------------------------------------------------

def _phi_error(prev, label_ids):
    if prev is None:
        raise BrilError("phi: no predecessor label has been executed")
    name = next((k for k, v in label_ids.items() if v == prev), prev)
    raise BrilError(f"phi has no argument for label {name}")


def _fact_violated(what, value):
    """Checking mode (`bril.interpreter.codegen._Emitter.emit_fact_checks`): a range fact the
    generated code relied on does not hold -- a bug of the tool, not of the program."""
    raise BrilError(f"internal error: range fact violated: {what} (got {value!r})")


class _Unbound:
    __slots__ = ()


_BASE_NAMESPACE = dict(OP_HELPERS)
_BASE_NAMESPACE.update(CHECK_FUNCTIONS)
_BASE_NAMESPACE.update(heapmod.HELPERS)
_BASE_NAMESPACE.update({
    "_E": BrilError,
    "_phi_error": _phi_error,
    "_RF": _fact_violated,
    "_ff": format_float,
    "_fv": format_value,
    "_kind": kind_of,
    "_UNDEF": UNDEF,
    "_UNB": _Unbound(),
    "_INF": float("inf"),
    "_NAN": float("nan"),
})


# --- compiling a program -----------------------------------------------------------------

class CompiledProgram:
    """The generated Python code of a linked program, with its run-time namespace."""

    def __init__(self, linked, out, native_heap=False, check_facts=None):
        self.linked = linked
        # Checking mode: the generated code asserts the range facts it relies on
        # (`check_facts`, else the environment variable BRIL_CHECK_FACTS, read here once).
        if check_facts is None:
            from ..cache.codekeys import check_facts_requested
            check_facts = check_facts_requested()
        self.check_facts = bool(check_facts)
        # Generated code assumes the kinds the cold tier saw, of `any` parameters and
        # at loop headers, and of typed pointer parameters' regions; not with
        # BRIL_SPECULATE_TYPES=0 (the generic code, to measure speculation against).
        from ..cache.codekeys import type_speculation_requested
        self.speculate_types = type_speculation_requested()
        self.native_heap = False
        self.main_args = {}         # @main's int and bool arguments, by name (`run`)
        self.heap = heapmod.Heap()
        self.ns = dict(_BASE_NAMESPACE)
        self.ns["_N"] = 0
        self.out = out              # (native code's output goes to it as bytes)
        self.ns["_P"] = out.write
        self.ns["_alloc"] = self.heap.alloc
        self.ns["_free"] = self.heap.free
        self.codes = {}             # global function index -> FunctionCode
        self.shapes = {}            # global function index -> its FunctionShape
        self.despecialized = set()  # functions bound to their generic variants (`miss`)
        self.respecialized = {}     # function index -> {param: kind} it was regenerated for
        self.header_seen = {}       # function index -> {loop header: {variable: kind}}
        # function index -> {loop header: [{variable: kind}, ...]}: each set of kinds
        # `saw_at_header` saw there in the run (HEADER_KINDS_KEPT at most), for the
        # program's executable (`bril.interpreter.type_profile.seen`)
        self.header_history = {}
        self._any_vars = {}         # function index -> its variables declared `any`
        self.loops_respecialized = set()    # functions `deopt` regenerated
        self.cache = None           # a bril.cache.codecache.CodeCache for generated code
        self._prefetched = {}       # cache key -> an entry read by `cached` for `load`
        self.jit_mode = False       # promote to the jit variant (brili --jit)
        self.record_mode = False    # promote to the record variant (a trace recorder runs)
        self.eager_functions = set()    # promoted at their first call (the JIT's profile)
        self.jit_code_loops = {}    # jit variants' Python names -> their loops' lines
        self.jit_promoted = {}      # function index -> its jit variant, once promoted
        if native_heap:
            from ..native_runtime.nativert import runtime_library
            self.use_native_heap(runtime_library())

    def instructions_run(self):
        """The dynamic instruction count so far: generated code's and the cold tier's."""
        cold = self.__dict__.get("_cold")
        return self.ns["_N"] + (cold.count if cold is not None else 0)

    def use_native_heap(self, rt):
        """Keep the heap in brilrt's region table (`bril.interpreter.heap.NativeHeap`), shared
        with native code; before any code is generated.  Returns the heap."""
        assert not self.codes, "the heap must be chosen before code is generated"
        self.native_heap = True
        self.heap = heapmod.NativeHeap(rt)
        self.ns.update(heapmod.NATIVE_HELPERS)
        self.ns["_hpair"] = self.heap.from_pair
        self.ns["_hregs"] = self.heap.regions
        self.ns["_alloc"] = self.heap.alloc
        self.ns["_free"] = self.heap.free
        return self.heap

    # used by the code generator
    def resolve_call(self, caller_index, name):
        """The FunctionCode a call names, or the reference's error text."""
        r = self.linked.resolve_call(caller_index, name)
        return r if isinstance(r, str) else self.function_code(r)

    @property
    def cold(self):
        engine = self.__dict__.get("_cold")
        if engine is None:
            from .cold import ColdEngine
            engine = self._cold = ColdEngine(self)
        return engine

    # --- loading generated code ----------------------------------------------------

    def load(self, index, variant, osr=None):
        """The Python function of a variant (see `load_with_links`)."""
        return self.load_with_links(index, variant, osr)[0]

    def load_with_links(self, index, variant, osr=None):
        """(function, Links): the Python function of one variant of function `index` (`osr`: the block
        an osr variant is entered at), generated -- or taken from the code cache,
        without analysing the function -- and defined in the namespace with what it
        needs bound; None for an osr variant at a block that is no loop header."""
        key = self._cache_key(index, variant, osr)
        found = self._prefetched.pop(key, None) if key is not None else None
        if found is None:
            found = self._from_cache(key)
        if found is None:
            found = self._generate(index, variant, osr)
            self._to_cache(key, found)
        code, links = found
        if code is None:
            return None, None
        self._bind(links)
        exec(code, self.ns)
        return self.ns[links.defname], links

    def _generate(self, index, variant, osr):
        """(code object, Links) of one variant, generated now; (None, None) for an osr
        variant at a block that is no loop header."""
        fc = self.function_code(index)
        if osr is not None and osr not in fc.osr_headers:
            return None, None
        src, links = fc.source_and_links(variant, osr)
        self._dump_more(src)
        return compile(src, f"<bril @{fc.name} {variant}>", "exec"), links

    def variant_key(self, index, variant):
        """The code cache's key of `variant` of function `index` as this run generates
        it (None without a cache)."""
        return self._cache_key(index, variant, None)

    def generate_into_cache(self, index, variant, key):
        """Generate `variant` of function `index` into the code cache, without defining
        it, if `key` (what another process's `variant_key` gave) is its key here too
        -- the same program and facts -- and the cache has no such entry yet.  The
        compile server makes, this way, the code a run goes on in when native code
        hands back (`jitx`) for the next run, which would otherwise generate it:
        10-25 ms of a 0.1 s rerun."""
        if key is None or self._cache_key(index, variant, None) != key \
                or self._from_cache(key) is not None:
            return False
        self._to_cache(key, self._generate(index, variant, None))
        return True

    @classmethod
    def generator(cls, linked, cache, native_heap):
        """A CompiledProgram that only generates code into `cache` (never runs: the
        compile server's), laid out for the heap a run has (`native_heap`)."""
        import io
        compiled = cls(linked, io.StringIO())
        compiled.cache = cache
        compiled.native_heap = native_heap
        return compiled

    def _bind(self, links):
        from ..native_runtime.pynames import function_name
        ns = self.ns
        ns.update(links.constants)
        for i in links.callees:
            name = function_name(i, self.linked.functions[i].get("name", ""))
            if self.record_mode:
                name += "__record"      # (recording variants call recording variants)
            if name not in ns:
                ns[name] = self.cold.stub(i)
        for name, i, variant in links.variants:
            if name not in ns:
                ns[name] = self.miss(i) if variant == "miss" else \
                    self.deopt(i, variant) if variant in _DEOPT_TARGETS else \
                    self._lazy_variant(name, i, variant)
        for name, (i, header) in links.counters.items():
            if name not in ns:
                ns[name] = self.jit_flag_start(i, header)
        if links.info.get("loops") and self.jit_mode:
            self.jit_code_loops[links.defname] = links.info["loops"]

    def observed_kinds(self, index):
        """{`any` parameter: the one kind the calls the cold tier ran passed it}, for
        the generated code of function `index` to assume; nothing once the function
        was bound to its generic variant (`miss`)."""
        if index in self.despecialized or not self.speculate_types:
            return {}
        again = self.respecialized.get(index)
        if again is not None:
            return again
        cold = self.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        if cf is None or not cf.seen:
            return {}
        return {p: k for p, k in cf.seen.items() if k is not None}

    def observed_kind_sets(self, index):
        """(calls, [({`any` parameter: kind}, calls that passed those kinds), ...]) of
        the calls the cold tier ran of function `index` (`ColdFunction.kind_sets`;
        nothing if they passed many combinations)."""
        cold = self.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        from .cold import MIXED
        if cf is None or cf.kind_sets is MIXED:
            return 0, []
        names = [name for _, name in cf.any_params]
        return cf.calls, [({n: k for n, k in zip(names, kinds) if k is not None}, calls)
                          for kinds, calls in cf.kind_sets.items()]

    def observed_header_sets(self, index):
        """{loop header label: (arrivals, [({`any` variable live there: kind}, arrivals
        that found those kinds), ...])} of the backward jumps the cold tier ran in
        function `index` while profiling (`ColdFunction.header_sets`; a header that
        saw many combinations is left out)."""
        cold = self.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        if cf is None:
            return {}
        from .cold import MIXED, header_kinds
        out = {}
        for header, (names, sets, _) in sorted(cf.header_sets.items()):
            label = cf.blocks[header].label
            if sets is MIXED or label is None:
                continue
            merged = {}             # (keys of several types may be one set of kinds)
            for key, arrivals in sets.items():
                kinds = header_kinds(key)
                merged[kinds] = merged.get(kinds, 0) + arrivals
            out[label] = (sum(sets.values()), [
                ({n: k for n, k in zip(names, kinds) if k is not None}, arrivals)
                for kinds, arrivals in merged.items()])
        return out

    def observed_values(self, index, least=0):
        """(calls, {parameter: {int or bool: calls that passed it}}, moved) of the
        calls the cold tier ran of function `index` (`ColdFunction.values`; a
        parameter that held many values is left out); `moved`: the function went on
        in generated code (promoted, or a frame moved at a loop header), so those
        calls are all the cold tier will see.  No parameters if it stayed there
        after fewer than `least` calls (a program of 12,000 functions each called
        once: 50 ms to list their values)."""
        cold = self.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        if cf is None:
            return 0, {}, False
        moved = cf.fast is not None or bool(cf.osr_headers)
        if not cf.value_params or (cf.calls < least and not moved):
            return cf.calls, {}, moved
        from .cold import MIXED, tally_values
        values = cf.values
        if cf.calls == 1 and not values and cf.first_args is not None:
            # (tallied here, not into cf.values: the cold tier counts the first call's
            # arguments there itself when a second call comes -- a profile made in
            # between, the JIT's at its first ask, counted them twice, and @closest's
            # two calls with one value seemed three: no value kept)
            values = {}
            tally_values(values, cf.value_params, cf.first_args)
        return cf.calls, {p: {v: n for (_, v), n in counts.items()}
                          for p, counts in values.items() if counts is not MIXED}, moved

    def saw_at_header(self, index, header, env):
        """The cold tier moves a frame of function `index` to generated code at loop
        header `header` (a block index) with the variables `env`: the kinds of
        its `any` variables' scalar values there, which the code may assume at that
        header.  (Only `any` variables: a typed one's kind is known, and one seen
        assigned or not depending on when the frame moved would change the cache
        key of a typed program between runs.)"""
        names = self._any_vars.get(index)
        if names is None:
            names = self._any_vars[index] = any_variables(self.linked.functions[index])
        kinds = {k: SCALAR_KIND.get(type(v)) for k, v in env.items() if k in names}
        kinds = {k: kind for k, kind in kinds.items() if kind is not None}
        self.header_seen.setdefault(index, {})[header] = kinds
        history = self.header_history.setdefault(index, {}).setdefault(header, [])
        if kinds and kinds not in history and len(history) < HEADER_KINDS_KEPT:
            history.append(kinds)

    def loop_kinds_history(self, index):
        """{loop header label: [{variable: kind}, ...]}: every set of kinds
        `saw_at_header` saw at the loop headers of function `index`."""
        history = self.header_history.get(index)
        if not history:
            return {}
        blocks = self.function_shape(index).blocks_by_index
        return {blocks[h].label: list(sets) for h, sets in sorted(history.items())
                if blocks[h].label is not None}

    def loop_kinds_seen(self, index):
        """((header, ((variable, kind), ...)), ...): what `saw_at_header` saw of
        function `index` (nothing once it was bound to its generic variant)."""
        if index in self.despecialized or not self.speculate_types:
            return ()
        seen = self.header_seen.get(index)
        if not seen:
            return ()
        # (a header where no `any` variable held a scalar says nothing: left out, or
        # a typed function moved at a loop header would have another cache key than
        # the same function promoted at its first call -- a run with a profile
        # generated all its code again, 10-20 ms of an eight-queens rerun)
        return tuple(sorted((h, tuple(sorted(vs.items()))) for h, vs in seen.items() if vs))

    def miss(self, index):
        """Where a function whose entry assumptions failed goes (`F..__miss`): its
        generic variant, the same call.  After RESPECIALIZE_AFTER misses (a phase of
        the program passing other kinds), the function is regenerated assuming the
        kinds its `any` parameters held in every one of those misses; after
        MISS_LIMIT misses (counted again from there) it is bound to its generic
        variant for good: one respecialization a run at most, no loop of them."""
        count = [0]
        generic = []
        func = self.linked.functions[index]
        anys = [(i, p.get("name")) for i, p in enumerate(func.get("args") or [])
                if p.get("type") == "any"]
        seen = {}
        from .cold import value_kind

        def missed(*args):
            if not generic:
                generic.append(self.load(index, "generic"))
            count[0] += 1
            if index not in self.respecialized:
                for i, name in anys:
                    kind = value_kind(args[i]) if i < len(args) else None
                    if seen.setdefault(name, kind) != kind:
                        seen[name] = None
            if count[0] == RESPECIALIZE_AFTER and index not in self.respecialized \
                    and not self.record_mode:
                kinds = {p: k for p, k in seen.items() if k is not None}
                if kinds and kinds != self.observed_kinds(index):
                    count[0] = 0
                    seen.clear()
                    self._respecialize(index, kinds)
            elif count[0] == MISS_LIMIT:
                self._despecialize(index, generic[0])
            return generic[0](*args)
        return missed

    def deopt(self, index, how):
        """Where a frame goes when a kind assumed at a loop header fails on entry
        (`F..__deopt`, called with the header's block index and layout id, and the
        frame's locals).
        The first time in a run that the frame brings kinds other than the ones
        seen there before (a phase of the program), the function is regenerated
        for them and the frame goes on in the new code (its osr variant at the
        header); later calls run it too: one regeneration a run, no loop of them.
        Otherwise the frame goes on in code that assumes no kinds at loop headers
        (its `osrplain` variant; under the JIT, the generic jitx), and after
        MISS_LIMIT of those the function is bound to its generic variant."""
        count = [0]
        targets = {}                # header -> the code the frame goes on in (memo)

        def resume(header, lid, frame):
            # (nothing here analyses the function: its code may come from the cache)
            values = _frame_values(self.linked.functions[index], frame)
            if index not in self.loops_respecialized and index not in self.despecialized:
                self.loops_respecialized.add(index)
                seen = (self.header_seen.get(index) or {}).get(header)
                self.saw_at_header(index, header, values)
                if self.header_seen[index][header] != seen:
                    self.codes.pop(index, None)
                    self._rebind(index, self._promoted_on_call(index))
                    entry = self.load(index, self.promoted_variant(osr=True), header)
                    if entry is not None:
                        return entry(values)
            count[0] += 1
            if count[0] == MISS_LIMIT and index not in self.despecialized:
                self._despecialize(index, self.load(index, "generic"))
            plain = targets.get(header)
            if plain is None:
                plain = targets[header] = (self.load(index, "osrplain", header)
                                           if how == "deopt" else None) or False
            if plain:
                return plain(values)
            generic = targets.get(None)
            if generic is None:
                generic = targets[None] = self.load(index, _DEOPT_TARGETS[how])
            return generic(lid, frame)
        return resume

    def _promoted_on_call(self, index):
        """The promoted variant of function `index`, loaded when it is next called
        (this frame may be its last call: `@main`); under the JIT, loaded now."""
        variant = self.promoted_variant()
        if self.jit_mode:
            return self.load(index, variant)

        def first_call(*args):
            fn = self.load(index, variant)
            self._rebind(index, fn)
            return fn(*args)
        return first_call

    def _respecialize(self, index, kinds):
        """Regenerate function `index` assuming `kinds` of its `any` parameters and
        bind its name to the result (its misses go on to the same `missed`)."""
        self.respecialized[index] = kinds
        self.codes.pop(index, None)
        self._rebind(index, self._promoted_on_call(index))

    def _despecialize(self, index, generic):
        self.despecialized.add(index)
        self._rebind(index, generic)

    def _rebind(self, index, fn):
        """Later calls of function `index` (by name, or from the cold tier) run fn."""
        from ..native_runtime.pynames import function_name
        func = self.linked.functions[index]
        name = function_name(index, func.get("name", ""))
        fn = self.jit_wrap(index, fn) if self.jit_mode else fn
        self.ns[name] = fn
        cold = self.__dict__.get("_cold")
        cf = cold.functions.get(index) if cold is not None else None
        if cf is not None and cf.fast is not None:
            cf.fast = fn

    def _lazy_variant(self, name, index, variant):
        """A stand-in that loads a variant on its first call (then binds it)."""
        def first_call(*args):
            fn = self.ns[name] = self.load(index, variant)
            return fn(*args)
        return first_call

    def cached(self, index, variant, osr=None):
        """Is this variant's code in the code cache (then loading it costs little)?
        The entry read is kept for the `load` that follows."""
        key = self._cache_key(index, variant, osr)
        if key is None:
            return False
        found = self._from_cache(key)
        if found is None:
            return False
        self._prefetched[key] = found
        return True

    def _cache_key(self, index, variant, osr):
        if self.cache is None or variant not in _CACHED_VARIANTS or _dump_requested():
            return None
        from ..cache.codekeys import function_key
        fc = self.codes.get(index)
        kinds = tuple(fc.assumed_kinds) if fc is not None else \
            tuple(sorted(self.observed_kinds(index).items()))
        seen = fc.loop_seen if fc is not None else self.loop_kinds_seen(index)
        return function_key(self.linked, index, variant, osr,
                            (self.native_heap, self.check_facts, kinds, seen))

    def _from_cache(self, key):
        if key is None:
            return None
        found = self.cache.get_marshalled("py", key)
        if not (isinstance(found, tuple) and len(found) == 2):
            return None
        code, links = found
        return code, _links_from_data(links)

    def _to_cache(self, key, found):
        if key is None:
            return
        code, links = found
        # (an object marshal cannot store: no entry)
        self.cache.put_marshalled("py", key,
                                  (code, links.as_data() if links is not None else None))

    def promoted_variant(self, osr=False):
        """The variant `promote` (or, with osr, `osr_entry`) loads."""
        if osr:
            return "osrjit" if self.jit_mode else "osrrecord" if self.record_mode else "osr"
        return "jit" if self.jit_mode else "record" if self.record_mode else "normal"

    def promote(self, cf):
        """The generated code of the function the cold tier's cf runs, now bound
        to its Python name (later calls run it): its normal variant, under the
        JIT its jit variant (with counters that hand hot loops to native code),
        with a trace recorder its record variant."""
        from ..native_runtime.pynames import function_name
        if self.jit_mode:
            fast = self.jit_wrap(cf.index, self.load(cf.index, "jit"))
            cf.fast = self.ns[function_name(cf.index, cf.name)] = fast
        elif self.record_mode:
            fast = cf.fast = self.load(cf.index, "record")
        else:
            fast = cf.fast = self.load(cf.index, "normal")
        return fast

    def osr_entry(self, cf, block):
        """A callable(env) that goes on running cf's activation in generated code at
        block `block` (a loop header) with the cold tier's variables; None if the
        generated code cannot be entered there."""
        entries = cf.osr_headers
        if entries is None:
            entries = cf.osr_headers = {}
        if block in entries:
            return entries[block]
        # (under the JIT, the osr variant with the JIT's loop counters; recording, the
        # one reporting to the recorder)
        entry, links = self.load_with_links(cf.index, self.promoted_variant(osr=True), block)
        if entry is None and not self.record_mode and block not in self.loop_blocks(cf)[1]:
            # No loop of the layout holds the block (a cycle with two entries, an
            # irreducible one, has no natural loop): the entry variant, which starts
            # at any block.  Without it such a frame would stay cold to its end.
            # (A block inside a loop that is not its header -- a rotated loop's
            # body -- waits for the header: `ColdEngine._seek`.)
            entry, links = self.load_with_links(cf.index, "entry")
            entry = _entered_at(entry, self.function_code(cf.index).blocks_by_index[block].lid)
        if entry is not None and links.label_ids is not None:
            entry = _phi_labels_to_ids(entry, links.label_ids)
        entries[block] = entry
        return entry

    def loop_blocks(self, cf):
        """(the blocks where `osr_entry` enters cf's function's osr variants -- the
        headers of its laid-out loops --, the blocks those loops hold).  (The cold
        tier asks at backward jumps in the order of the text; a rotated loop's
        header may be reached by forward jumps only.)"""
        found = self.__dict__.setdefault("_loop_blocks", {})
        blocks = found.get(cf.index)
        if blocks is None:
            shape = self.function_shape(cf.index)       # (its generated code's, later)
            blocks = found[cf.index] = ({l.header for l in shape.loops},
                                        {b.index for b in shape.blocks_by_index
                                         if b.loop is not None})
        return blocks

    def stop_recording(self):
        """The recorder stopped listening (its budget ran out): no more events, and
        functions promoted from now on get their normal variants."""
        from ..native_runtime.pynames import variant_name
        self.ns.update(_RE=_no_event, _RB=_no_event, _RL=_no_event, _RS=True)
        self.record_mode = False
        cold = self.__dict__.get("_cold")
        if cold is not None:
            cold.stop_recording()
            for cf in cold.functions.values():
                cf.fast = None          # (promoted again, to the normal variant)
        # Calls from now on, made by frames still in record variants too, run the
        # normal variants: a recursive function's every call would otherwise enter
        # its record variant and move to the osr variant at its first loop header.
        ns = self.ns
        for i, func in enumerate(self.linked.functions):
            rec_name = variant_name(i, func.get("name", ""), "record")
            if rec_name in ns:
                ns[rec_name] = self._lazy_variant(rec_name, i, "normal")

    @staticmethod
    def sample_values(recorder):
        """What a record variant calls with its locals when the recorder asks for
        the values at a loop entry (`Recorder.sample`: by Bril names)."""
        from ..native_runtime.pynames import var_name
        sample = getattr(recorder, "sample", None)

        def values(stats, loc):
            sample(stats, lambda v: loc.get(var_name(v)))
        return values

    def resume_unrecorded(self, index, header, loc):
        """A record variant's frame once the recorder has stopped: go on at loop
        header block `header` in function `index`'s osr variant, with the frame's
        locals `loc` (returns what the function returns)."""
        from ..native_runtime.pynames import shadow_name, var_name
        fc = self.function_code(index)
        entries = self.__dict__.setdefault("_unrecorded", {})
        entry = entries.get((index, header))
        if entry is None:
            entry, links = self.load_with_links(index, "osr", header)
            if links.label_ids is not None:
                entry = _phi_labels_to_ids(entry, links.label_ids)
            entries[(index, header)] = entry
        names = self.__dict__.setdefault("_unrecorded_names", {}).get(index)
        if names is None:
            # (Bril name or cold-tier key, Python local), once per function
            names = [(v, var_name(v)) for v in fc.variables]
            names += [(("shadow", k[1]), shadow_name(k[1]))
                      for k in set(fc.generic_types.spec_vars) | set(fc.types.spec_vars)
                      if isinstance(k, tuple)]
            self._unrecorded_names[index] = names
        env = {v: loc[n] for v, n in names if n in loc}
        if fc.has_phi:
            # (phi's labels by name, as the cold tier keeps them: this frame's ids are
            # the record variant's)
            names = {i: lab for lab, i in fc.label_ids.items()}
            env[2], env[3] = names.get(loc.get("_lb")), names.get(loc.get("_pl"))
        return entry(env)

    def _dump_more(self, src):
        dump = _dump_requested()
        if dump:
            _dump(src, dump)

    def function_shape(self, index):
        """Function `index`'s blocks and layout (`bril.analysis.layout.FunctionShape`),
        made once: its `FunctionCode` is built on them, and the JIT selects native
        regions from them without the type analysis the generated code needs."""
        shape = self.shapes.get(index)
        if shape is None:
            from ..analysis.layout import FunctionShape
            # (setdefault: the JIT's sampler may make one at the same time; both
            # threads keep the first stored, the one every FunctionCode is built on)
            shape = self.shapes.setdefault(index, FunctionShape(self.linked.functions[index]))
        return shape

    def function_code(self, index):
        fc = self.codes.get(index)
        if fc is None:
            from .codegen import FunctionCode     # (not needed by runs that stay cold)
            fc = self.codes[index] = FunctionCode(index, self.linked.functions[index], self)
        return fc

    def jit_flag_start(self, index, header):
        """Whether a loop of function `index` calls the JIT at its header from the
        start (set by `bril.backend.jit.Jit.attach`)."""
        return False

    def jit_wrap(self, index, fn):
        """What a promoted function's name is bound to under the JIT (set by
        `bril.backend.jit.Jit.attach`: a native call, or a counting stand-in); before the
        JIT attaches (`bril.backend.jit_deferred`), itself."""
        self.jit_promoted[index] = fn
        return fn

    def prepare(self, root_index, record=False, jit=False):
        """Type-check every function reachable from root_index, then generate and
        compile their code (their recording variants if `record`; with `jit`, the
        jit variant of every function that has a loop, under the normal name)."""
        todo = [root_index]
        seen = {root_index}
        while todo:
            fc = self.function_code(todo.pop())
            for b in fc.blocks_by_index:
                for instr in b.instrs:
                    if instr["op"] == "call" and instr.get("funcs"):
                        r = self.linked.resolve_call(fc.index, instr["funcs"][0])
                        if isinstance(r, int) and r not in seen:
                            seen.add(r)
                            todo.append(r)
        for index in sorted(self.codes):
            fc = self.codes[index]
            if record:
                self.load(index, "record")
            elif jit:
                self.load(index, "jit")
                self.load(index, "jitx")
                self.ns[fc.pyname] = self.ns[fc.pyname + "__jit"]
            else:
                self.load(index, "normal")

    def entry_function(self, index):
        """The `__entry(_b, _vars)` variant of a function (compiled on demand)."""
        from ..native_runtime.pynames import variant_name
        name = variant_name(index, self.linked.functions[index].get("name", ""), "entry")
        fn = self.ns.get(name)
        return fn if fn is not None else self.load(index, "entry")


# Variants kept in the code cache (the others carry hooks numbered per run).
_CACHED_VARIANTS = ("normal", "generic", "osr", "osrjit", "osrplain", "entry", "jit", "jitx",
                    "resume")
# The variant a failed loop-header assumption resumes in (`deopt`), per link kind.
_DEOPT_TARGETS = {"deopt": "resume", "deoptx": "jitx"}


def _no_event(*args):
    pass


def _frame_values(func, frame):
    """{variable (or ("shadow", name)): value} of the `locals()` of a frame of func's
    generated code, as its osr variants take them."""
    from ..native_runtime.pynames import shadow_name, var_name
    values = {}
    for p in func.get("args") or ():
        name = p.get("name")
        if isinstance(name, str) and var_name(name) in frame:
            values[name] = frame[var_name(name)]
    for instr in func.get("instrs") or ():
        d = instr.get("dest")
        if isinstance(d, str) and d not in values and var_name(d) in frame:
            values[d] = frame[var_name(d)]
        if instr.get("op") == "set" and instr.get("args"):
            s = instr["args"][0]
            if isinstance(s, str) and shadow_name(s) in frame:
                values[("shadow", s)] = frame[shadow_name(s)]
    return values


def _links_from_data(data):
    if data is None:
        return None
    from ..native_runtime.pynames import Links
    return Links.from_data(data)


def _entered_at(entry, lid):
    """An entry variant as an osr entry: callable(env), starting at block `lid`."""
    def enter(env):
        return entry(lid, env)
    return enter


def _phi_labels_to_ids(entry, label_ids):
    """The cold tier keeps phi's current and previous labels by name; generated code
    by number."""
    def enter(env):
        env[2] = label_ids.get(env.get(2))
        env[3] = label_ids.get(env.get(3))
        return entry(env)
    return enter


def _dump_requested():
    import os
    return os.environ.get("BRIL_DUMP_PY")


def _dump(text, where):
    """BRIL_DUMP_PY=1 (or - or stderr): to stderr; otherwise appended to that file."""
    if where in ("1", "-", "stderr"):
        sys.stderr.write(text)
    else:
        with open(where, "a") as fh:
            fh.write(text)


def compile_program(prog, *, out=None, base_dir=None, lib_dirs=(), filename=None,
                    native_heap=False, check_facts=None):
    """Link and compile prog; returns (CompiledProgram, index of @main).  With
    `native_heap`, the heap lives in brilrt's region table (`bril.interpreter.heap.NativeHeap`).
    `check_facts`: the checking mode (see `run`)."""
    linked = link(prog, base_dir=base_dir, lib_dirs=lib_dirs, filename=filename)
    main = linked.main_index()
    compiled = CompiledProgram(linked, out if out is not None else sys.stdout,
                               native_heap=native_heap, check_facts=check_facts)
    return compiled, main


# --- running ---------------------------------------------------------------------------


def _translate(exc):
    """A BrilError for an exception escaping generated code."""
    if isinstance(exc, BrilError):
        return exc
    if isinstance(exc, NameError):      # includes UnboundLocalError
        import re
        m = re.search(r"'([^']+)'", str(exc))
        from ..native_runtime.pynames import bril_name_of
        who = bril_name_of(m.group(1)) if m else None
        if who is not None:
            kind, name = who
            if kind == "var":
                return BrilError(M.text(M.UNDEFINED_VARIABLE, name=name))
            return BrilError(M.text(M.NO_SET, name=name))
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        # The cold tier keeps variables in a dict: a read of an unset one.
        return BrilError(M.text(M.UNDEFINED_VARIABLE, name=exc.args[0]))
    if isinstance(exc, ZeroDivisionError):
        # `div` on operands known to be non-negative compiles to a bare `//`
        # (ops.py's py_nonneg template), which lets Python catch the zero.
        return BrilError(M.DIVISION_BY_ZERO)
    if isinstance(exc, RecursionError):
        return BrilError(M.text(M.RECURSION, depth=M.MAX_CALL_DEPTH))
    if isinstance(exc, TimeLimit):
        return BrilError("time limit exceeded")
    if isinstance(exc, MemoryError):
        return BrilError("out of memory")
    if isinstance(exc, OSError):
        return BrilError(f"cannot write the output: {exc.strerror or exc}")
    return BrilError(f"internal error: {type(exc).__name__}: {exc}")


class TimeLimit(Exception):
    """Raised inside a run that outlived its `timeout` (see `run`)."""


def _call_in_big_thread(fn, timeout=None):
    """Run fn() in a thread with a large C stack and a high recursion limit.

    With a `timeout` (seconds), a run still going after it is stopped by
    raising TimeLimit inside its thread (delivered at the next bytecode).
    (`_thread` rather than `threading`, which costs 4 ms of every start.)"""
    import _thread
    result = {}
    done = _thread.allocate_lock()
    done.acquire()

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:          # re-raised in the caller's thread
            result["error"] = e
        finally:
            done.release()

    old_limit = sys.getrecursionlimit()
    old_stack = _thread.stack_size()
    try:
        sys.setrecursionlimit(FRAMES_PER_CALL * M.MAX_CALL_DEPTH + 1000)
        _thread.stack_size(THREAD_STACK)
        # Like a daemon thread: Ctrl-C (delivered to the main thread, whose wait
        # below it interrupts) ends the process even if the program loops forever.
        ident = _thread.start_new_thread(target, ())
        if not done.acquire(timeout=-1 if timeout is None else timeout):
            import ctypes
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                       ctypes.py_object(TimeLimit))
            done.acquire()
    finally:
        _thread.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result.get("value")


TIERS = ("auto", "cold", "fast")
# Calls whose entry assumptions fail before a function is bound to its generic
# variant for the rest of the run (`CompiledProgram.miss`).
MISS_LIMIT = 64
# Misses, all passing the same kinds, after which a function is regenerated for
# those kinds (once a run: a phase of the program that passes other values).
RESPECIALIZE_AFTER = 8
# Under the JIT: cold-tier instructions before promotion, per visit of `--hot N`.
JIT_PROMOTE_PER_HOT = 4


def _fast_call(compiled, main, mfunc, values, record):
    """The call that runs @main in generated code."""
    if record and not any(v is MISSING for v in values):
        fn = compiled.ns[compiled.codes[main].pyname + "__record"]
        return lambda: fn(*values)
    if any(v is MISSING for v in values):
        # Parameters of types the reference does not parse stay unset.
        entry = compiled.entry_function(main)
        names = [p["name"] for p in mfunc.get("args") or []]
        state = {n: v for n, v in zip(names, values) if v is not MISSING}
        return lambda: entry(0, state)
    fn = compiled.ns[compiled.codes[main].pyname]
    return lambda: fn(*values)


def run(prog, argv=(), *, out=None, base_dir=None, lib_dirs=(), filename=None,
        recorder=None, jit=None, native_heap=False, timeout=None, tier="auto",
        promote_after=None, cache=None, check_facts=None, observe=None):
    """Run @main of prog with string arguments; return the dynamic instruction count.

    `tier` chooses how functions run: "auto" (the default) starts every function
    in the cold tier (`bril.interpreter.cold`: nothing prepared that does not run) and moves
    hot functions to generated Python, also in the middle of a loop; "cold"
    never leaves the cold tier; "fast" generates Python for every function
    reachable from @main before the first instruction.  A recording run
    (`recorder`) reports the same events in every tier.  `promote_after` (tests): promote a
    function once it ran that many instructions in the cold tier, whatever its
    size (0: at its first backward jump or second call).  `cache`: a
    `bril.cache.codecache.CodeCache` where generated code is looked up before it is
    generated, and stored (`brili` uses one; by default none).

    With a `timeout` (seconds), a run that takes longer ends in a BrilError
    ("time limit exceeded"); `brili --trace` bounds its checking runs so.

    With `native_heap`, the heap lives in brilrt's region table, shared with
    native code (`bril.interpreter.heap.NativeHeap`; statically typed programs only).

    With a `recorder` (a `bril.tracing.trace_record.Recorder`), function entries, basic
    blocks and returns are reported to it (`brili --trace`): by the cold tier
    (`ColdEngine.record_to`) and by the recording variants of generated code it
    promotes hot functions to (`record`, and `osrrecord` for on-stack
    replacement), so nothing is analysed or generated for code that stays
    cold; with tier "fast", every reachable function's record variant up front.

    With `check_facts` (default: the environment variable BRIL_CHECK_FACTS=1), the
    generated code asserts every range fact of `bril.analysis.typecheck` it relies on (no
    wrap-around where a test was dropped, the sign of `div` operands compiled to
    `//`, each int variable's inferred range at block entry); a violated one is a
    BrilError "internal error: range fact violated: ...".  Off, it costs nothing.

    `observe`: called with the `CompiledProgram` once the run ended, also in an
    error (`brili --write-profile`: `bril.interpreter.type_profile.observed`)."""
    out = out if out is not None else sys.stdout
    compiled, main = compile_program(prog, out=out, base_dir=base_dir, lib_dirs=lib_dirs,
                                     filename=filename, native_heap=native_heap,
                                     check_facts=check_facts)
    compiled.cache = cache
    mfunc = compiled.linked.functions[main]
    values = parse_main_args(mfunc.get("args") or [], list(argv))
    compiled.main_args = {p["name"]: v for p, v in zip(mfunc.get("args") or [], values)
                          if p.get("type") in ("int", "bool")}
    try:
        if recorder is not None:
            compiled.ns.update(_RE=recorder.enter, _RB=recorder.block, _RL=recorder.leave,
                               _RS=False, _RX=compiled.resume_unrecorded,
                               _RV=compiled.sample_values(recorder))
            on_stop = getattr(recorder, "on_stop", None)
            if on_stop is not None:
                on_stop.append(compiled.stop_recording)
        if jit is not None:
            jit.source = (prog, base_dir, list(lib_dirs), filename)
            jit = jit.attach(compiled)
        if recorder is not None and jit is not None:
            raise ValueError("a run cannot both record and use the JIT")
        compiled.jit_mode = jit is not None
        compiled.record_mode = recorder is not None
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}")
        if tier != "fast":
            cold = compiled.cold
            cold.promote_enabled = tier == "auto"
            cold.budget = promote_after
            cold.profiling = observe is not None
            if recorder is not None:
                cold.record_to(recorder)
            if jit is not None and promote_after is None and jit.eager:
                # With `--hot N` a function is generated (with its hot-loop counters)
                # early enough that N still means N visits, roughly.  Otherwise the
                # budget grows with the function's size, as without the JIT: a large
                # function whose loops each run once must not pay for its analysis.
                cold.budget = JIT_PROMOTE_PER_HOT * min(jit.hot, jit.hot_calls)
            names = [p["name"] for p in mfunc.get("args") or []]
            state = {n: v for n, v in zip(names, values) if v is not MISSING}
            call = lambda: cold.activate(cold.function(main), state)   # noqa: E731
        else:
            compiled.prepare(main, record=recorder is not None, jit=jit is not None)
            call = _fast_call(compiled, main, mfunc, values, recorder is not None)
        try:
            _call_in_big_thread(call, timeout)
        except (KeyboardInterrupt, BrokenPipeError):
            raise                       # the command's business (exit quietly)
        except BaseException as e:
            raise _translate(e) from None
        if jit is not None:
            jit.finish()
        if compiled.heap.leaked():
            raise BrilError("Some memory locations have not been freed by end of execution.")
        return compiled.instructions_run()
    finally:
        flush = getattr(out, "flush", None)
        if flush is not None:
            flush()
        if observe is not None:
            observe(compiled)


def run_recording(prog, argv, out, recorder):
    """Run prog reporting to `recorder` (see `run`); returns the dynamic count."""
    return run(prog, argv, out=out, recorder=recorder)


def run_capture(prog, argv=(), timeout=None, **options):
    """(stdout text, dynamic instruction count); raises BrilError."""
    buf = io.StringIO()
    count = run(prog, argv, out=buf, timeout=timeout, **options)
    return buf.getvalue(), count
