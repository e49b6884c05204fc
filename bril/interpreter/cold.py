"""The cold tier: Bril run as it is read, with nothing prepared that does not run.

Generating Python for a function (`bril.interpreter.codegen`) costs about 25-35 us per
instruction (inference, emission, `compile`); a function that runs once should
never wait for it.  Here a function is split into basic blocks on its first
call (`bril.analysis.blocks.build_blocks`: the very blocks the generated code uses, so their
indices name the same blocks in both tiers), and a block becomes a tuple of
closures, one per instruction, the first time it runs.  Variables live in a
dict per activation (`env`): Bril names as keys, ssa2 shadows under
`("shadow", name)`, and three int keys no Bril name can take:

    env[0]  the value a `ret` returns
    env[1]  the stack of open speculations (snapshots of env), when one is open
    env[2], env[3]  the current and previous label (functions with `phi` only)

Every operand is checked as it is read (a Bril function is not analysed
here), with the messages of `bril.ir.support`; a read of an unset variable is a
KeyError naming it, which the engine reports as `undefined variable NAME`.
Ops with a template in `bril.ir.ops` run that template, and memory ops the
`bril.interpreter.heap` templates, compiled once per op shape into closure factories:
the generated code's own definition of each op, so both tiers fail alike.

Hotness: each function counts the instructions it ran here (`work`), checked
at calls and at backward jumps (every cycle has one).  Past its budget
(`PROMOTE_PER_INSTR` times its size: generation pays back after that; with a
code cache, first `WARM_PROMOTE_PER_INSTR` times, where a cached variant is
taken at once) it is promoted: `CompiledProgram.promote` generates (or takes
from the code cache) its Python code, later calls go there, and the running
activation moves over at a loop header (on-stack replacement:
`FunctionCode.osr_source`), unless a speculation is open or no loop header
comes by.
"""

from ..analysis.blocks import build_blocks
from ..cache.codecache import compiled_code
from ..ir.errors import BrilError
from ..ir import messages as M
from .heap import (load_lines, native_load_lines, native_store_lines, ptradd_lines,
                   store_check_line, store_lines, unpack_line)
from ..ir.ops import HELPERS as OP_HELPERS, INT_MAX, INT_MIN, OPS
from ..ir.messages import (ARGUMENT_MISMATCH, DECLARATION_MISMATCH, RESULT_MISMATCH,
                           UNTYPED_DEST, VALUE_WITHOUT_DEST, VOID_IN_VALUE_CALL)
from ..ir.support import (ARG_COUNTS, CHECK_FUNCTIONS, CHECKERS, KIND_CHECK, any_variables,
                          argcount_message, arity_message, call_funcs_message, decl_kind,
                          nonvoid_message, operand_message, unknown_type_message, SCALAR_KIND)
from ..ir.values import UNDEF, UNSET, const_value, format_value, js_type_text, type_cmp

# A function is promoted to generated Python once it has run this many times its
# size here (generation costs about as much as 100-200 cold instructions per
# instruction generated), plus a constant for the smallest functions.
PROMOTE_PER_INSTR = 64
PROMOTE_BASE = 2000
# With a code cache, a function is first checked at a much lower budget: if its
# generated code is cached (a run of a program run before), loading it costs
# about what a few cold instructions per instruction do (reading, checking and
# unmarshalling the entry), so it is promoted then; else it goes on to the
# budget above.  A traced program's functions are larger (their traces), and
# at the full budget their cold phase grew with them.
WARM_PROMOTE_PER_INSTR = 4
WARM_PROMOTE_BASE = 200

RET = -1            # a terminator's result: the activation returns (value in env[0])
_RAN_ONCE = "ran once"  # a block's code before its closures are built (see _prepare)

_SPEC_KEY = 1


# The kinds of `any` values the generated code can assume of a parameter (a pointer:
# "ptr:K", K its region's element kind, `_pointer_kind`).
_KINDS = SCALAR_KIND
_ELEM_KINDS = ("int", "bool", "float", "char", "any")


MIXED = object()     # (`ColdFunction.values`, `kind_sets`: many were seen)
# Loop headers: the kinds at one arrival in this many are counted (`header_sets`).
HEADER_SAMPLE = 16
VALUES_KEPT = 8


