"""Translate one Bril function into Python source (the fast engine's compiler).

Shape of the generated function (dump it with `BRIL_DUMP_PY=1` or
`brili --dump-py`):

    def F1_loop(v_n, v_p):              # Bril variables are Python locals
        global _N                       # the program's instruction count
        if v_p[2].accepts != 1: ...     # (pointer parameters: see "variants")
        v_i = 0                         # the entry block runs once, before the
        _n = 3                          # dispatch loop, its count a constant
        _b = 1
        while True:                     # the dispatch loop over basic blocks
            if _b == 1:                 # a natural loop: its own `while True`
                while True:
                    ...header...        # entered by `continue`: no dispatch test
                    ...body...          # single-predecessor blocks are inlined
                    _n += 7             # the count of the whole inlined path
                    continue            # back edge
            if _b == 4:                 # a block reached from several places
                _N += _n + 1
                return v_s

Basic blocks start at labels and after `jmp`/`br`/`ret`/`guard` (the same
boundaries as `bril.analysis.cfg`).  Blocks are laid out in reverse post-order with
every natural loop contiguous; a forward jump sets `_b` and falls down the
chain of guarded blocks, a back edge to a loop header is a bare `continue`, a
loop exit is `break`.  A block with a single predecessor is inlined into it
(no dispatch test).  Counting for `-p` is exact and cheap: the instructions
of a path of inlined blocks are added to `_n` once, where the path leaves
(`_n += 7` before the `continue`); an aborting `guard` ends a block, so its
path is counted up to the guard.  `_n` goes into the global `_N` at return.

Op semantics come from `bril.ir.ops` templates (integer wrap-around is inlined as
a range test around the template's inner expression, one-sided or dropped
where `bril.analysis.typecheck` bounds the operands); memory access comes from
`bril.interpreter.heap` templates.  Types come from `bril.analysis.typecheck`: an operand whose
kind is certain is used directly; any other operand is wrapped in a checking
helper that raises the reference's message (`add argument 0 must be a int`)
if, and only if, it executes with a wrong kind.  Calls to small loop-free
functions are replaced by the callee's code.

Undefined variables cost nothing: reading an unassigned local raises
UnboundLocalError, which the engine maps back to `undefined variable NAME`
through the reversible name mangling (`v_` + escaped name; `w<site>_` for the
variables of an inlined callee; shadow variables of ssa2 are `s_`).

Variants of a function (`FunctionCode`):

* `source()`: the normal function `F<i>_<name>(params)`.  It assumes each
  parameter declared `ptr<K>` (K primitive) points into a region of K, tests
  that on entry, and otherwise calls `generic_source()`'s variant (compiled
  on first use), which assumes nothing.
* `entry_source()`: `F<i>_<name>__entry(_b, _vars)` starts at block `_b`
  (a layout id) with the variables in the dict `_vars` (unset ones stay
  undefined), every block keeping its dispatch test so that it can be entered
  anywhere; generic typing (the values are assumed to have the kinds
  `block_vars` reports).  This is how a native engine that leaves compiled
  code at a block resumes the interpreter, and how a loop header can be
  entered with a given state; the normal function is not slowed by it.
* `record_source()`: reports function entries, blocks and returns to a
  trace recorder (used by `brili --trace`).

Data for a tracer or a native engine: `FunctionCode.blocks` lists the basic
blocks in layout order; each `IndexedBlock` has `lid` (its layout id, the value of
`_b`), `index` (source order; `blocks_by_index[index]`), `label`, `instrs`,
`first_index` (of its first instruction in the function's `instrs`), `succs`
(successor indices), `abort_succ` (a guard's abort target), `size`
(instructions counted by `-p`).  `block_vars(lid)` gives the variables and
their inferred kinds at entry; `loops` the natural loops (header, body).
"""

import math
import os

from ..ir.ops import OPS, INT_MIN, INT_MAX, STATEFUL_OPS
from ..cache.codekeys import check_facts_requested
from ..analysis.layout import FunctionShape, LayoutLoop
from ..ir import messages as M
from ..ir.errors import BrilError
from ..ir.support import (ARG_COUNTS, CHECKERS, PY_TYPES, argcount_message, arity_message,
                          call_funcs_message, check_stmt, checked_expr, decl_kind,
                          nonvoid_message, operand_message)
from ..native_runtime.pynames import (Links, escape as _escape, function_name, shadow_name,
                                      var_name, variant_name)
from ..ir.values import UNSET, const_value, js_type_text, type_cmp
from . import heap as heapmod
from ..analysis import typecheck as tc

# Deepest `if` nesting produced by inlining blocks (the tokenizer allows 100 levels).
MAX_INLINE_INDENT = 40
# Longest chain of blocks inlined one into the next (`emit_block` recurses once per
# link): a longer chain, e.g. front-end output where every block ends in `jmp`, is
# cut into dispatched pieces, so no program's shape can exhaust Python's stack.
MAX_INLINE_CHAIN = 64
# Calls to small loop-free functions are replaced by the callee's code: callees of
# at most this many instructions and blocks, nested this deep, and at most this
# many instructions inlined into one function.
INLINE_MAX_INSTRS = 40
INLINE_MAX_BLOCKS = 8
INLINE_MAX_DEPTH = 2
INLINE_BUDGET = 300


_WRAP_PREFIX = "wrap64("

_NOT_INLINED_OPS = STATEFUL_OPS         # (state beyond the callee's variables)


def _key_pyname(key):
    return shadow_name(key[1]) if isinstance(key, tuple) else var_name(key)


# --- the compiler -----------------------------------------------------------------------

class _Lines:
    """Generated lines as [indent, text] lists, so that a line can be patched or
    dropped after the fact (a loop header's dispatch test)."""

    def __init__(self):
        self.lines = []         # [indent, text] (lists, so they can be patched)

    def add(self, ind, text):
        entry = [ind, text]
        self.lines.append(entry)
        return entry


def _float_literal(x):
    if x != x:
        return "_NAN"
    if x == math.inf:
        return "_INF"
    if x == -math.inf:
        return "(-_INF)"
    return repr(x)


