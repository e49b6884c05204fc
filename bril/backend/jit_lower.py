"""Lower one region of a Bril function (a hot loop) to a native function for the JIT.

    lower_region(linked, index, region, entries, name) -> (ir.Module, Slots)

The module holds the region function and every function the region calls,
lowered whole; `index` is the function the region belongs to, `region` the
set of its block indices that run natively, `entries` the blocks where it may
be entered (see `bril.backend.regions.select_region`).

The native function is `int64 NAME(int64 *slots)`; it starts at the block
whose index is in the last slot (one of `entries`, loop headers).  Every
variable the region mentions has three slots: a definedness flag (0/1), its value (int as is,
bool 0/1, float bit-cast, char its code point, a pointer's region id) and a
pointer's offset.  Native code reads them all at entry and, when control
leaves the region -- an edge to a block outside it -- writes back the
variables the region assigns that are live there, and returns the index of
the block where the interpreter goes on.  Nothing is rolled back at an exit: the variables are
exactly those of the interpreter at that block (the "resume data" is the
frame itself), so a branch that goes the other way simply leaves native code.

Instruction meanings, checks and error messages are `bril.backend.llvm_lower`'s (the
same `Lowering.lower_instr`); speculation inside the region works as in a
whole function (a snapshot stack in allocas).  Dynamic instructions are
counted per block into the runtime's `brt_dyn_count`, which the JIT adds to
the interpreter's count after each native call.
"""

from llvmlite import ir

from .llvm_lower import (LoweredFunction, FunctionLowering, ProgramLowering, Unsupported, I1,
                         I64, PTR, const_int, decode_slot as _decode, decode_tagged,
                         encode_slot as _encode, kind)
from ..native_runtime.resume import Slots, TAG_BASES
from ..analysis.folding import single_constants


def _region_variables(info, region):
    """(names in slot order, names the region writes): variables, and ssa2 shadows
    as ("shadow", name)."""
    used, written = set(), set()
    for bi in region:
        for instr in info.blocks[bi].instrs:
            args = instr.get("args") or []
            d = instr.get("dest")
            op = instr.get("op")
            if op == "set" and args:
                used.add(("shadow", args[0]))
                written.add(("shadow", args[0]))
                args = args[1:]
            elif op == "get" and isinstance(d, str):
                used.add(("shadow", d))
            used.update(args)
            if isinstance(d, str):
                used.add(d)
                written.add(d)
    known = {n for n in used if info.type_of(n) is not None}
    return (sorted(known, key=lambda n: (isinstance(n, tuple), n if isinstance(n, str) else n[1])),
            {n for n in written if n in known})