def count_values(cf, args):
    """Count the int and bool values a call passes cf's parameters
    (`ColdFunction.values`)."""
    tally_values(cf.values, cf.value_params, args)


def tally_values(values, params, args):
    """Count the int and bool values `args` pass `params` ([(index, name)]) into
    `values`: {name: {(is a bool, value): calls}, or MIXED once VALUES_KEPT were
    seen or one was no int or bool}."""
    for i, name in params:
        v = args[i] if i < len(args) else None
        counts = values.get(name)
        if counts is MIXED:
            continue
        if counts is None:
            counts = values[name] = {}
        key = (type(v) is bool, v)
        if type(v) not in (int, bool) or (key not in counts and len(counts) == VALUES_KEPT):
            values[name] = MIXED
        else:
            counts[key] = counts.get(key, 0) + 1


def value_kind(v):
    """The kind an `any` parameter's value has, as `ColdFunction.seen` keeps it."""
    return _KINDS.get(type(v)) or _pointer_kind(v)


_POINTERS = object()   # (`ColdEngine._profile_header`: a key of kinds, not of types)


def header_kinds(key):
    """The kinds (`value_kind`) of the values a `ColdFunction.header_sets` key saw."""
    if key and key[0] is _POINTERS:
        return key[1:]
    return tuple(_KINDS.get(t) for t in key)


def _live_any_variables(cf, header):
    """The variables declared `any` live at block `header` of cf, sorted (a type
    profile's loop kinds: only what the loop reads matters)."""
    from ..analysis import typecheck as tc
    if cf.live_types is None:
        cf.live_types = tc.infer(cf.func, cf.blocks)
    live = cf.live_types.live_at(header)
    return sorted(n for n in any_variables(cf.func) if isinstance(n, str)
                  and (live is None or n in live))


def _pointer_kind(v):
    """"ptr:K" for a heap pointer (a tuple whose last item is its region), else None."""
    if type(v) is tuple and len(v) == 3:
        elem = getattr(v[2], "elem", None)
        if isinstance(elem, dict) and "ptr" in elem:
            return "ptr:ptr"
        if elem in _ELEM_KINDS:
            return "ptr:" + elem
    return None


class ColdFunction:
    """One function of the linked program, as the cold tier runs it."""

    __slots__ = ("index", "func", "name", "params", "blocks", "codes", "work", "budget",
                 "cold_budget", "fast", "osr_headers", "has_phi", "size", "record_names",
                 "any_params", "seen", "kind_sets", "value_params", "values", "calls",
                 "first_args", "header_sets", "live_types")

    def __init__(self, index, func):
        self.index = index
        self.func = func
        self.name = func.get("name", "")
        self.params = [p.get("name") for p in (func.get("args") or [])]
        self.blocks = None          # codegen Blocks, split on the first call
        self.codes = None           # per block: (size, closures, terminator) once built
        self.work = 0               # instructions run in this tier
        self.size = len(func.get("instrs") or ())
        self.budget = PROMOTE_BASE + PROMOTE_PER_INSTR * self.size
        self.cold_budget = None     # the budget if the code is not cached (`ColdEngine._ready`)
        self.fast = None            # the generated function, once promoted
        self.osr_headers = None     # block index -> on-stack-replacement entry
        self.has_phi = False
        self.record_names = None    # per block: its CFG name (or None), when recording
        # `any` parameters: (position, name); what kind each held in the calls the cold
        # tier ran (`seen`: name -> kind, or None once two kinds were seen), for the
        # generated code to assume (`bril.interpreter.codegen.FunctionCode`)
        self.any_params = [(i, p.get("name")) for i, p in enumerate(func.get("args") or [])
                           if p.get("type") == "any"]
        self.seen = {}
        # When profiling (`ColdEngine.profiling`): how many of the `calls` passed each
        # combination of kinds ({(kind, ...): calls} in any_params' order, or MIXED
        # past VALUES_KEPT of them).  Always, of the `calls` this tier ran: for the
        # parameters that may hold an int or a bool, how often each held which value
        # (`values`: name -> {(is a bool, value): calls}, or MIXED past VALUES_KEPT
        # values): a type profile's values (`bril.interpreter.type_profile`: value
        # speculation natively)
        self.kind_sets = {}
        self.value_params = [(i, p.get("name")) for i, p in enumerate(func.get("args") or [])
                             if p.get("type") in ("int", "bool", "any")]
        self.values = {}
        self.calls = 0
        self.first_args = None      # (a first call's arguments, not yet in `values`)
        # When profiling: at each loop header (a backward jump's target, a block
        # index), how many arrivals (of those sampled) found each combination of
        # kinds in the `any` variables live there ({header: [names, {key: arrivals},
        # all arrivals]}, a key as `header_kinds` reads it, the combinations MIXED
        # past VALUES_KEPT): a phase-changing loop's kinds (native code keeps a copy
        # of the loop for each, `bril.backend.llvm_lower`)
        self.header_sets = {}
        self.live_types = None      # (the typing whose liveness says what is live there)


