"""Lower one region of a Bril function (a hot loop) to a native function for the JIT.

    lower_region(linked, index, region, entries, name) -> (ir.Module, Slots)

The module holds the region function and every function the region calls,
lowered whole; `index` is the function the region belongs to, `region` the
set of its block indices that run natively, `entries` the blocks where it may
be entered (see `bril.jit.select_region`).

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

Instruction meanings, checks and error messages are `bril.llvm_lower`'s (the
same `Lowering.lower_instr`); speculation inside the region works as in a
whole function (a snapshot stack in allocas).  Dynamic instructions are
counted per block into the runtime's `brt_dyn_count`, which the JIT adds to
the interpreter's count after each native call.
"""

from llvmlite import ir

from .llvm_lower import (LoweredFunction, FunctionLowering, ProgramLowering, Unsupported, I1,
                         I64, PTR, const_int, kind)
from .resume import Slots, decode_slot as _decode, decode_tagged, encode_slot as _encode
from .folding import single_constants


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

    def __init__(self, info, program, region, name):
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
        # An integer the function assigns once, by a `const`, holds that value
        # wherever it is set: the region reads the constant (LLVM folds it, e.g. a
        # divisor `brili --trace --trace-specialize` made constant).
        self.known = {n: c for n, c in single_constants(info.func).items()
                      if n in self.layout.types and n not in written
                      and self.layout.types[n] == "int"}

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

    def lower(self, entries):
        info, bld = self.info, self.b
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
        # The block to start at: after the variables, in the last slot.
        start = self.load_slot(self.layout.size)
        switch = bld.switch(start, self.llvm_blocks[entries[0]])
        for bi in entries[1:]:
            switch.add_case(const_int(bi), self.llvm_blocks[bi])
        for bi in sorted(self.region):
            b = info.blocks[bi]
            self.begin_block(b, self.llvm_blocks[bi])
            for instr in b.instrs:
                self.lower_instr(instr)
            if b.term is None and not bld.block.is_terminated:
                self.store_written()
                bld.branch(self.target(b.succs[0]))
            elif not bld.block.is_terminated:
                bld.unreachable()
        return self.layout

    def target(self, t):
        if isinstance(t, int) and t not in self.region:
            return self.exit_block(t)
        if isinstance(t, int):
            return self.llvm_blocks[t]
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


def lower_region(linked, index, region, entries, name, prefix="jit", compiled_functions=()):
    """A module holding the region of function `index` as `name` (and every function
    it calls); returns (module, Slots, indices of the functions defined, indices
    of the functions used from earlier modules).  Raises `Unsupported` for what
    native code does not handle."""
    program = RegionProgram(linked, name, prefix, compiled_functions)
    info = program.info(index)
    layout = RegionLowering(info, program, region, name).lower(entries)
    defined = program.lower_called()
    return program.module, layout, defined, program.called & set(compiled_functions)


def lower_call(linked, index, name, prefix="jit", compiled_functions=()):
    """A module with `int64 NAME(int64 *slots)`: calls function `index` (lowered whole
    here unless compiled before) with its parameters read from the slots
    (encoded as for regions: an `any` value's tag, value, pointer offset; three
    slots each) and stores its result, if any, in slots 0-2.  Returns (module,
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