class FunctionCode:
    """A compiled Bril function: blocks, variables, types and the generated source.

    Two typings: `types` assumes every pointer parameter declared `ptr<K>` (K a
    primitive type) points into a region of K (the common case, which lets loads
    through it skip run-time checks), and every `any` parameter holds the one kind
    of value the calls the cold tier ran passed it (`assumed_kinds`: what a dynamic
    language's function is called with); `generic_types` assumes nothing.  The
    normal function tests the assumptions on entry and, if one fails, runs the
    generic variant instead (compiled on first use); a function whose assumptions
    keep failing is bound to its generic variant for the rest of the run
    (`CompiledProgram.miss`).
    """

    def __init__(self, index, func, program):
        self.index = index
        self.func = func
        self.name = func.get("name", "")
        self.pyname = function_name(index, self.name)
        self.program = program          # the CompiledProgram this belongs to (for callees)
        shape = program.function_shape(index) if program is not None else FunctionShape(func)
        self.blocks_by_index = shape.blocks_by_index
        self.params = [p.get("name") for p in (func.get("args") or [])]
        self.generic_types = tc.infer(func, self.blocks_by_index)
        self.has_phi = any(i["op"] == "phi" for b in self.blocks_by_index for i in b.instrs)
        self.blocks, self.root, self.loops = shape.blocks, shape.root, shape.loops
        self.assumed_regions = self._assumable_params()
        self.assumed_kinds = self._observed_kinds()
        # ("ptr:K": a pointer into a region of K, as `assumed_regions` says of typed ones)
        assumed = {p: frozenset({"ptr:" + k}) for p, k in self.assumed_regions}
        assumed.update({p: frozenset({k}) for p, k in self.assumed_kinds})
        # (what the cold tier saw at loop headers: kept, the cache key holds it)
        self.loop_seen = program.loop_kinds_seen(index) if program is not None else ()
        self._assumed = assumed
        self.header_kinds, self.types = self._typed_loops(assumed)
        self._osr_types = self._param_types = None
        self.variables = sorted({k for k in self.generic_types.spec_vars if isinstance(k, str)}
                                | set(self.params))
        self.label_ids = {}
        self._sources = {}
        self._inlinable = None
        self._site_types = {}       # `types_for_site`, by the site's argument tags
        self._cfg_names = None

    def _loop_kinds(self):
        """{loop header: {variable: kind}}: the variables worth assuming of one kind at
        a loop's header -- certainly assigned there but of several kinds or unknown
        (an `any` value that enters the loop), and used in the loop as operands of
        that one kind only (`fadd k one` and `fgt k zero`, never an `add`), else of
        the kind the cold tier saw there (`loop_seen`; an accumulator that is an
        int in one phase of the run and a float in another)."""
        gt = self.generic_types
        if not gt.precise or gt.has_spec or self.has_phi or not self._speculates():
            return {}
        seen = dict(self.loop_seen)
        out = {}
        for loop in self.loops:
            st = gt.block_in[loop.header] if loop.header != 0 else None
            if st is None or all(len(t) == 1 and "?" not in t for t in st.types.values()):
                continue            # (every variable's kind known there: typed code)
            used = {}
            for bi in loop.body:
                for instr in self.blocks_by_index[bi].instrs:
                    info = OPS.get(instr["op"])
                    if info is None or info.args is None:
                        continue
                    for a, k in zip(instr.get("args") or (), info.args):
                        used.setdefault(a, set()).add(k)
            found = {}
            saw = dict(seen.get(loop.header, ()))
            for var, tags in st.types.items():
                if not isinstance(var, str) or var not in st.bound:
                    continue
                kinds = used.get(var)
                k = next(iter(kinds)) if kinds and len(kinds) == 1 else saw.get(var)
                if k in tc.PRIMS and tags != {k} and (k in tags or "?" in tags):
                    found[var] = k
            if found:
                out[loop.header] = found
        return out

    def _typed_loops(self, assumed, rounds=3):
        """(header kinds, typing): the typing assuming `assumed` of parameters and, at
        loop headers, the kinds of `_loop_kinds`.  Edges into a header check what
        they cannot prove (`FunctionTypes.edge_checks`): those entering the loop,
        and back edges that may bring another kind (the phase change of sum-check's
        loop); a failed check leaves the code (`CompiledProgram.deopt`).  A kind
        every edge into the header would fail is not assumed."""
        headers = self._loop_kinds()
        for _ in range(rounds):
            if not headers and not assumed:
                return {}, self.generic_types
            types = tc.infer(self.func, self.blocks_by_index, assumed or None, {
                h: {v: frozenset((k,)) for v, k in vs.items()} for h, vs in headers.items()})
            if not types.precise:
                break
            bad = self._hopeless(types, headers)
            if not bad:
                return headers, types
            for h, var in bad:
                headers[h].pop(var, None)
                if not headers[h]:
                    del headers[h]
        return {}, (tc.infer(self.func, self.blocks_by_index, assumed)
                    if assumed else self.generic_types)

    def _hopeless(self, types, headers):
        """[(header, variable)]: the kinds assumed that every edge into the header
        would fail to find (pointless: each arrival would leave the code)."""
        fails = types.edge_fails
        if not fails:
            return []
        preds = {}
        for b in self.blocks_by_index:
            for t in b.succs:
                preds.setdefault(t, set()).add(b.index)
        return [(h, var) for h, vs in headers.items() for var in vs
                if all((src, h, var) in fails for src in preds.get(h, ()))]

    @property
    def param_types(self):
        """The typing assuming what `types` assumes of parameters, no kinds at loop
        headers."""
        if not self.header_kinds:
            return self.types
        if self._param_types is None:
            self._param_types = tc.infer(self.func, self.blocks_by_index, self._assumed) \
                if self._assumed else self.generic_types
        return self._param_types

    @property
    def osr_types(self):
        """The typing of the osr variants: `types` if they may assume what it assumes
        of parameters (`osr_typed`), else the loop headers' kinds alone."""
        if self.osr_typed or not self.header_kinds:
            return self.types if self.osr_typed else self.generic_types
        if not self._assumed:
            return self.types           # (it assumes nothing of parameters)
        if self._osr_types is None:
            self._osr_types = tc.infer(self.func, self.blocks_by_index, None, {
                h: {v: frozenset((k,)) for v, k in vs.items()}
                for h, vs in self.header_kinds.items()})
            if self._hopeless(self._osr_types, self.header_kinds):
                self._osr_types = self.generic_types
        return self._osr_types

    def header_tests(self, header, names):
        """Python tests true when a variable fails its kind assumed at loop header
        `header` (`names(var)`: its Python expression)."""
        return [f"type({names(v)}) is not {PY_TYPES[k].__name__}"
                for v, k in sorted(self.header_kinds.get(header, {}).items())]

    def _assumable_params(self):
        """[(param, element kind)] worth assuming: only if the function accesses memory."""
        if not self._speculates():
            return []
        if not any(i["op"] in ("load", "store") for b in self.blocks_by_index
                   for i in b.instrs):
            return []
        if len(set(self.params)) != len(self.params):
            return []
        out = []
        for p in self.func.get("args") or []:
            typ = p.get("type")
            if isinstance(typ, dict) and typ.get("ptr") in tc.PRIMS:
                out.append((p["name"], typ["ptr"]))
        return out

    def _speculates(self):
        return getattr(self.program, "speculate_types", True)

    def _observed_kinds(self):
        """[(param, kind)]: the `any` parameters the calls the cold tier ran all passed
        one scalar kind (int, bool, float, char), if assuming it can spare a check:
        the function uses the parameter as an operand of a typed op."""
        seen = self.program.observed_kinds(self.index) if self.program is not None else {}
        if not seen or len(set(self.params)) != len(self.params):
            return []
        used = set()
        for b in self.blocks_by_index:
            for instr in b.instrs:
                info = OPS.get(instr["op"])
                if info is not None and info.args is not None:
                    used.update(instr.get("args") or ())
        return [(p, seen[p]) for p in self.params if seen.get(p) and p in used]

    @property
    def assumes(self):
        """[(param, test)]: the entry tests of what `types` assumes of parameters, as
        Python expressions true when an assumption fails."""
        out = [(p, heapmod.region_kind_mismatch(var_name(p), k)) for p, k in self.assumed_regions]
        for p, k in self.assumed_kinds:
            v = var_name(p)
            if k.startswith("ptr:"):
                bits = heapmod.kind_bits("any" if k == "ptr:any" else
                                         {"ptr": "int"} if k == "ptr:ptr" else k[4:])
                out.append((p, f"type({v}) is not tuple or {v}[2].accepts != {bits}"))
            else:
                out.append((p, f"type({v}) is not {PY_TYPES[k].__name__}"))
        return out

    def types_for_site(self, arg_tags):
        """The typing of a copy inlined at a call site passing values of `arg_tags`
        (per parameter: tags, or None) -- its `any` parameters' tags from there;
        the generic typing if the site knows nothing more."""
        assumed = {p: t for p, t in zip(self.params, arg_tags)
                   if t is not None and t != tc.TOP}
        if not assumed:
            return self.generic_types
        key = tuple(sorted((p, tuple(sorted(t))) for p, t in assumed.items()))
        memo = self._site_types
        found = memo.get(key)
        if found is None:
            found = memo[key] = tc.infer(self.func, self.blocks_by_index, assumed)
        return found

    @property
    def inlinable(self):
        """True if calls to this function may be replaced by its code: loop-free and
        tree-shaped (every block but the entry has one predecessor), small, no
        speculation or SSA ops, no read of a possibly unassigned variable (the
        copy's locals outlive one call), distinct parameter names."""
        if self._inlinable is None:
            self._inlinable = self._check_inlinable()
        return self._inlinable

    def _check_inlinable(self):
        blocks = self.blocks
        if self.loops or len(blocks) > INLINE_MAX_BLOCKS or len(set(self.params)) != len(self.params):
            return False
        if not self.generic_types.precise:
            return False
        preds = {}
        for b in blocks:
            for t in b.succs:
                preds.setdefault(t, set()).add(b.index)
            if b.abort_succ is not None:
                return False
        if preds.get(0) or any(len(preds.get(b.index, ())) != 1 for b in blocks[1:]):
            return False
        size = 0
        for b in blocks:
            for instr in b.instrs:
                size += 1
                if instr["op"] in _NOT_INLINED_OPS:
                    return False
                if any(self.generic_types.arg_unbound.get(id(instr), ())):
                    return False
        return size <= INLINE_MAX_INSTRS

    # --- public helpers for tracers / native engines -----------------------------------

    def block_vars(self, lid):
        """{variable: inferred tags} at entry of block `lid` (None if unreachable);
        generic typing (what the entry variant assumes)."""
        st = self.generic_types.block_in[self.blocks[lid].index]
        return None if st is None else {k: v for k, v in st.types.items() if isinstance(k, str)}

    @property
    def returns(self):
        """What the function can return (sound for every variant)."""
        return self.generic_types.returns

    def source(self):
        """The normal function `pyname(params...)`."""
        return self._source("normal")

    def generic_source(self):
        """`pyname__generic(params...)`: no assumption about pointer parameters."""
        return self._source("generic")

    def entry_source(self):
        """`pyname__entry(_b, _vars)`: start at block `_b` with the variables in `_vars`."""
        return self._source("entry")

    def jit_source(self):
        """`pyname__jit(params...)`: the normal function plus, at each loop header, a
        hook that counts arrivals and enters native code (`brili --jit`,
        `bril.backend.jit`); when native code hands control back, the call goes on in
        `pyname__jitx(_b, _r)` -- block `_b` (a layout id), the frame's
        variables in the dict `_r` (keys: Python local names) -- the generic
        variant in which every block is reachable through the dispatch variable,
        with the same hooks."""
        return self._source("jit") + self._source("jitx")

    def record_source(self):
        """`pyname__record(params...)`: the generic variant reporting to a trace
        recorder: `_RE(function, arguments)` on entry, `_RB(function, block)` at every basic
        block (named as `bril.analysis.cfg.CFG` names it), `_RL()` on return.  Calls go to
        the callees' record variants and are never inlined."""
        return self._source("record")

    @property
    def cfg_names(self):
        """{index of a block's first instruction (its label if any): CFG block name}."""
        if self._cfg_names is None:
            from ..analysis.cfg import block_names
            self._cfg_names = block_names(self.func.get("instrs") or [])
        return self._cfg_names

    def osr_source(self, header):
        """`pyname__osr<lid>(_vars)`: the function entered at the loop header block
        `header` (a block index, see `osr_headers`) with the variables of the dict
        `_vars` (keys as in `entry_source`; `2`/`3`: the current/previous label id
        for phi).  On-stack replacement: a running activation moves here from the
        cold tier (`bril.interpreter.cold`).  Generic typing (the inferred state at a header
        holds for every state that reaches it); the loops around the header keep
        their dispatch tests, everything else is compiled as in `source()`."""
        return self._source(("osr", header))

    def osr_record_source(self, header):
        """`pyname__osrrecord<lid>(_vars)`: `osr_source` reporting to a trace recorder
        as `record_source` does (no `_RE`: the cold tier reported the entry of the
        activation that moves here; the header's `_RB` is reported here)."""
        return self._source(("osrrecord", header))

    def osr_name(self, header):
        return variant_name(self.index, self.name, "osr", header)

    @property
    def osr_typed(self):
        """True if an osr variant may assume what `source()` assumes of pointer
        parameters: only when they are never reassigned, so that their values at
        the header are the ones the function was called with (tested on entry)."""
        if not (self.assumed_regions or self.assumed_kinds):
            return False
        names = {p for p, _ in self.assumed_regions + self.assumed_kinds}
        return not any(i.get("dest") in names for b in self.blocks_by_index for i in b.instrs)

    @property
    def osr_headers(self):
        """Block indices where `osr_source` can enter: headers of laid-out loops."""
        return {l.header for l in self.loops}

    def defname(self, variant, osr=None):
        """The Python name a variant's source defines."""
        return variant_name(self.index, self.name, variant, osr)

    def _source(self, variant):
        return self.source_and_links(*(variant if isinstance(variant, tuple) else (variant,)))[0]

    def source_and_links(self, variant, osr=None):
        """(source, Links) of a variant (`osr`: the header block of an osr variant)."""
        key = (variant, osr)
        found = self._sources.get(key)
        if found is None:
            cls = _EMITTERS[variant]
            emitter = cls(self) if osr is None else cls(self, osr)
            found = self._sources[key] = (emitter.emit(), emitter.links)
        return found