class ColdEngine:
    """Runs functions of a `bril.interpreter.interp.CompiledProgram` in the cold tier."""

    def __init__(self, program, promote=True, budget=None):
        self.program = program
        self.ns = program.ns
        self.functions = {}         # global index -> ColdFunction
        self.count = 0              # instructions run in this tier (generated code: _N)
        self.promote_enabled = promote
        self.budget = budget        # instructions before promotion, if not by size (tests)
        self.write = program.ns["_P"]
        self._direct = {}           # op -> its direct form (see _direct_form)
        self.profiling = False      # count every call's kinds and values (a type profile)

    def _factory(self, source_of, *key, part="make"):
        return _factory(source_of, key, self.program.cache)[part]

    def function(self, index):
        cf = self.functions.get(index)
        if cf is None:
            cf = self.functions[index] = ColdFunction(index, self.program.linked.functions[index])
            if self.budget is not None:
                cf.budget = self.budget
            elif self.program.cache is not None:
                warm = WARM_PROMOTE_BASE + WARM_PROMOTE_PER_INSTR * cf.size
                if warm < cf.budget:
                    cf.budget, cf.cold_budget = warm, cf.budget
            if index in self.program.eager_functions:
                cf.budget, cf.cold_budget = -1, None

        return cf

    # --- calls ------------------------------------------------------------------------

    def stub(self, index):
        """A Python callable running function `index` (for generated code's calls)."""
        def call(*args):
            return self.invoke(index, args)
        return call

    def invoke(self, index, args):
        """Call function `index` with checked arguments; its value (None if none)."""
        cf = self.functions.get(index) or self.function(index)
        fast = cf.fast
        if fast is not None:
            return fast(*args)
        if cf.any_params:
            seen = cf.seen
            for i, name in cf.any_params:
                v = args[i] if i < len(args) else None
                kind = _KINDS.get(type(v)) or _pointer_kind(v)
                if seen.setdefault(name, kind) != kind:
                    seen[name] = None
        if self.profiling:
            self._profile_call(cf, args)
        elif cf.value_params:
            # (the values every run counts while a function is cold: the program's
            # executable gets a variant for one nearly every call passes,
            # `bril.interpreter.type_profile.seen`; a first call's are counted
            # when a second comes or they are asked for -- most functions of a
            # big program are called once: 12,000 of them, 28 ms counted at once)
            cf.calls += 1
            if cf.calls == 1:
                cf.first_args = args
            else:
                if cf.calls == 2:
                    count_values(cf, cf.first_args)
                count_values(cf, args)
        if cf.work > cf.budget and self.promote_enabled and self._ready(cf):
            return self.program.promote(cf)(*args)
        return self.activate(cf, dict(zip(cf.params, args)))

    @staticmethod
    def _profile_call(cf, args):
        """Count the kinds and values a call passes (`ColdFunction.kind_sets`, `values`)."""
        cf.calls += 1
        if cf.any_params:
            kinds = tuple(value_kind(args[i]) if i < len(args) else None
                          for i, _ in cf.any_params)
            sets = cf.kind_sets
            if sets is not MIXED:
                if kinds in sets:
                    sets[kinds] += 1
                elif len(sets) < VALUES_KEPT:
                    sets[kinds] = 1
                else:
                    cf.kind_sets = MIXED
        count_values(cf, args)

    @staticmethod
    def _profile_header(cf, header, env):
        """Count the kinds the `any` variables live at loop header `header` hold as
        a backward jump arrives there (`ColdFunction.header_sets`)."""
        seen = cf.header_sets.get(header)
        if seen is None:
            seen = cf.header_sets[header] = [_live_any_variables(cf, header), {}, 0]
        names, sets, arrivals = seen
        seen[2] = arrivals + 1
        if sets is MIXED or not names or arrivals % HEADER_SAMPLE:
            return
        # (one arrival in HEADER_SAMPLE, the first included, counted by the values'
        # Python types, made kinds when the profile is written, `header_kinds`:
        # counting every one by kinds made `brili --write-profile` 2x slower; a
        # pointer's kind needs its region)
        key = tuple(map(type, map(env.get, names)))
        if tuple in key:
            key = (_POINTERS,) + tuple(value_kind(env.get(name)) for name in names)
        if key in sets:
            sets[key] += 1
        elif len(sets) < VALUES_KEPT:
            sets[key] = 1
        else:
            seen[1] = MIXED

    def _ready(self, cf, header=None, env=None):
        """cf ran past its budget (at a call, or at a backward jump to `header` with
        the variables `env`): is it promoted now?  At the first, warm budget (a code
        cache is used) only if the code it would load is cached; else it runs on to
        the full budget."""
        if env is not None:
            # (what the loop's variables hold as they arrive: the generated code may
            # assume it; before the cache is asked, as the key holds it)
            self.program.saw_at_header(cf.index, header, env)
        cold = cf.cold_budget
        if cold is None:
            return True
        cf.cold_budget = None
        program = self.program
        if program.cached(cf.index, program.promoted_variant(osr=header is not None), header):
            return True
        cf.budget = cold
        return cf.work > cold

    def activate(self, cf, env):
        """Run cf from its entry block with the variables env; its return value."""
        if cf.blocks is None:
            self._split(cf)
        codes = cf.codes
        b = 0
        n = 0
        has_phi = cf.has_phi
        seek = None         # (the loop headers to move at, once a backward jump's target was none)
        try:
            while True:
                code = codes[b]
                if type(code) is not tuple:
                    code = self._prepare(cf, b, code)
                size, body, term, label = code
                n += size
                # (counted as it runs, not as the activation returns: the calls of a
                # recursive descent see it and move to generated code -- else the whole
                # descent stayed here, ten times slower and three Python frames a call)
                cf.work += size
                if has_phi and label is not None:
                    env[3] = env.get(2)
                    env[2] = label
                for f in body:
                    f(env)
                t = term(env)
                if t <= b or (seek is not None and t in seek):
                    if t == RET:
                        return env.get(0)
                    # A backward jump: the place to move to generated code.
                    if self.profiling:
                        self._profile_header(cf, t, env)
                    if (cf.work > cf.budget and self.promote_enabled and not env.get(_SPEC_KEY)
                            and (seek is None or t in seek) and self._ready(cf, t, env)):
                        entry = self._osr_entry(cf, t)
                        if entry is not None:
                            return entry(env)
                        seek = self._seek(cf)
                b = t
        finally:
            self.count += n

    def record_to(self, recorder):
        """Report every activation's entry, basic blocks and return to a trace
        recorder (`bril.tracing.trace_record.Recorder`), as the record variants of
        generated code do: the same events in the same order, whichever tier
        runs what (promotion and on-stack replacement go to those variants)."""
        self._rec = (recorder.enter, recorder.block, recorder.leave,
                     getattr(recorder, "sample", None))
        self._rec_args = getattr(recorder, "values", False)    # (it counts call values)
        self.activate = self._activate_recording

    def stop_recording(self):
        """No more events: activations from now on run the plain loop (those
        running go on reporting to the recorder, which ignores them)."""
        self.__dict__.pop("activate", None)

    def _activate_recording(self, cf, env):
        """`activate` with the recorder's events (kept apart: the plain loop pays
        nothing for them)."""
        if cf.blocks is None:
            self._split(cf)
        names = cf.record_names
        if names is None:
            from ..analysis.cfg import block_names
            where = block_names(cf.func.get("instrs") or [])
            names = cf.record_names = [where.get(blk.first_index) for blk in cf.blocks]
        enter, report, leave, sample = self._rec
        fname = cf.name
        enter(fname, [env.get(p) for p in cf.params] if self._rec_args else None)
        codes = cf.codes
        b = 0
        n = 0
        has_phi = cf.has_phi
        seek = None         # (the loop headers to move at, once a backward jump's target was none)
        try:
            while True:
                code = codes[b]
                if type(code) is not tuple:
                    code = self._prepare(cf, b, code)
                name = names[b]
                if name is not None:
                    asked = report(fname, name)
                    if asked:               # (the values at a loop's entry)
                        sample(asked, env.get)
                size, body, term, label = code
                n += size
                cf.work += size
                if has_phi and label is not None:
                    env[3] = env.get(2)
                    env[2] = label
                for f in body:
                    f(env)
                t = term(env)
                if t <= b or (seek is not None and t in seek):
                    if t == RET:
                        leave()
                        return env.get(0)
                    if (cf.work > cf.budget and self.promote_enabled and not env.get(_SPEC_KEY)
                            and (seek is None or t in seek) and self._ready(cf, t, env)):
                        entry = self._osr_entry(cf, t)
                        if entry is not None:
                            return entry(env)
                        seek = self._seek(cf)
                b = t
        finally:
            self.count += n

    def _osr_entry(self, cf, block):
        return self.program.osr_entry(cf, block)

    def _seek(self, cf):
        """After a backward jump to a block generated code cannot be entered at: the
        blocks it can, the loop headers (from then on only jumps to them, forward
        ones too, ask again: every iteration asking cost a phase-changing program
        43x)."""
        return self.program.loop_blocks(cf)[0]

    # --- building blocks ---------------------------------------------------------------

    def _split(self, cf):
        cf.blocks = build_blocks(cf.func)
        cf.codes = [None] * len(cf.blocks)
        cf.has_phi = any(i.get("op") == "phi" for b in cf.blocks for i in b.instrs)

    def _prepare(self, cf, bi, state):
        """The code of a block that has no closures yet.  The first time it runs, its
        instructions are run one by one, nothing kept (straight-line code that runs
        once, as front ends emit it, would cost more to build than to run); the
        second time, its closures are built and kept."""
        if state is _RAN_ONCE:
            return self._build(cf, bi)
        cf.codes[bi] = _RAN_ONCE
        b = cf.blocks[bi]
        term = b.term
        body = b.instrs[:-1] if term is not None else b.instrs
        execute = self._execute

        def run_once(env):
            for instr in body:
                execute(cf, instr, env)
        return (b.size, (run_once,), self._terminator(cf, b), b.label)

    def _execute(self, cf, instr, env):
        """Run one instruction without keeping a closure for it."""
        op = instr["op"]
        direct = self._direct.get(op)
        if direct is None:
            direct = self._direct[op] = self._direct_form(op)
        if direct:
            run, nargs = direct
            args = instr.get("args")
            if args is not None and len(args) == nargs:
                dest = instr.get("dest")
                run(env, dest if type(dest) is str else None, *args)
                return
        elif op == "const":
            v = const_value(instr)      # (BrilError: the instruction's own error)
            if v is UNSET:
                env.pop(instr["dest"], None)
            else:
                env[instr["dest"]] = v
            return
        self._instr(cf, instr)(env)

    def _direct_form(self, op):
        """(once(env, dest, *args), operand count) for an op with a template, else False."""
        info = OPS.get(op)
        if info is None or info.py is None:
            return False
        return self._factory(_template_source, op, part="once"), len(info.args)

    def _build(self, cf, bi):
        b = cf.blocks[bi]
        term = b.term
        body = b.instrs[:-1] if term is not None else b.instrs
        closures = tuple(self._instr(cf, instr) for instr in body)
        code = cf.codes[bi] = (b.size, closures, self._terminator(cf, b), b.label)
        return code

    def _instr(self, cf, instr):
        op = instr.get("op")
        if op == "const":
            return _const(instr)
        info = OPS.get(op)
        if info is None:
            return _raiser(f"unknown opcode {op}")
        args = instr.get("args") or []
        expected = ARG_COUNTS.get(op)
        if expected is not None and len(args) != expected:
            return _raiser(argcount_message(op, expected, len(args)))
        dest = instr.get("dest")
        if info.py is not None:
            return self._factory(_template_source, op)(dest if isinstance(dest, str) else None,
                                                       *args)
        make = getattr(self, "_op_" + op)
        return make(cf, instr, args, dest)

    # effects and ops without a template

    def _op_nop(self, cf, instr, args, dest):
        return _nothing

    def _op_print(self, cf, instr, args, dest):
        write = self.write
        names = tuple(args)

        def run(env):
            write(" ".join([format_value(env[a]) for a in names]) + "\n")
        return run

    def _op_call(self, cf, instr, args, dest):
        funcs = instr.get("funcs")
        if not funcs:
            return _spec_then(_raiser(call_funcs_message(funcs)), "call")
        callee = self.program.linked.resolve_call(cf.index, funcs[0])
        if isinstance(callee, str):
            return _spec_then(_raiser(callee), "call")
        cfunc = self.program.linked.functions[callee]
        params = cfunc.get("args") or []
        if len(params) != len(args):
            return _spec_then(_raiser(arity_message(params, args)), "call")
        checks = []
        for p in params:
            ptype = p.get("type")
            kind = decl_kind(ptype)
            if kind == "any":
                checks.append(None)
            elif kind is None:
                checks.append(unknown_type_message(ptype))
            else:
                checks.append(KIND_CHECK[kind])
        names = tuple(args)
        ftype = cfunc.get("type")
        invoke = self.invoke
        itype = instr.get("type")

        def arguments(env):
            if env.get(_SPEC_KEY):
                raise BrilError("call not allowed during speculation")
            values = []
            for a, check in zip(names, checks):
                v = env[a]
                if check is not None:
                    if isinstance(check, str):
                        raise BrilError(check)
                    check(v, ARGUMENT_MISMATCH)
                values.append(v)
            return values

        if not isinstance(dest, str):
            def run(env):
                r = invoke(callee, arguments(env))
                if r is not None:
                    raise BrilError(VALUE_WITHOUT_DEST)
                if ftype is not None:
                    raise BrilError(nonvoid_message(ftype))
            return run
        if itype is None:
            def run(env):
                env[dest] = invoke(callee, arguments(env))
                raise BrilError(UNTYPED_DEST)
            return run
        kind = decl_kind(itype)
        after = None
        if ftype is None:
            after = VOID_IN_VALUE_CALL
        elif not type_cmp(itype, ftype):
            after = DECLARATION_MISMATCH
        check = None if kind == "any" else KIND_CHECK.get(kind)
        unknown = unknown_type_message(itype) if kind is None else None

        def run(env):
            r = env[dest] = invoke(callee, arguments(env))
            if r is None:
                raise BrilError(nonvoid_message(ftype))
            if unknown is not None:
                raise BrilError(unknown)
            if check is not None:
                check(r, RESULT_MISMATCH)
            if after is not None:
                raise BrilError(after)
        return run

    def _op_alloc(self, cf, instr, args, dest):
        typ = instr.get("type")
        a = args[0]
        if not (isinstance(typ, dict) and "ptr" in typ):
            msg = "cannot allocate non-pointer type " + js_type_text(typ)
            cint = CHECK_FUNCTIONS["_cint"]
            m0 = operand_message("alloc", 0, "int")

            def run(env):
                cint(env[a], m0)
                raise BrilError(msg)
            return run
        return self._factory(_alloc_source)(dest if isinstance(dest, str) else None, a, typ["ptr"],
                                       self.ns["_alloc"])

    def _op_free(self, cf, instr, args, dest):
        return self._factory(_free_source)(args[0], self.ns["_free"])

    def _op_load(self, cf, instr, args, dest):
        return self._factory(_load_source, self.program.native_heap)(
            dest if isinstance(dest, str) else None, args[0])

    def _op_store(self, cf, instr, args, dest):
        return self._factory(_store_source, self.program.native_heap)(args[0], args[1])

    def _op_ptradd(self, cf, instr, args, dest):
        return self._factory(_ptradd_source)(dest if isinstance(dest, str) else None, args[0],
                                        args[1])

    def _op_set(self, cf, instr, args, dest):
        key = ("shadow", args[0])
        src = args[1]

        def run(env):
            env[key] = env[src]
        return run

    def _op_get(self, cf, instr, args, dest):
        if not isinstance(dest, str):
            return _raiser(M.text(M.NO_SET, name="undefined"))
        key = ("shadow", dest)
        msg = M.text(M.NO_SET, name=dest)

        def run(env):
            try:
                env[dest] = env[key]
            except KeyError:
                raise BrilError(msg) from None
        return run

    def _op_undef(self, cf, instr, args, dest):
        if not isinstance(dest, str):
            return _nothing

        def run(env):
            env[dest] = UNDEF
        return run

    def _op_speculate(self, cf, instr, args, dest):
        def run(env):
            stack = env.get(_SPEC_KEY)
            if stack is None:
                stack = env[_SPEC_KEY] = []
            snapshot = dict(env)
            del snapshot[_SPEC_KEY]
            stack.append(snapshot)
        return run

    def _op_commit(self, cf, instr, args, dest):
        def run(env):
            stack = env.get(_SPEC_KEY)
            if not stack:
                raise BrilError("commit in non-speculative state")
            stack.pop()
        return run

    def _op_phi(self, cf, instr, args, dest):
        d = dest if isinstance(dest, str) else None
        choices = {}
        for lab, a in zip(instr.get("labels") or [], args):
            choices.setdefault(lab, a)

        def run(env):
            prev = env.get(3)
            a = choices.get(prev)
            if a is None:
                if prev is None:
                    raise BrilError("phi: no predecessor label has been executed")
                raise BrilError(f"phi has no argument for label {prev}")
            v = env[a]
            if d is not None:
                env[d] = v
        return run

    # --- terminators ------------------------------------------------------------------

    def _terminator(self, cf, b):
        term = b.term
        if term is None:
            if b.falls_off:
                return _implicit_return
            nxt = b.succs[0]
            return lambda env: nxt
        op = term["op"]
        args = term.get("args") or []
        if op == "ret":
            if len(args) > 1:
                msg = f"ret takes 0 or 1 argument(s); got {len(args)}"

                def ret_error(env):
                    _no_speculation(env, "ret not allowed during speculation")
                    raise BrilError(msg)
                return ret_error
            if not args:
                def ret_none(env):
                    _no_speculation(env, "ret not allowed during speculation")
                    env[0] = None
                    return RET
                return ret_none
            name = args[0]

            def ret_value(env):
                _no_speculation(env, "ret not allowed during speculation")
                env[0] = env[name]
                return RET
            return ret_value
        expected = ARG_COUNTS[op]
        if len(args) != expected:
            return _raiser(argcount_message(op, expected, len(args)))
        if op == "jmp":
            return _goto(b.targets[0])
        cbool = CHECK_FUNCTIONS["_cbool"]
        cond = args[0]
        msg = operand_message(op, 0, "bool")
        if op == "br":
            t, f = _goto(b.targets[0]), _goto(b.targets[1])
            return lambda env: t(env) if cbool(env[cond], msg) else f(env)
        # guard
        target = b.targets[0]
        early = isinstance(target, str) and not target.startswith("label ")
        go = _goto(target)
        if b.falls_off:
            after = _implicit_return
        else:
            nxt = b.succs[0]
            after = lambda env: nxt   # noqa: E731

        def guard(env):
            if cbool(env[cond], msg):
                return after(env)
            if early:
                raise BrilError(target)
            stack = env.get(_SPEC_KEY)
            if not stack:
                raise BrilError("abort in non-speculative state")
            snapshot = stack.pop()
            env.clear()
            env.update(snapshot)
            env[_SPEC_KEY] = stack
            return go(env)
        return guard