class RegionLowering(FunctionLowering):
    """FunctionLowering with another scaffolding: variables come from and go back to
    the slot array, only the region's blocks are lowered, and an edge out of the
    region is an exit."""

    def __init__(self, info, program, region, name, constants=None, kinds=None, quick=False):
        self.info = info
        self.program = program
        self.rt = program.rt
        self.func_name = info.name
        self.region = region
        names, written = _region_variables(info, region)
        self.layout = Slots(names, {n: info.type_of(n) for n in names}, written, info.name,
                            {n for n in names if n in info.maybe_undef})
        self.fn = ir.Function(program.module, ir.FunctionType(I64, [PTR]), name)
        # Every variable gets a flag: a region can be entered before some are set.
        self.frame(self.fn, names, set(names), True)
        self.exits = {}
        self.dispatch = {}              # outer loop header -> its entry dispatch (`entry_dispatch`)
        self.copies = {}                # innermost entry -> {block: its copy's block}
        self.copy = None                # the entry whose copy is being lowered
        # An integer the function assigns once, by a `const`, holds that value
        # wherever it is set: the region reads the constant (LLVM folds it, e.g. a
        # divisor `brili --trace --trace-specialize` made constant).
        # So does each of `constants` (@main's arguments, fixed for the run:
        # `bril.analysis.invariants.main_constants`).
        self.known = {n: c for n, c in {**single_constants(info.func),
                                        **(constants or {})}.items()
                      if n in self.layout.types and n not in written
                      and self.layout.types[n] == "int"}
        self.kinds = kinds              # (see `assumed`)
        self.assumed_at = {}            # header -> {variable: kind}, set by `lower`
        self.kind_checks = {}           # (header, target block name) -> its check block
        self.quick = quick              # (see `tier_check`)
        self.entry_set = set()

    def assumed(self, parents):
        """{header: {variable: kind}}: of the kinds `any` values hold at loop headers
        (`kinds`, see `bril.backend.jitcache.region_kinds`: what the interpreter's
        generated code assumes there), those at the region's outermost loops, of
        variables held tagged.  The interpreter checks them where it enters the
        region, the region on every edge into such a header from inside it (its back
        edges), leaving at the header where one fails (its entry then finds other
        kinds: see `bril.backend.jit.Jit.enter`).  So the tags are constants LLVM
        folds every test of, in the loop and the loops inside it.  (An inner loop's
        kinds may hold only from its second round: loopfact's accumulator is an int
        where each round of the outer loop starts it.)"""
        out = {}
        for h, vs in self.kinds or ():
            mine = {v: k for v, k in vs if self.layout.types.get(v) == "any"
                    and k in TAG_BASES and k != "any"}
            if mine and h in self.region and parents.get(h) is None:
                out[h] = mine
        return out

    # --- slots ---------------------------------------------------------------------------

    def slot_ptr(self, i):
        return self.b.gep(self.fn.args[0], [const_int(i)], source_etype=I64)

    def load_slot(self, i):
        return self.b.load(self.slot_ptr(i), typ=I64)

    def store_slot(self, i, value):
        self.b.store(value, self.slot_ptr(i))

    def from_slots(self, name):
        key, i = self.layout.types[name], self.layout.index(name)
        if key == "any":                # {tag (the flag slot), value, offset}
            return decode_tagged(self.b, lambda j: self.load_slot(i + j))
        return _decode(self.b, key, self.load_slot(i + 1), lambda: self.load_slot(i + 2))

    def to_slots(self, name):
        bld, key, i = self.b, self.layout.types[name], self.layout.index(name)
        v = bld.load(self.slots[name], typ=self.slots[name].allocated_type)
        flag = bld.zext(bld.load(self.flags[name], typ=I1), I64)
        if name in self.undefs:         # 2: ssa2's undefined value
            flag = bld.add(flag, bld.zext(bld.load(self.undefs[name], typ=I1), I64))
        if key == "any":                # the tag for the flag (0 if unset)
            self.store_slot(i, bld.mul(flag, bld.extract_value(v, 0)))
            self.store_slot(i + 1, bld.extract_value(v, 1))
            self.store_slot(i + 2, bld.extract_value(v, 2))
            return
        self.store_slot(i, flag)
        if kind(key) == "ptr":
            self.store_slot(i + 1, bld.extract_value(v, 0))
            self.store_slot(i + 2, bld.extract_value(v, 1))
        else:
            self.store_slot(i + 1, _encode(bld, key, v))

    # --- the body ------------------------------------------------------------------------

    def lower(self, entries, parents=None):
        bld = self.b
        for n in self.layout.names:
            i = self.layout.index(n)
            bld.store(bld.icmp_unsigned("!=", self.load_slot(i), const_int(0)), self.flags[n])
            if n in self.undefs:
                bld.store(bld.icmp_unsigned("==", self.load_slot(i), const_int(2)),
                          self.undefs[n])
            c = self.known.get(n)
            bld.store(self.from_slots(n) if c is None else const_int(c), self.slots[n])
        bld.store(const_int(0), self.counter)
        if self.spec_top is not None:
            bld.store(ir.Constant(PTR, None), self.spec_top)
        # Calls made from the region nest below the interpreter's frame: start the
        # native depth count from here (the interpreter has its own limit).
        self.depth = bld.load(self.rt.glob("brt_depth"), typ=I64)
        self.llvm_blocks = {bi: self.fn.append_basic_block(f"b{bi}") for bi in sorted(self.region)}
        self.assumed_at = self.assumed(parents or {})
        self.entry_set = set(entries)
        starts = self.entry_dispatch(entries, parents or {})
        for e in entries:
            if e in self.assumed_at:
                starts[e] = self.retagged(e, starts[e])
        # The block to start at: after the variables, in the last slot.
        start = self.load_slot(self.layout.size)
        switch = bld.switch(start, starts[entries[0]])
        for bi in entries[1:]:
            switch.add_case(const_int(bi), starts[bi])
        for bi in sorted(self.region):
            self.lower_block(bi, self.llvm_blocks[bi])
        for h, blocks in self.copies.items():
            self.copy = h
            for bi, llvm_block in blocks.items():
                self.lower_block(bi, llvm_block)
        self.copy = None
        return self.layout

    def lower_block(self, bi, llvm_block):
        bld, b = self.b, self.info.blocks[bi]
        self.begin_block(b, llvm_block)
        for instr in b.instrs:
            self.lower_instr(instr)
        if b.term is None and not bld.block.is_terminated:
            self.store_written()
            bld.branch(self.target(b.succs[0]))
        elif not bld.block.is_terminated:
            bld.unreachable()

    def entry_dispatch(self, entries, parents):
        """{entry: the block native code entered there starts at}, building what
        keeps every loop single-entry and entered as the function enters it.

        Entered straight at a loop header inside another loop, the outer loop would
        have a second entry, and LLVM optimises no such loop (it hoists nothing out
        of it, peels and unrolls nothing); entered straight at an inner loop, that
        loop is not dominated by the code before it, whose loads and checks LLVM
        would otherwise reuse in it (traced mat-mul's region, entered at its trace
        loop, ran 1.16x the original's; a trace's loop comes after its first,
        unrolled pass).  So an entry inside other loops of the region goes in
        through their headers, outermost first: each such header starts with a
        test of a `pending` entry (0 once entered) that jumps on to the next
        header towards it, running nothing on the way (the innermost loops, where
        the time goes, have no test).  An innermost entry then starts in a copy of
        what it reaches before its parent's header (`_entry_copies`), so that the
        loop itself is only ever entered the way the function enters it.
        `parents`: {loop header in the region: the innermost loop header around it
        in the region, or None}."""
        bld = self.b
        chains = {}                     # entry -> [entry, its parent, ..., outermost]
        for e in entries:
            chain = [e]
            while parents.get(chain[-1]) is not None and len(chain) <= len(parents):
                chain.append(parents[chain[-1]])
            chains[e] = chain
        outer = {h for chain in chains.values() for h in chain[1:]}
        self.dispatch = {h: self.fn.append_basic_block(f"d{h}") for h in sorted(outer)}
        if not self.dispatch:
            return dict(self.llvm_blocks)
        leaves = {e: chain[1] for e, chain in chains.items() if len(chain) > 1 and e not in outer}
        self.copies = {h: {bi: self.fn.append_basic_block(f"c{h}.b{bi}") for bi in sorted(blocks)}
                       for h, blocks in _entry_copies(self.info, self.region, leaves).items()}
        self.pending = bld.alloca(I64, name="pending")
        bld.store(const_int(0), self.pending)
        here = bld.block

        def go(entry, via):             # `via`: an outer header's dispatch, or None
            blk = self.fn.append_basic_block(f"e{entry}.{'' if via is None else via}")
            bld.position_at_end(blk)
            bld.store(const_int(0 if via is None else entry), self.pending)
            if via is not None:
                bld.branch(self.dispatch[via])
            else:
                copy = self.copies.get(entry)
                bld.branch(copy[entry] if copy is not None else self.llvm_blocks[entry])
            return blk

        # (an outermost entry goes in at its loop's header too: its dispatch, if it has one)
        starts = {e: go(e, chain[-1]) if len(chain) > 1
                  else self.dispatch.get(e) or self.llvm_blocks[e]
                  for e, chain in chains.items()}
        for h, d in self.dispatch.items():
            bld.position_at_end(d)
            p = bld.load(self.pending, typ=I64)
            inner = self.fn.append_basic_block(f"d{h}.entering")
            bld.cbranch(bld.icmp_unsigned("==", p, const_int(0)), self.llvm_blocks[h], inner)
            cases = [(e, go(e, None) if chain[chain.index(h) - 1] == e
                      else self.dispatch[chain[chain.index(h) - 1]])
                     for e, chain in chains.items() if h in chain[1:]]
            here_h = go(h, None)
            bld.position_at_end(inner)
            switch = bld.switch(p, here_h)
            for e, blk in cases:
                switch.add_case(const_int(e), blk)
        bld.position_at_end(here)
        return starts

    def retagged(self, entry, start):
        """A block entering at `entry`, whose assumed kinds the interpreter checked:
        those variables' tags (and flags) stored as constants, then `start`."""
        bld = self.b
        here = bld.block
        blk = self.fn.append_basic_block(f"k{entry}")
        bld.position_at_end(blk)
        self.retag(self.assumed_at[entry])
        for var in self.assumed_at[entry]:
            bld.store(ir.Constant(I1, 1), self.flags[var])
        bld.branch(start)
        bld.position_at_end(here)
        return blk

    def kind_check(self, h, dest):
        """A block on an edge into loop header `h` (going to `dest`) that goes on if
        the variables hold the kinds assumed there, else leaves the region at `h`."""
        key = (h, dest.name)
        blk = self.kind_checks.get(key)
        if blk is None:
            bld = self.b
            here = bld.block
            blk = self.kind_checks[key] = self.fn.append_basic_block(f"kc{h}.{len(self.kind_checks)}")
            bld.position_at_end(blk)
            bld.cbranch(self.holds(self.assumed_at[h]), dest, self.exit_block(h))
            bld.position_at_end(here)
        return blk

    def tier_check(self, h, dest):
        """Quick code (`bril.backend.jitcache.QUICK`): a block on an edge into entry
        `h` that leaves the region at `h` once the slot after the entry slot is set
        -- the run has the unit's full build, which the interpreter enters there
        (`bril.backend.jit.Jit._upgrade`); an atomic read, which no pass moves out
        of the loop."""
        key = ("tier", h, dest.name)
        blk = self.kind_checks.get(key)
        if blk is None:
            bld = self.b
            here = bld.block
            name = f"tc{h}.{len(self.kind_checks)}"
            blk = self.kind_checks[key] = self.fn.append_basic_block(name)
            bld.position_at_end(blk)
            flag = bld.load_atomic(self.slot_ptr(self.layout.size + 1), "monotonic", 8, typ=I64)
            bld.cbranch(bld.icmp_unsigned("==", flag, const_int(0)), dest, self.exit_block(h))
            bld.position_at_end(here)
        return blk

    def target(self, t):
        if isinstance(t, int) and t not in self.region:
            return self.exit_block(t)
        if isinstance(t, int):
            if self.copy is not None and t in self.copies[self.copy]:
                dest = self.copies[self.copy][t]
            else:
                dest = self.dispatch.get(t) or self.llvm_blocks[t]
            if t in self.assumed_at:
                dest = self.kind_check(t, dest)
            return self.tier_check(t, dest) if self.quick and t in self.entry_set else dest
        return super().target(t)        # a missing label: its error

    def exit_block(self, t):
        blk = self.exits.get(t)
        if blk is None:
            here = self.b.block
            blk = self.exits[t] = self.fn.append_basic_block(f"exit{t}")
            self.b.position_at_end(blk)
            # (a variable dead at t is written before the interpreter reads it)
            live = self.info.types.live_at(t)
            for n in self.layout.names:
                if n in self.layout.written and (live is None or n in live):
                    self.to_slots(n)
            self.flush_count()
            self.b.ret(const_int(t))
            self.b.position_at_end(here)
        return blk

    def after_guard(self):
        return self.target(self.block.succs[0])

    def ret(self, instr):               # never lowered: blocks that return stay outside
        raise AssertionError("ret in a JIT region")

    def implicit_return(self):
        raise AssertionError("implicit return in a JIT region")