class _Emitter:
    """Writes the Python source of one variant of a function; this base writes the
    generic variant, and the subclasses after it the others (`_EMITTERS`), each
    overriding the class attributes and hooks (`emit_head`, `emit_inputs`, ...)
    where its variant differs.

    Instruction counts are kept pending at compile time along each straight path
    of inlined blocks and added to `_n` once where the path leaves (a jump to a
    dispatched block, a return); in the entry block's prefix (before the dispatch
    loop) they are constants."""

    # What distinguishes the variants; each subclass below overrides some of these.
    variant = "generic"         # the name of the function defined (`pynames.variant_name`)
    osr = None                  # osr variants: the header block entered
    osr_outer = frozenset()     # osr variants: ids of the loops around the header's loop
    enter_anywhere = False      # every block keeps its dispatch test (entered at any `_b`)
    entry_block_first = True    # the entry block, if nothing jumps to it, runs before the loop
    inlines_calls = True        # small callees' code replaces calls to them
    call_suffix = ""            # the callees' variant called
    deopt_variant = "deopt"     # where a failed loop-header check goes on (resume variant)

    def __init__(self, fc):
        self.start(fc, self.typing(fc), _Lines(), None)

    def start(self, fc, types, out, links):
        self.fc = fc
        self.types = types
        self.out = out
        self.var_prefix = "v_"              # `w<site>_` for a callee inlined at a call site
        self.inline_result = None           # inlined callee: the local its `ret` sets
        self.depth = 0                      # inlining depth
        self.sites = [0]                    # [instrs inlined, site callees...]
        self.chain = (fc.index,)            # functions being inlined
        self.emitted = set()            # block indices already emitted
        self.preds = self._preds()
        self.tmp = 0
        self.has_spec = self.types.has_spec
        self.dirty = set()              # ids of loops whose header needs a dispatch test
        self.seth_lines = {}            # loop id -> ['_b = header' lines to drop if clean]
        self.chain_pos = -1             # layout id of the chain member being emitted
        self.cached_ptr = None          # pointer variable the _hd/_ho/_hr temps hold
        self.inline_chain = 0           # blocks being emitted inside one another
        self.loop_lines = []            # jit variants: (first, last line entry, header)
        # what the code needs bound (shared with the emitters of inlined callees)
        self.links = links if links is not None else self.new_links()
        # Checking mode (see emit_fact_checks): read once per program, when it is compiled.
        self.check_facts = getattr(fc.program, "check_facts", None)
        if self.check_facts is None:
            self.check_facts = check_facts_requested()

    def typing(self, fc):
        """The typing the variant's code relies on (generic: assumes nothing)."""
        return fc.generic_types

    def new_links(self):
        links = Links(self.fc.defname(self.variant, self.osr))
        if self.fc.has_phi:
            links.label_ids = self.fc.label_ids
        return links

    def _preds(self):
        preds = {}
        for b in self.fc.blocks:
            for s in b.succs:
                preds.setdefault(s, []).append(b.index)
            if b.abort_succ is not None:
                preds.setdefault(b.abort_succ, []).append(-1)   # never inline abort targets
        return preds

    def new_tmp(self):
        self.tmp += 1
        return f"_t{self.tmp}" if self.inline_result is None else f"_t{self.tmp}{self.var_prefix}"

    def v(self, name):
        """The Python local of Bril variable `name` in the code being emitted."""
        return self.var_prefix + _escape(name)

    # --- whole function -----------------------------------------------------------------

    def emit(self):
        fc = self.fc
        o = self.out
        params = []
        seen = set()
        for p in reversed(fc.params):
            n = var_name(p)
            params.append(n if n not in seen else f"_dup{len(params)}")
            seen.add(n)
        params.reverse()
        o.add(0, f"def {self.links.defname}({self.signature(params)}):")
        o.add(1, "global _N")
        self.emit_head(params)
        if self.has_spec:
            o.add(1, "_spec = []")
        if fc.has_phi:
            o.add(1, self.phi_start)
        self.emit_inputs()
        root = fc.root
        items = list(root.items)
        entry_block = fc.blocks_by_index[0]
        if self.entry_block_first and items and items[0] is entry_block \
                and not self.preds.get(0):
            # The entry block runs once: before the dispatch loop, counting statically.
            self.emit_block(entry_block, 1, root, 0, prefix=True)
            items = items[1:]
        else:
            o.add(1, "_n = 0")
            self.emit_start()
        if items:
            o.add(1, "while True:")
            self.emit_chain(root, items, 2)
        if self.loop_lines:
            # Which loop a line of this code is in (innermost last), for the JIT's
            # sampler: (first line, last line, header block).
            where = {id(e): n + 1 for n, e in enumerate(o.lines)}
            self.links.info["loops"] = [(where[id(a)], where[id(b)], h)
                                        for a, b, h in self.loop_lines]
        return "\n".join("    " * e[0] + e[1] for e in o.lines) + "\n"

    # Hooks of the variants (the generic variant's behaviour here).

    phi_start = "_lb = _pl = None"      # phi's current and previous label ids

    def signature(self, params):
        return ", ".join(params)

    def emit_head(self, params):
        """First lines of the function, before its state is set up."""

    def emit_inputs(self):
        """Variables handed over by whoever enters the function mid-way."""

    def emit_start(self):
        """Where the dispatch loop starts (when the entry block does not run first)."""
        self.out.add(1, "_b = 0")

    def emit_vars(self):
        """Take the variables (and ssa2 shadows) of the dict `_vars` (entry, osr)."""
        o = self.out
        for v in self.fc.variables:
            o.add(1, f"if {v!r} in _vars: {var_name(v)} = _vars[{v!r}]")
        for k in sorted(self.types.spec_vars, key=str):
            if isinstance(k, tuple):
                o.add(1, f"if {('shadow', k[1])!r} in _vars: "
                         f"{shadow_name(k[1])} = _vars[{('shadow', k[1])!r}]")

    def emit_header_hook(self, loop, ind):
        """At the top of a loop's header block."""

    def note_loop(self, top, bottom, loop):
        """A loop's code spans the lines from `top` to `bottom`."""

    def emit_block_event(self, b, ind):
        """At the top of every basic block."""

    def emit_leave(self, ind):
        """Just before a `return` from the function."""

    def emit_chain(self, region, items, ind):
        o = self.out
        start = len(o.lines)
        for it in items:
            if isinstance(it, LayoutLoop):
                self.emit_loop(it, ind)
                continue
            if it.index in self.emitted:
                continue
            o.add(ind, f"if _b == {it.lid}:")
            self.chain_pos = it.lid
            self.emit_block(it, ind + 1, region, 0)
        if len(o.lines) == start:
            o.add(ind, "pass")

    def emit_loop(self, loop, ind):
        o = self.out
        around_osr = id(loop) in self.osr_outer
        if self.enter_anywhere or around_osr:
            o.add(ind, f"if {loop.lo} <= _b <= {loop.hi}:")
        else:
            o.add(ind, f"if _b == {self.fc.blocks_by_index[loop.header].lid}:")
        top = o.add(ind + 1, "while True:")
        self.seth_lines[id(loop)] = []
        header = self.fc.blocks_by_index[loop.header]
        guard = o.add(ind + 2, f"if _b == {header.lid}:")
        hstart = len(o.lines)
        self.chain_pos = header.lid
        self.emit_header_hook(loop, ind + 3)
        self.emit_block(header, ind + 3, loop, 0)
        hend = len(o.lines)
        for it in loop.items:
            if it is header:
                continue
            if isinstance(it, LayoutLoop):
                self.emit_loop(it, ind + 2)
            elif it.index not in self.emitted:
                o.add(ind + 2, f"if _b == {it.lid}:")
                self.chain_pos = it.lid
                self.emit_block(it, ind + 3, loop, 0)
        # Falling off the end of the loop body: leave the loop unless the target is
        # inside it (then go round to find it).
        bottom = o.add(ind + 2, f"if _b < {loop.lo} or _b > {loop.hi}: break")
        self.note_loop(top, bottom, loop)
        if not self.enter_anywhere and id(loop) not in self.dirty and not around_osr:
            # Every arrival at the top is for the header: drop its dispatch test.
            guard[1] = None
            for entry in o.lines[hstart:hend]:
                entry[0] -= 1
            for entry in self.seth_lines[id(loop)]:
                entry[1] = None
            o.lines[:] = [e for e in o.lines if e[1] is not None]

    # --- blocks -------------------------------------------------------------------------

    def emit_block(self, b, ind, region, pending, prefix=False):
        """Emit block b (and the blocks inlined into it) at indentation ind;
        `pending`: instructions executed on this path and not yet added to _n."""
        o = self.out
        self.emitted.add(b.index)
        self.cached_ptr = None
        fc = self.fc
        self.emit_block_event(b, ind)
        if fc.has_phi and b.label is not None:
            lid = fc.label_ids.setdefault(b.label, len(fc.label_ids))
            o.add(ind, f"_pl = _lb; _lb = {lid}")
        if self.check_facts:
            self.emit_fact_checks(ind, block=b)
        pending += b.size
        term = b.term
        body = b.instrs[:-1] if term is not None else b.instrs
        for instr in body:
            self.emit_instr(instr, ind)
        ctx = (region, b, prefix)
        if term is None:
            if b.falls_off:
                self.emit_return(None, ind, pending, prefix, implicit=True)
            else:
                self.emit_transfer(b.succs[0], ind, ctx, pending)
            return
        op = term["op"]
        if op == "ret":
            self.emit_ret(term, ind, pending, prefix)
        elif op == "jmp":
            if self.emit_argcount(term, ind):
                self.emit_transfer(b.targets[0], ind, ctx, pending)
        elif op == "br":
            self.emit_br(term, b, ind, ctx, pending)
        elif op == "guard":
            self.emit_guard(term, b, ind, ctx, pending)
        else:
            raise AssertionError(op)

    def can_inline(self, t, region, ind):
        if self.enter_anywhere or not isinstance(t, int) or t == 0 or t in self.emitted:
            return False
        blk = self.fc.blocks_by_index[t]
        preds = self.preds.get(t, [])
        if len(set(preds)) != 1 or -1 in preds:
            return False
        if blk.loop is not (region if region is not self.fc.root else None):
            return False
        if blk.loop is not None and blk.loop.header == t:
            return False
        if self.inline_result is not None:
            return True         # an inlined callee is small and tree-shaped
        return ind <= MAX_INLINE_INDENT and self.inline_chain < MAX_INLINE_CHAIN

    def transfer_kind(self, t, ind, ctx):
        """How control reaches t: 'raise', 'inline', 'fall', 'continue' or 'break'."""
        if not isinstance(t, int):
            return "raise"
        region, src, prefix = ctx
        if self.can_inline(t, region, ind):
            return "inline"
        if self.inline_result is not None:
            # An inlined callee is tree-shaped: it has no other transfers (and may
            # not touch the caller's `_n`).
            raise AssertionError(f"cannot inline @{self.fc.name}")
        if prefix:
            return "fall"
        tb = self.fc.blocks_by_index[t]
        if region.lo <= tb.lid <= region.hi:
            return "fall" if tb.lid > self.chain_pos else "continue"
        return "break"

    def flush(self, pending, ind, prefix):
        """Add the pending count to _n before leaving the inlined path."""
        if prefix:
            self.out.add(ind, f"_n = {pending}")
        elif pending:
            self.out.add(ind, f"_n += {pending}")

    def emit_transfer(self, t, ind, ctx, pending):
        """Emit a jump to t (block index or error message); True if the code emitted
        ends in a jump statement (continue/break/return/raise) or a nested
        block's own transfer."""
        o = self.out
        region, src, prefix = ctx
        kind = self.transfer_kind(t, ind, ctx)
        if kind == "raise":
            o.add(ind, f"raise _E({t!r})")
            return True
        tb = self.fc.blocks_by_index[t]
        if kind == "inline":
            self.inline_chain += 1
            self.emit_block(tb, ind, region, pending, prefix)
            self.inline_chain -= 1
            return True
        self.flush(pending, ind, prefix)
        self.emit_edge_checks(src, tb, ind)
        if kind == "fall":
            o.add(ind, f"_b = {tb.lid}")
            return False
        if kind == "continue":
            line = o.add(ind, f"_b = {tb.lid}")
            if tb.index == region.header and not self.enter_anywhere:
                self.seth_lines[id(region)].append(line)
            elif region is not self.fc.root:
                self.dirty.add(id(region))
            o.add(ind, "continue")
            return True
        o.add(ind, f"_b = {tb.lid}")
        o.add(ind, "break")
        self.note_exit(region, tb)
        return True

    def emit_edge_checks(self, src, tb, ind):
        """On an edge into a loop header whose assumed kinds it cannot prove
        (`FunctionCode._typed_loops`): test them, and if one fails go on in generic
        code at the header (this frame's variables handed over; counted first)."""
        checks = self.types.edge_checks.get((src.index, tb.index)) if src is not None else None
        if not checks:
            return
        tests = " or ".join(f"type({self.v(v)}) is not {PY_TYPES[k].__name__}"
                            for v, k in checks)
        self.out.add(ind, f"if {tests}:")
        self.out.add(ind + 1, "_N += _n")
        self.out.add(ind + 1, f"return {self.links.variant(self.fc.index, self.deopt_variant)}"
                              f"({tb.index}, {tb.lid}, locals())")

    def note_exit(self, region, tb):
        """A `break` from `region` to block tb lands after region's loop in its parent."""
        parent = region.parent or self.fc.root
        while True:
            if parent.lo <= tb.lid <= parent.hi:
                if tb.lid > region.hi:
                    return                  # found further down the parent's chain
                if parent is not self.fc.root and tb.index != parent.header:
                    self.dirty.add(id(parent))
                return
            # leaves the parent too (through its end-of-body test)
            region, parent = parent, parent.parent or self.fc.root

    def emit_br(self, term, b, ind, ctx, pending):
        o = self.out
        if not self.emit_argcount(term, ind):
            return
        cond = self.operand(term, 0, "bool")
        t, f = b.targets
        if t == f:
            o.add(ind, cond)    # still evaluated (undefined variable, type check)
            self.emit_transfer(t, ind, ctx, pending)
            return
        kt = self.transfer_kind(t, ind + 1, ctx)
        kf = self.transfer_kind(f, ind + 1, ctx)
        checked = self.types.edge_checks
        if kt == "fall" and kf == "fall" and not (
                checked and ((b.index, t) in checked or (b.index, f) in checked)):
            self.flush(pending, ind, ctx[2])
            o.add(ind, f"_b = {self.lid(t)} if {cond} else {self.lid(f)}")
            return
        cache = self.cached_ptr
        if kf == "inline" and kt != "inline":
            # `if c: <jump>` and the inlined side at this level (less nesting)
            o.add(ind, f"if {cond}:")
            ends = self.emit_transfer(t, ind + 1, ctx, pending)
            self.cached_ptr = cache
            if not ends:
                o.add(ind, "else:")
                ind += 1
            self.emit_transfer(f, ind, ctx, pending)
            return
        o.add(ind, f"if {cond}:")
        self.emit_transfer(t, ind + 1, ctx, pending)
        self.cached_ptr = cache
        o.add(ind, "else:")
        self.emit_transfer(f, ind + 1, ctx, pending)

    def lid(self, t):
        return self.fc.blocks_by_index[t].lid

    def emit_guard(self, term, b, ind, ctx, pending):
        o = self.out
        if not self.emit_argcount(term, ind):
            return
        cond = self.operand(term, 0, "bool")
        target = b.targets[0]
        cache = self.cached_ptr
        o.add(ind, f"if not {cond}:")
        if isinstance(target, str) and not target.startswith("label "):
            o.add(ind + 1, f"raise _E({target!r})")     # missing label: before the state check
            ends = True
        else:
            o.add(ind + 1, f"if not _spec: raise _E({M.ABORT_OUTSIDE!r})")
            self.emit_restore(ind + 1)
            ends = self.emit_transfer(target, ind + 1, ctx, pending)
        self.cached_ptr = cache
        if not ends:
            o.add(ind, "else:")
            ind += 1
        if b.falls_off:
            self.emit_return(None, ind, pending, ctx[2], implicit=True)
        else:
            self.emit_transfer(b.succs[0], ind, ctx, pending)

    # --- speculation ---------------------------------------------------------------------

    def snapshot_vars(self):
        keys = sorted(self.types.snapshot_keys, key=lambda k: (isinstance(k, tuple), str(k)))
        bound = set() if self.enter_anywhere else self.types.spec_bound
        sure = [k for k in keys if k in bound]
        maybe = [k for k in keys if k not in bound]
        return sure, maybe

    def emit_snapshot(self, ind):
        o = self.out
        sure, maybe = self.snapshot_vars()
        names = [_key_pyname(k) for k in sure]
        for i, k in enumerate(maybe):
            o.add(ind, "try:")
            o.add(ind + 1, f"_sv{i} = {_key_pyname(k)}")
            o.add(ind, "except NameError:")
            o.add(ind + 1, f"_sv{i} = _UNB")
            names.append(f"_sv{i}")
        o.add(ind, f"_spec.append(({', '.join(names)}{',' if len(names) == 1 else ''}))")

    def emit_restore(self, ind):
        o = self.out
        sure, maybe = self.snapshot_vars()
        names = [_key_pyname(k) for k in sure] + [f"_sv{i}" for i in range(len(maybe))]
        if names:
            o.add(ind, f"({', '.join(names)}{',' if len(names) == 1 else ''}) = _spec.pop()")
        else:
            o.add(ind, "_spec.pop()")
        for i, k in enumerate(maybe):
            n = _key_pyname(k)
            o.add(ind, f"if _sv{i} is _UNB:")
            o.add(ind + 1, "try:")
            o.add(ind + 2, f"del {n}")
            o.add(ind + 1, "except NameError:")
            o.add(ind + 2, "pass")
            o.add(ind, "else:")
            o.add(ind + 1, f"{n} = _sv{i}")
        self.cached_ptr = None

    # --- returns -------------------------------------------------------------------------

    def emit_return(self, value, ind, pending, prefix, implicit=False):
        o = self.out
        if self.inline_result is not None:
            # An inlined callee: count its instructions and hand the value back.
            if pending:
                o.add(ind, f"_N += {pending}")
            o.add(ind, f"{self.inline_result} = {value}")
            return
        if self.has_spec:
            msg = M.IMPLICIT_RETURN_IN_SPECULATION if implicit else M.RET_IN_SPECULATION
            o.add(ind, f"if _spec: raise _E({msg!r})")
        if prefix:
            if pending:
                o.add(ind, f"_N += {pending}")
        else:
            o.add(ind, f"_N += _n + {pending}" if pending else "_N += _n")
        self.emit_leave(ind)
        o.add(ind, f"return {value}")

    def emit_ret(self, instr, ind, pending, prefix):
        args = instr.get("args") or []
        if len(args) > 1:
            if self.has_spec:
                self.out.add(ind, f"if _spec: raise _E({M.RET_IN_SPECULATION!r})")
            self.out.add(ind, f"raise _E({M.text(M.RET_ARGCOUNT, found=len(args))!r})")
            return
        self.emit_return(self.v(args[0]) if args else "None", ind, pending, prefix)

    # --- instructions --------------------------------------------------------------------

    def emit_argcount(self, instr, ind):
        op = instr["op"]
        count = ARG_COUNTS.get(op)
        if op not in OPS:
            self.out.add(ind, f"raise _E({M.text(M.UNKNOWN_OPCODE, op=op)!r})")
            return False
        if count is not None:
            found = len(instr.get("args") or [])
            if found != count:
                self.out.add(ind, f"raise _E({argcount_message(op, count, found)!r})")
                return False
        return True

    def operand(self, instr, i, kind):
        """Expression for argument i of instr, checked to be of `kind` unless certain."""
        name = instr["args"][i]
        v = self.v(name)
        if kind is None or tc.only(self.arg_tags(instr, i), kind):
            return v
        return checked_expr(v, kind, operand_message(instr["op"], i, kind))

    def arg_tags(self, instr, i):
        tags = self.types.arg_tags.get(id(instr), ())
        return tags[i] if i < len(tags) else tc.TOP

    def dest(self, instr):
        d = instr.get("dest")
        return self.v(d) if isinstance(d, str) else "_"

    def emit_instr(self, instr, ind):
        o = self.out
        op = instr["op"]
        if op == "const":
            self.emit_const(instr, ind)
        elif not self.emit_argcount(instr, ind):
            return
        else:
            if self.has_spec and op == "call":
                o.add(ind, f"if _spec: raise _E({M.CALL_IN_SPECULATION!r})")
            info = OPS[op]
            if info.py is not None:
                args = [self.operand(instr, i, k if k in CHECKERS else None)
                        for i, k in enumerate(info.args)]
                d = self.dest(instr)
                tmpl = info.py
                if tmpl.startswith(_WRAP_PREFIX) and tmpl.endswith(")"):
                    # Inline the wrap-around as a range test, one-sided or none where
                    # the operands' inferred bounds allow (bril.analysis.typecheck).
                    inner = tmpl[len(_WRAP_PREFIX):-1].format(*args)
                    o.add(ind, f"{d} = {inner}")
                    check = self.types.wrap_checks.get(id(instr), "both")
                    if self.check_facts and check != "both":
                        self.emit_fact_checks(ind, instr, wrap=check)
                    if check == "both":
                        o.add(ind, f"if not {INT_MIN} <= {d} <= {INT_MAX}: {d} = wrap64({d})")
                    elif check == "upper":
                        o.add(ind, f"if {d} > {INT_MAX}: {d} = wrap64({d})")
                    elif check == "lower":
                        o.add(ind, f"if {d} < {INT_MIN}: {d} = wrap64({d})")
                elif info.py_nonneg is not None:
                    if self.check_facts:
                        self.emit_fact_checks(ind, instr, args=args)
                    o.add(ind, f"{d} = {self.nonneg_expr(instr, info, args)}")
                else:
                    o.add(ind, f"{d} = {tmpl.format(*args)}")
            else:
                getattr(self, "op_" + op)(instr, ind)
        d = instr.get("dest")
        if self.cached_ptr is not None and isinstance(d, str) \
                and self.v(d) == self.cached_ptr and op not in ("ptradd",):
            self.cached_ptr = None

    def nonneg_expr(self, instr, info, args):
        """The op's cheap template where its operands are proven non-negative (and
        positive divisors), else with a run-time test for the unproven ones, else
        (operands with checks) the general template."""
        proven = self.types.nonneg.get(id(instr), ())
        tests = [f"{a} >= 0" if i == 0 else f"{a} > 0"
                 for i, a in enumerate(args) if not (i < len(proven) and proven[i])]
        if not tests:
            return info.py_nonneg.format(*args)
        if all(a.startswith(self.var_prefix) for a in args):
            return (f"({info.py_nonneg.format(*args)} if {' and '.join(tests)} "
                    f"else {info.py.format(*args)})")
        return info.py.format(*args)

    def emit_fact_checks(self, ind, instr=None, block=None, wrap=None, args=()):
        """Checking mode (`BRIL_CHECK_FACTS=1`, or `bril.interpreter.interp.run(...,
        check_facts=True)`): the code asserts every range fact of `bril.analysis.typecheck`
        it relies on, and a violated one raises `internal error: range fact
        violated: @FUNCTION: WHERE: FACT (got VALUE)` (`_RF`).  Without the mode
        nothing is emitted.  Called

        * at the entry of `block`: every int variable certainly assigned there
          lies in its inferred range (`block_in`);
        * with `wrap` ('none'|'upper'|'lower'), after an add/sub/mul whose exact
          result was stored: it lies on the side(s) of the 64-bit range whose
          wrap-around test was dropped;
        * with `args`, before a `div` that may compile to `//`: each operand
          proven non-negative (dividend) or positive (divisor) is (operands
          possibly unassigned are not read: the division reports them)."""
        o = self.out
        fname = self.fc.name
        if block is not None:
            st = self.types.block_in[block.index] if self.types.precise else None
            if st is None:
                return
            where = f"entry of .{block.label}" if block.label is not None \
                else f"entry of block {block.index}"
            for var in sorted(k for k in st.ranges if isinstance(k, str)):
                if var in st.bound and st.types.get(var) == {"int"}:
                    lo, hi = st.ranges[var]
                    v = self.v(var)
                    o.add(ind, f"if not {lo} <= {v} <= {hi}: "
                               f"_RF({f'@{fname}: {where}: {var} in [{lo}, {hi}]'!r}, {v})")
            return
        try:
            from ..ir.printer import format_instr
            text = f"@{fname}: `{format_instr(instr)}`"
        except Exception:                   # a malformed instruction: its JSON
            text = f"@{fname}: {instr!r}"
        if wrap is not None:
            d = self.dest(instr)
            test = {"none": f"not {INT_MIN} <= {d} <= {INT_MAX}",
                    "upper": f"{d} < {INT_MIN}", "lower": f"{d} > {INT_MAX}"}[wrap]
            fact = {"none": "no wrap-around", "upper": "no wrap-around below",
                    "lower": "no wrap-around above"}[wrap]
            o.add(ind, f"if {test}: _RF({f'{text}: {fact}'!r}, {d})")
            return
        proven = self.types.nonneg.get(id(instr), ())
        unbound = self.types.arg_unbound.get(id(instr), ())
        for i, (a, least) in enumerate(zip(args, (0, 1))):
            if i < len(proven) and proven[i] and not (i < len(unbound) and unbound[i]):
                name = instr["args"][i]
                o.add(ind, f"if {a} < {least}: _RF({f'{text}: {name} >= {least}'!r}, {a})")

    def emit_const(self, instr, ind):
        o = self.out
        d = self.dest(instr)
        try:
            v = const_value(instr)
        except BrilError as e:
            o.add(ind, f"raise _E({e.message!r})")
            return
        if v is UNSET:
            # No value: the reference stores `undefined`, i.e. the variable becomes unset.
            o.add(ind, "try:")
            o.add(ind + 1, f"del {d}")
            o.add(ind, "except NameError:")
            o.add(ind + 1, "pass")
            return
        o.add(ind, f"{d} = {_float_literal(v) if type(v) is float else repr(v)}")

    def op_nop(self, instr, ind):
        pass

    def op_print(self, instr, ind):
        parts = []
        for i, a in enumerate(instr.get("args") or []):
            v = self.v(a)
            t = self.arg_tags(instr, i)
            if t == {"int"} or t == {"char"}:
                parts.append("{" + v + "}")
            elif t == {"bool"}:
                parts.append("{(\"true\" if " + v + " else \"false\")}")
            elif t == {"float"}:
                parts.append("{_ff(" + v + ")}")
            else:
                parts.append("{_fv(" + v + ")}")
        self.out.add(ind, "_P(f'" + " ".join(parts) + "\\n')")

    def op_call(self, instr, ind):
        o = self.out
        funcs = instr.get("funcs")
        if not funcs:
            o.add(ind, f"raise _E({call_funcs_message(funcs)!r})")
            return
        callee = self.fc.program.resolve_call(self.fc.index, funcs[0])
        if isinstance(callee, str):
            o.add(ind, f"raise _E({callee!r})")
            return
        self.links.callees.add(callee.index)
        cfunc = callee.func
        params = cfunc.get("args") or []
        args = instr.get("args") or []
        if len(params) != len(args):
            o.add(ind, f"raise _E({arity_message(params, args)!r})")
            return
        exprs = []
        for i, (p, a) in enumerate(zip(params, args)):
            ptype = p.get("type")
            v = self.v(a)
            kind = decl_kind(ptype)
            tags = self.arg_tags(instr, i)
            if kind == "any" or (kind is not None and tc.only(tags, kind)):
                exprs.append(v)
            elif kind is None:
                exprs.append(f"_unknown_type({v}, {js_type_text(ptype)!r})")
            else:
                exprs.append(checked_expr(v, kind, M.ARGUMENT_MISMATCH))
        if self.should_inline(callee):
            call = self.emit_inlined(callee, exprs, ind, [
                self.arg_tags(instr, i) if p.get("type") == "any" else None
                for i, p in enumerate(params)])
        else:
            call = f"{callee.pyname}{self.call_suffix}({', '.join(exprs)})"
        ftype = cfunc.get("type")
        returns = callee.returns
        dest = instr.get("dest")
        if dest is None:
            if ftype is None and returns <= {"none"}:
                o.add(ind, call)
                return
            r = self.new_tmp()
            o.add(ind, f"{r} = {call}")
            if returns - {"none"}:
                o.add(ind, f"if {r} is not None: "
                           f"raise _E({M.VALUE_WITHOUT_DEST!r})")
            if ftype is not None:
                o.add(ind, f"raise _E({nonvoid_message(ftype)!r})")
            return
        d = self.v(dest)
        itype = instr.get("type")
        o.add(ind, f"{d} = {call}")
        if itype is None:
            o.add(ind, f"raise _E({M.UNTYPED_DEST!r})")
            return
        if "none" in returns:
            o.add(ind, f"if {d} is None: raise _E({nonvoid_message(ftype)!r})")
        kind = decl_kind(itype)
        rt = frozenset(returns - {"none"})
        if kind is None:
            o.add(ind, f"_unknown_type({d}, {js_type_text(itype)!r})")
        elif kind != "any" and not tc.only(rt, kind):
            o.add(ind, check_stmt(d, kind, M.RESULT_MISMATCH))
        if ftype is None:
            o.add(ind, f"raise _E({M.VOID_IN_VALUE_CALL!r})")
        elif not type_cmp(itype, ftype):
            o.add(ind, f"raise _E({M.DECLARATION_MISMATCH!r})")

    def should_inline(self, callee):
        """Inline small loop-free callees, two levels deep at most, never a function
        into itself (unrolling recursion measured no faster)."""
        if not self.inlines_calls or self.depth >= INLINE_MAX_DEPTH or not callee.inlinable:
            return False
        if callee.index in self.chain:
            return False
        return self.sites[0] + len(callee.func.get("instrs") or []) <= INLINE_BUDGET

    def emit_inlined(self, callee, exprs, ind, arg_tags):
        """Emit callee's code in place of a call (arguments already checked as a
        call would; `arg_tags`: what this call site knows of the values it passes
        to `any` parameters, else None); returns the local holding its result."""
        o = self.out
        site = len(self.sites)
        self.sites.append(callee.index)
        self.sites[0] += len(callee.func.get("instrs") or [])
        # The callee's emitter is of the caller's class (whose hooks a loop-free callee's
        # code does not reach), not a class of its own: the attribute caches of the hot
        # methods then see one class (measured: 5% of the normal variant's generation).
        # Typed by what the call site knows of its `any` arguments (a fact of the
        # caller's variant, as the copy is part of it); else generic typing: the
        # copy runs on whatever regions the caller passes.
        sub = object.__new__(type(self))
        sub.start(callee, callee.types_for_site(arg_tags), o, self.links)
        sub.var_prefix = prefix = f"w{site}_"
        sub.inline_result = f"_r{site}"
        sub.depth = self.depth + 1
        sub.sites = self.sites
        sub.chain = self.chain + (callee.index,)
        sub.tmp = self.tmp + 1000 * site
        for p, e in zip(callee.params, exprs):
            o.add(ind, f"{prefix}{_escape(p)} = {e}")
        sub.emit_block(callee.blocks_by_index[0], ind, callee.root, 0, prefix=True)
        self.cached_ptr = None
        return sub.inline_result

    def op_alloc(self, instr, ind):
        o = self.out
        n = self.operand(instr, 0, "int")
        typ = instr.get("type")
        if not (isinstance(typ, dict) and "ptr" in typ):
            o.add(ind, n)
            o.add(ind, f"raise _E({M.text(M.ALLOC_NON_POINTER, type=js_type_text(typ))!r})")
            return
        const = self.links.constant(typ["ptr"])
        o.add(ind, f"{self.dest(instr)} = _alloc({n}, {const})")

    def unpacked_ptr(self, instr, ind):
        """Check argument 0 is a pointer and load it into the heap temporaries
        (unless they already hold it); returns the plain local holding it."""
        expr = self.operand(instr, 0, "ptr")
        if expr.startswith(self.var_prefix):
            p = expr
        else:
            p = self.new_tmp()
            self.out.add(ind, f"{p} = {expr}")
        if self.cached_ptr != p:
            if getattr(self.fc.program, "native_heap", False):
                self.out.add(ind, heapmod.native_unpack_line(p))
            else:
                self.out.add(ind, heapmod.unpack_line(p))
            self.cached_ptr = p
        return p

    def op_free(self, instr, ind):
        expr = self.operand(instr, 0, "ptr")
        self.out.add(ind, f"_free({expr})")

    def op_load(self, instr, ind):
        p = self.unpacked_ptr(instr, ind)
        if getattr(self.fc.program, "native_heap", False):
            # The element kind from the op's type, unless the pointer's tags disagree.
            kind = heapmod.elem_kind(instr.get("type"))
            if any(t.startswith("ptr:") and t[4:] in heapmod.NATIVE_FORMATS and t[4:] != kind
                   for t in self.arg_tags(instr, 0)):
                kind = None
            lines = heapmod.native_load_lines(self.dest(instr), p, instr["args"][0], kind)
        else:
            lines = heapmod.load_lines(self.dest(instr), p, instr["args"][0])
        for line in lines:
            self.out.add(ind, line)

    def op_store(self, instr, ind):
        o = self.out
        p = self.unpacked_ptr(instr, ind)
        v = self.v(instr["args"][1])
        vt = self.arg_tags(instr, 1)
        pt = self.arg_tags(instr, 0)
        kinds = {tc.tag_kind(t) for t in vt}
        vk = kinds.pop() if len(kinds) == 1 and None not in kinds else None
        # No element check when every region the pointer can reach accepts the kind
        # (a region of `any` accepts every value).
        if pt and all(t == "ptr:any" for t in pt) or vk is not None and pt and all(
                t.startswith("ptr:") and t[4:] in tc.ELEM_ACCEPTS
                and vk in tc.ELEM_ACCEPTS[t[4:]] for t in pt):
            unbound = self.types.arg_unbound.get(id(instr), ())
            if len(unbound) > 1 and unbound[1]:
                o.add(ind, v)   # read the value before the bounds test (undefined first)
        else:
            o.add(ind, heapmod.store_check_line(v, vk))
        if getattr(self.fc.program, "native_heap", False):
            # A stored value's kind is the region's (the element check passed); a wrong
            # guess from the declared type only sends the template to its slow path.
            sk = vk if vk in heapmod.NATIVE_FORMATS else heapmod.declared_kind(
                self.fc, instr["args"][1])
            lines = heapmod.native_store_lines(p, v, sk)
        else:
            lines = heapmod.store_lines(p, v)
        for line in lines:
            o.add(ind, line)

    def op_ptradd(self, instr, ind):
        self.unpacked_ptr(instr, ind)       # sets the _hd/_ho/_hr temps ptradd_lines reads
        k = self.operand(instr, 1, "int")
        d = self.dest(instr)
        for line in heapmod.ptradd_lines(d, k):
            self.out.add(ind, line)
        self.cached_ptr = d if d != "_" else None

    def op_set(self, instr, ind):
        args = instr["args"]
        self.out.add(ind, f"{shadow_name(args[0])} = {self.v(args[1])}")

    def op_get(self, instr, ind):
        d = instr.get("dest")
        if not isinstance(d, str):
            self.out.add(ind, f"raise _E({M.text(M.NO_SET, name='undefined')!r})")
            return
        self.out.add(ind, f"{self.v(d)} = {shadow_name(d)}")

    def op_undef(self, instr, ind):
        self.out.add(ind, f"{self.dest(instr)} = _UNDEF")

    def op_speculate(self, instr, ind):
        self.emit_snapshot(ind)

    def op_commit(self, instr, ind):
        o = self.out
        o.add(ind, f"if not _spec: raise _E({M.COMMIT_OUTSIDE!r})")
        o.add(ind, "_spec.pop()")

    def op_phi(self, instr, ind):
        o = self.out
        labels = instr.get("labels") or []
        args = instr.get("args") or []
        d = self.dest(instr)
        ids = self.fc.label_ids
        first = True
        seen = set()
        for lab, a in zip(labels, args):
            if lab in seen:
                continue
            seen.add(lab)
            lid = ids.setdefault(lab, len(ids))
            o.add(ind, f"{'if' if first else 'elif'} _pl == {lid}: {d} = {self.v(a)}")
            first = False
        tail = f"_phi_error(_pl, {self.links.constant(ids)})"
        if first:
            o.add(ind, tail)
        else:
            o.add(ind, f"else: {tail}")