# --- small closures ------------------------------------------------------------------------

def _nothing(env):
    pass


def _raiser(msg):
    def run(env):
        raise BrilError(msg)
    return run


def _spec_then(f, op):
    """f, after the check every call makes first (no call during speculation)."""
    def run(env):
        _no_speculation(env, f"{op} not allowed during speculation")
        return f(env)
    return run


def _no_speculation(env, msg):
    if env.get(_SPEC_KEY):
        raise BrilError(msg)


def _implicit_return(env):
    _no_speculation(env, "implicit return in speculative state")
    env[0] = None
    return RET


def _goto(target):
    if isinstance(target, str):
        return _raiser(target)
    return lambda env: target


def _const(instr):
    d = instr["dest"]
    try:
        v = const_value(instr)
    except BrilError as e:
        return _raiser(e.message)
    if v is UNSET:
        def unset(env):
            env.pop(d, None)
        return unset

    def run(env):
        env[d] = v
    return run


# --- closure factories generated from the op table and the heap templates ----------------
#
# Each factory is Python source compiled once per shape (an op, and whether its
# result is kept) and cached; it takes the names of the instruction's variables
# and returns the closure that runs it.

_FACTORIES = {}

_NS = dict(OP_HELPERS)
_NS.update(CHECK_FUNCTIONS)
_NS.update({"_E": BrilError, "_INT_MIN": INT_MIN, "_INT_MAX": INT_MAX})