class RegionProgram(ProgramLowering):
    """One JIT module: a region function (or a call wrapper) and, lowered whole,
    every function it calls, directly or not -- except functions an earlier
    module of the same run compiled already, which are only declared (the
    engine links modules by name).  Function symbols are `PREFIX.fINDEX`,
    external, so that later modules can use them."""

    def __init__(self, linked, name, prefix, compiled_functions):
        super().__init__(linked, count=True, name=name)
        self.prefix = prefix
        self.compiled_functions = compiled_functions    # indices compiled before
        self.called = set()
        self.called_order = []                          # self.called, in order of first call

    def info(self, index):
        info = self.infos.get(index)
        if info is None:
            info = self.infos[index] = LoweredFunction(
                index, self.linked.functions[index], self.module, self.count,
                symbol=f"{self.prefix}.f{index}", main=index == self.main_index)
            self.declared.append(index)
        return info

    def resolve(self, caller_index, name):
        r = super().resolve(caller_index, name)
        if not isinstance(r, str):
            self.mark_called(r.index)
        return r

    def mark_called(self, index):
        """Note that the module calls function `index` (lowered by `lower_called`)."""
        if index not in self.called:
            self.called.add(index)
            self.called_order.append(index)

    def lower_called(self):
        """Lower every function called so far (and what they call) that no earlier
        module defines; returns their indices."""
        done = set()
        compiled = set(self.compiled_functions)
        for i in sorted(self.called - set(self.called_order)):    # added to `called` directly
            self.called_order.append(i)
        seen = 0                # self.called_order[:seen] are lowered or compiled before
        while True:
            # The functions first called since the last round (each round lowers
            # all that were pending): linear however deep the calls go.
            todo = sorted(i for i in self.called_order[seen:] if i not in compiled)
            seen = len(self.called_order)
            if not todo:
                return done
            for i in todo:
                done.add(i)
                FunctionLowering(self.infos[i], self).lower()