# --- the variants -------------------------------------------------------------------------

class _NormalEmitter(_Emitter):
    """`source()`: assumes what `fc.types` assumes of pointer parameters, tested on
    entry (else the call goes to the generic variant)."""
    variant = "normal"

    def typing(self, fc):
        return fc.types

    def emit_head(self, params):
        fc = self.fc
        if fc.assumes:
            test = " or ".join(t for _, t in fc.assumes)
            self.out.add(1, f"if {test}: return {self.links.variant(fc.index, 'miss')}"
                            f"({', '.join(params)})")


class _EntryEmitter(_Emitter):
    """`entry_source()`: starts at block `_b` with the variables of `_vars`."""
    variant = "entry"
    enter_anywhere = True
    entry_block_first = False
    inlines_calls = False

    def signature(self, params):
        return "_b, _vars"

    def emit_inputs(self):
        self.emit_vars()

    def emit_start(self):
        pass                    # (`_b` is a parameter)


class _ResumeEmitter(_EntryEmitter):
    """`pyname__resume(_b, _r)`: goes on at block `_b` with the variables of `_r`
    (keyed by Python local names: a frame's `locals()`), generic typing -- where
    a frame whose kind assumed at a loop header failed goes on."""
    variant = "resume"

    def signature(self, params):
        return "_b, _r"

    def emit_inputs(self):
        self.emit_jit_resume(1)

    def emit_jit_resume(self, ind):
        """Take the variables (and ssa2 shadows) of the dict `_r` of local names."""
        names = [var_name(v) for v in self.fc.variables]
        names += [shadow_name(k[1]) for k in sorted(self.fc.generic_types.spec_vars, key=str)
                  if isinstance(k, tuple)]
        for n in names:
            self.out.add(ind, f"if {n!r} in _r: {n} = _r[{n!r}]")