def _factory(source_of, key, cache):
    """The namespace of the factory `source_of(*key)` writes (its `make`, and for op
    templates `once`), compiled once per process; its code is
    kept in the code cache (when there is one) under the hash of its source, so
    that short runs compile nothing at all (the first `compile` of a process
    costs about a millisecond)."""
    f = _FACTORIES.get((source_of, key))
    if f is None:
        src = source_of(*key)
        code = compiled_code(cache, "cold", src, f"<bril cold {key or source_of.__name__}>")
        ns = dict(_NS)
        if source_of is not _template_source:
            from . import heap
            ns.update(heap.HELPERS)
            ns.update(heap.NATIVE_HELPERS)
            from ..ir.values import kind_of
            ns["_kind"] = kind_of
        exec(code, ns)
        f = _FACTORIES[(source_of, key)] = ns
    return f


def _template_source(op):
    """A factory for op: each operand read (KeyError if unset) and checked in order,
    the template evaluated, the result wrapped as the generated code does."""
    info = OPS[op]
    names = [f"a{i}" for i in range(len(info.args))]
    exprs = []
    for i, (name, kind) in enumerate(zip(names, info.args)):
        if kind in CHECKERS:
            exprs.append(f"{CHECKERS[kind]}(env[{name}], {operand_message(op, i, kind)!r})")
        else:
            exprs.append(f"env[{name}]")
    tmpl = info.py
    if tmpl.startswith("wrap64(") and tmpl.endswith(")"):
        body = [f"r = {tmpl[len('wrap64('):-1].format(*exprs)}",
                "if not _INT_MIN <= r <= _INT_MAX: r = wrap64(r)"]
    else:
        body = [f"r = {tmpl.format(*exprs)}"]
    body.append("if d is not None: env[d] = r")
    # `make` returns the closure; `once` runs the same body directly.
    lines = ([f"def make(d, {', '.join(names)}):", "    def run(env):"] + _indent(body)
             + ["    return run", f"def once(env, d, {', '.join(names)}):"] + _indent(body, 1))
    return "\n".join(lines) + "\n"