# Entry copies (`_entry_copies`) add at most this many times the region's blocks.
ENTRY_COPY_LIMIT = 1


def _entry_copies(info, region, leaves):
    """{entry: its copy's blocks}: for each innermost entry (`leaves`: {entry: the
    loop header around it}) that is a trace's repeating part, the blocks it
    reaches before that header, smallest copies first while they add at most
    ENTRY_COPY_LIMIT times the region's blocks.  A trace's loop follows its first
    pass, which did the loop's work once (loads, bounds and other checks) and
    which LLVM reuses in the loop only if nothing else enters it; other loops
    are entered directly (their copy would only cost LLVM's time: prime-count's
    inner loop reaches nearly all of its region before the outer header)."""
    from ..ir.tracelabels import is_loop_label
    found = []
    for h, p in leaves.items():
        if not is_loop_label(info.blocks[h].label):
            continue
        blocks, stack = {h}, [h]
        while stack:
            for s in info.blocks[stack.pop()].all_succs():
                if isinstance(s, int) and s in region and s != p and s not in blocks:
                    blocks.add(s)
                    stack.append(s)
        found.append((len(blocks), h, blocks))
    copies, room = {}, ENTRY_COPY_LIMIT * len(region)
    for n, h, blocks in sorted(found, key=lambda f: f[:2]):
        if n <= room:
            copies[h] = blocks
            room -= n
    return copies