class _OsrEmitter(_Emitter):
    """`osr_source(header)`: entered at a loop header with the variables of `_vars`;
    the loops around the header's loop are entered by a range test and keep
    their header's dispatch test."""
    variant = "osr"
    entry_block_first = False
    phi_start = "_lb = _vars.get(2); _pl = _vars.get(3)"

    def __init__(self, fc, osr):
        self.osr = osr
        self.osr_outer = set()
        loop = fc.blocks_by_index[osr].loop.parent
        while loop is not None:
            self.osr_outer.add(id(loop))
            loop = loop.parent
        super().__init__(fc)

    def typing(self, fc):
        return fc.osr_types

    def signature(self, params):
        return "_vars"

    def emit_inputs(self):
        self.emit_vars()
        fc = self.fc
        # The assumptions about parameters, on the values they were called with
        # (never reassigned), and the kinds assumed at this header; if one fails,
        # the entry variant, which assumes nothing.
        tests = [f"({p!r} in _vars and {t})" for p, t in fc.assumes] \
            if fc.osr_typed and self.types is not fc.generic_types else []
        if self.types is fc.osr_types and self.types is not fc.generic_types:
            tests += fc.header_tests(self.osr, var_name)
        if tests:
            self.out.add(1, f"if {' or '.join(tests)}: return "
                            f"{self.links.variant(fc.index, 'entry')}"
                            f"({fc.blocks_by_index[self.osr].lid}, _vars)")

    def emit_start(self):
        self.out.add(1, f"_b = {self.fc.blocks_by_index[self.osr].lid}")