def _indent(lines, n=2):
    return ["    " * n + line for line in lines]


def _ptr_read(i, op):
    return [f"_p = _cptr(env[a], {operand_message(op, i, 'ptr')!r})", unpack_line("_p")]


def _alloc_source():
    return "\n".join([
        "def make(d, a, elem, _alloc):",
        "    def run(env):",
        f"        r = _alloc(_cint(env[a], {operand_message('alloc', 0, 'int')!r}), elem)",
        "        if d is not None: env[d] = r",
        "    return run"]) + "\n"


def _free_source():
    return "\n".join([
        "def make(a, _free):",
        "    def run(env):",
        f"        _free(_cptr(env[a], {operand_message('free', 0, 'ptr')!r}))",
        "    return run"]) + "\n"


def _load_source(native):
    # (over the native heap, the templates' general path: any element kind)
    read = native_load_lines("_v", "_p", "_NAME", None) if native else \
        load_lines("_v", "_p", "_NAME")
    return "\n".join(["def make(d, a):", "    def run(env):"]
                     + _indent(_ptr_read(0, "load") + read)
                     + ["        if d is not None: env[d] = _v", "    return run"]
                     ).replace("'_NAME'", "a") + "\n"


def _store_source(native):
    write = native_store_lines("_p", "_v", None) if native else store_lines("_p", "_v")
    return "\n".join(["def make(a, b):", "    def run(env):"]
                     + _indent(_ptr_read(0, "store") + ["_v = env[b]",
                                                        store_check_line("_v", None)]
                               + write)
                     + ["    return run"]) + "\n"


def _ptradd_source():
    return "\n".join(["def make(d, a, b):", "    def run(env):"]
                     + _indent(_ptr_read(0, "ptradd")
                               + [f"_k = _cint(env[b], {operand_message('ptradd', 1, 'int')!r})"]
                               + ptradd_lines("_r", "_k"))
                     + ["        if d is not None: env[d] = _r", "    return run"]) + "\n"