def lower_region(linked, index, region, entries, name, prefix="jit", compiled_functions=(),
                 parents=None, constants=None, kinds=None, quick=False):
    """A module holding the region of function `index` as `name` (and every function
    it calls); returns (module, Slots, indices of the functions defined, indices
    of the functions used from earlier modules, {header: {variable: kind}} its
    entries must find: `RegionLowering.assumed`).  Raises `Unsupported` for what
    native code does not handle.  `parents`: see `RegionLowering.entry_dispatch`;
    `constants`: {variable: int} read as those values; `kinds`: the kinds `any`
    variables hold at loop headers (`bril.backend.jitcache.region_kinds`); `quick`:
    the region's quick build, which leaves at an entry when told to
    (`RegionLowering.tier_check`)."""
    program = RegionProgram(linked, name, prefix, compiled_functions)
    info = program.info(index)
    lowering = RegionLowering(info, program, region, name, constants, kinds, quick)
    layout = lowering.lower(entries, parents)
    defined = program.lower_called()
    return (program.module, layout, defined, program.called & set(compiled_functions),
            lowering.assumed_at)


def lower_call(linked, index, name, prefix="jit", compiled_functions=()):
    """A module with `int64 NAME(int64 *slots)`: calls function `index` (lowered whole
    here unless compiled before) with its parameters read from the slots
    (encoded as for regions' slots: an `any` value's tag, value, pointer offset;
    three slots each) and stores its result, if any, in slots 0-2.  Returns (module,
    parameter types, result type, indices of the functions defined, indices of
    the functions used from earlier modules)."""
    program = RegionProgram(linked, name, prefix, compiled_functions)
    program.mark_called(index)
    info = program.info(index)
    if info.ret_type is not None and linked.main_index() == index:
        raise Unsupported("a typed @main")
    fn = ir.Function(program.module, ir.FunctionType(I64, [PTR]), name)
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    slots = fn.args[0]

    def slot(i):
        return bld.gep(slots, [const_int(i)], source_etype=I64)

    types = [info.var_types[p] for p in info.params]
    args = []
    for i, key in enumerate(types):
        if key == "any":
            args.append(decode_tagged(bld, lambda j, i=i: bld.load(slot(3 * i + j), typ=I64)))
            continue
        raw = bld.load(slot(3 * i + 1), typ=I64)
        args.append(_decode(bld, key, raw, lambda i=i: bld.load(slot(3 * i + 2), typ=I64)))
    result = bld.call(info.llvm, args)
    key = info.ret_repr
    if key == "any":
        for j in range(3):
            bld.store(bld.extract_value(result, j), slot(j))
    elif key is not None and kind(key) == "ptr":
        bld.store(bld.extract_value(result, 0), slot(1))
        bld.store(bld.extract_value(result, 1), slot(2))
    elif key is not None:
        bld.store(_encode(bld, key, result), slot(1))
    bld.ret(const_int(0))
    defined = program.lower_called()
    return (program.module, types, key, defined,
            program.called & set(compiled_functions))