class _OsrPlainEmitter(_OsrEmitter):
    """`pyname__osrplain<lid>(_vars)`: the osr variant assuming no kinds at loop
    headers (where a frame whose assumed kind failed goes on, `deopt`)."""
    variant = "osrplain"

    def typing(self, fc):
        return fc.param_types if fc.osr_typed else fc.generic_types


class _JitHooks:
    """Mixed into the jit variants (`jit_source()`)."""
    deopt_variant = "deoptx"    # (generic code with the JIT's hooks: jitx)

    def emit_header_hook(self, loop, ind):
        """At a loop header: when the JIT has raised the loop's flag
        (`_JQ<index>_<header>`: it has native code for it, or wants to see every
        arrival), hand it the frame's variables (`_JX`); it runs native code
        and returns where to go on, with the variables native code assigned -- or
        None to go on interpreting here.  A flag test costs next to nothing per
        iteration: the JIT finds hot code by sampling, not by counting."""
        o = self.out
        cond = self.links.flag(self.fc.index, loop.header)
        if self.has_spec:
            cond += " and not _spec"        # native code starts outside speculation
        o.add(ind, f"if {cond}:")
        o.add(ind + 1, f"_r = _JX({self.fc.index}, {loop.header}, locals())")
        o.add(ind + 1, "if _r is not None:")
        self.emit_native_exit(ind + 2)

    def emit_native_exit(self, ind):
        """Where a frame goes on when native code hands it back (`_r`: block and
        variables).  Native code may leave at any block: go on in the jitx
        variant, where every block can be reached (count what this frame ran first)."""
        self.out.add(ind, "_N += _n")
        self.out.add(ind, f"return {self.links.variant(self.fc.index, 'jitx')}(_r[0], _r[1])")

    def note_loop(self, top, bottom, loop):
        self.loop_lines.append((top, bottom, loop.header))


class _JitEmitter(_JitHooks, _NormalEmitter):
    variant = "jit"


class _JitxEmitter(_JitHooks, _ResumeEmitter):
    """`pyname__jitx(_b, _r)`: where a jit variant goes on when native code hands
    control back (block `_b`, variables in `_r`, keyed by Python local names)."""
    variant = "jitx"

    def new_links(self):
        links = super().new_links()
        # Where the JIT's on-stack replacement may enter (loop headers: layout
        # ids) and the variables it hands over.
        fc = self.fc
        links.info = {"osr": {h: fc.blocks_by_index[h].lid for h in fc.osr_headers},
                      "variables": list(fc.variables)}
        return links

    def emit_native_exit(self, ind):
        self.out.add(ind, "_b, _r = _r")
        self.emit_jit_resume(ind)
        self.out.add(ind, "continue")


class _OsrJitEmitter(_JitHooks, _OsrEmitter):
    variant = "osrjit"


class _RecordHooks:
    """Mixed into the record variants (`record_source()`): generic typing, events
    for the trace recorder, calls to the callees' record variants, no inlining."""
    inlines_calls = False
    call_suffix = "__record"

    def typing(self, fc):
        return fc.generic_types

    def emit_header_hook(self, loop, ind):
        """Once the recorder has stopped listening (`_RS`: its budget ran out), a
        frame goes on at full speed: at its next loop header it moves to the
        osr variant (`_RX`), as the cold tier's on-stack replacement does."""
        if loop.header not in self.fc.osr_headers:
            return
        cond = "_RS and not _spec" if self.has_spec else "_RS"
        self.out.add(ind, f"if {cond}:")
        self.out.add(ind + 1, "_N += _n")
        self.out.add(ind + 1, f"return _RX({self.fc.index}, {loop.header}, locals())")

    def emit_block_event(self, b, ind):
        fc = self.fc
        if b.first_index in fc.cfg_names:
            event = f"_RB({fc.name!r}, {fc.cfg_names[b.first_index]!r})"
            if b.index in fc.osr_headers:
                # (at a loop's entry the recorder may ask for the frame's values)
                self.out.add(ind, f"_rv = {event}")
                self.out.add(ind, "if _rv: _RV(_rv, locals())")
            else:
                self.out.add(ind, event)

    def emit_leave(self, ind):
        self.out.add(ind, "_RL()")


class _RecordEmitter(_RecordHooks, _Emitter):
    variant = "record"

    def emit_head(self, params):
        # (the arguments, for the recorder's counts of the values calls pass)
        self.out.add(1, f"_RE({self.fc.name!r}, ({''.join(p + ', ' for p in params)}))")


class _OsrRecordEmitter(_RecordHooks, _OsrEmitter):
    """(No `_RE`: the cold tier reported the entry of the activation that moves here.)"""
    variant = "osrrecord"


_EMITTERS = {cls.variant: cls for cls in (
    _Emitter, _NormalEmitter, _EntryEmitter, _ResumeEmitter, _JitEmitter, _JitxEmitter,
    _RecordEmitter,
    _OsrEmitter, _OsrPlainEmitter, _OsrJitEmitter, _OsrRecordEmitter)}


def dump_requested():
    return os.environ.get("BRIL_DUMP_PY")      # (bril.interpreter.interp reads it too)


