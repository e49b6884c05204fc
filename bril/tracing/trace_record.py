"""Finding hot loops and recording the paths their iterations take.

The engine, run in recording mode, reports three events: a function is entered,
a function returns, and a basic block (named as `bril.analysis.cfg.CFG` names it) is
entered.  The recorder keeps a shadow call stack.  Loop headers (targets of
back edges) count their visits; once a header reaches the hotness threshold,
each iteration of its loop is recorded as the list of block events from the
header back to it, callee blocks included (the replay needs them to inline).

Per header it keeps a histogram of distinct iteration paths and the sequence
of iteration outcomes (run-length encoded): the id of the path taken, an exit
id (`exit_outcome`) when the loop was left (the partial path up to and
including the block outside the loop is kept: it says which branch left), `LONG`
when an iteration exceeded the length cap.  The selection step simulates
candidate traces over that sequence to see what they would save and waste.
"""

from ..analysis.cfg import block_sizes, natural_loops
from ..analysis.folding import single_constants

# Loop entries whose values are sampled, with `values` (`bril.tracing.specialize`).
VALUE_SAMPLES = 32

EXIT = -1          # the loop was left along a path not kept
LONG = -2
_EXIT_BASE = -3     # exit path x is the outcome _EXIT_BASE - x


def exit_outcome(xid):
    return _EXIT_BASE - xid


# --- value sampling: the variables a loop's entries sample, and what they held -----

# A variable's sampled values differed (or one was no integer).  One value seen
# at a single entry counts as invariant: a loop entered once, as most are.
VARIES = object()


def wanted(func, cfg, loops):
    """{header: the variables worth sampling at the entries of its loop} for
    `loops` of `func`: integers the loop reads as the divisor of a `div` and
    never writes, and that are not one constant throughout the function
    already (native code sees those)."""
    types = _declared(func)
    constant = single_constants(func)
    out = {}
    for loop in loops:
        written = set()
        divisors = set()
        for name in loop.body:
            for ins in cfg.blocks[name].instrs:
                d = ins.get("dest")
                if d is not None:
                    written.add(d)
                if ins.get("op") == "div" and len(ins.get("args") or ()) == 2:
                    divisors.add(ins["args"][1])
        out[loop.header] = frozenset(v for v in divisors - written
                                     if types.get(v) == "int" and v not in constant)
    return out


def record_value(stats, var, value):
    """One sampled value of `var` at an entry of the loop of `stats`."""
    seen = stats.values.get(var)
    if type(value) is not int:
        stats.values[var] = VARIES
    elif seen is None:
        stats.values[var] = value
    elif seen is not VARIES and seen != value:
        stats.values[var] = VARIES


class CallStats:
    """The int and bool values the calls of one function passed (while the
    recorder listened), counted as the first tier counts them
    (`bril.interpreter.cold.tally_values`)."""
    __slots__ = ("func", "params", "calls", "values")

    def __init__(self, func, params):
        self.func = func
        self.params = params        # [(index, name)] of its int and bool parameters
        self.calls = 0
        self.values = {}            # name -> {(is a bool, value): calls} or cold.MIXED

    def count(self, args):
        from ..interpreter.cold import tally_values
        self.calls += 1
        tally_values(self.values, self.params, args)

    def common(self, share):
        """{parameter: the value at least `share` of the calls passed}."""
        from ..interpreter.cold import MIXED
        out = {}
        for name, counts in self.values.items():
            if counts is MIXED:
                continue
            for (_, v), n in counts.items():
                if n >= share * self.calls:
                    out[name] = v
        return out


def _value_params(func):
    """[(index, name)] of func's int and bool parameters (none if two share a name)."""
    args = func.get("args") or []
    if len({a.get("name") for a in args}) != len(args):
        return []
    return [(i, a["name"]) for i, a in enumerate(args) if a.get("type") in ("int", "bool")]


def _declared(func):
    types = {}
    for a in func.get("args") or []:
        types.setdefault(a["name"], set()).add(str(a.get("type")))
    for ins in func.get("instrs") or []:
        if "dest" in ins:
            types.setdefault(ins["dest"], set()).add(str(ins.get("type")))
    return {v: next(iter(ts)) for v, ts in types.items() if len(ts) == 1}


class LoopStats:
    def __init__(self, func, header, body):
        self.func = func
        self.header = header
        self.body = body            # block names of the natural loop
        self.visits = 0             # header visits (before and during recording)
        self.paths = {}             # tuple of events -> path id
        self.path_list = []         # path id -> tuple of events
        self.counts = []            # path id -> iterations that took it
        self.seq = []               # [[outcome, run length], ...]
        self.exit_paths = {}        # partial path that left the loop -> exit id
        self.exit_list = []         # exit id -> partial path
        self.full = False           # the sequence reached its cap
        self.last = None            # the recorder's `left` at its latest outcome
        self.running = False        # still running when the recorder stopped
        self.scale = 1.0            # the whole run's iterations per recorded one (est.)
        self.start = None           # instructions heard when its first recording began
        self.entries = 0            # recordings begun: entries of the loop once hot
        self.wanted = frozenset()   # variables whose values to sample at entries
        self.values = {}            # variable -> value sampled (`record_value`)
        self.samples = 0
        self._members = None

    def members(self):
        """The body for the recorder's membership test at every event: a frozenset
        (a C-level test) unless the body is very large (a deep nest's bodies hold
        blocks quadratic in its depth; `body` answers from the loop forest)."""
        if self._members is None:
            body = self.body
            self._members = frozenset(body) if len(body) <= 4096 else body
        return self._members

    def outcome(self, o, cap):
        # Past the cap the sequence stops (a prefix of the iterations): growing
        # its last run would show the selection a run that never happened.
        if self.full:
            return
        if self.seq and self.seq[-1][0] == o:
            self.seq[-1][1] += 1
        elif len(self.seq) < cap:
            self.seq.append([o, 1])
        else:
            self.full = True

    def path_id(self, events):
        pid = self.paths.get(events)
        if pid is None:
            pid = self.paths[events] = len(self.path_list)
            self.path_list.append(events)
            self.counts.append(0)
        self.counts[pid] += 1
        return pid

    def exit_id(self, events):
        xid = self.exit_paths.get(events)
        if xid is None:
            xid = self.exit_paths[events] = len(self.exit_list)
            self.exit_list.append(events)
        return exit_outcome(xid)

    def events_of(self, o):
        """The events of outcome `o` (a path, or the start of one that left the
        loop), or None (an over-long iteration)."""
        if o >= 0:
            return self.path_list[o]
        if o <= _EXIT_BASE:
            return self.exit_list[_EXIT_BASE - o]
        return None


class _Recording:
    __slots__ = ("stats", "body", "start", "since")

    def __init__(self, stats, start, left):
        self.stats = stats
        self.body = stats.members()
        self.start = start              # the recorder's log position of this iteration's first event
        self.since = left               # the recorder's `left` when this iteration began


class Recorder:
    """Listens to a recording run.  `budget`: block events it takes in before it
    stops listening, each counted once plus once per recording that sees it
    (None: no end); then the iterations being recorded are
    dropped and `on_stop`'s callables are called (the engine's: stop reporting,
    run the rest at full speed).  The recorded sequences are then a prefix of
    the run, as with `max_seq`; the count of each event is deterministic, so
    where recording stops is too."""

    def __init__(self, funcs, infos, hot=56, max_events=4000, max_seq=5_000, budget=None,
                 values=False):
        self.funcs = funcs
        # Sample values at loop entries (`bril.tracing.specialize`): `block` then returns
        # the loop's LoopStats, and the engine passes the frame to `sample`.
        self.values = values
        self.infos = infos              # name -> trace_build.FunctionInfo (shared)
        self.hot = hot
        self.max_events = max_events
        self.max_seq = max_seq
        self._loops = {}                # (func, header) -> LoopStats
        self._headers = {}              # func -> {header: LoopStats}
        self._blocks = {}               # func -> {block: (instructions, LoopStats or None)}
        self.instrs = 0                 # instructions of the events taken in (see `heard`)
        self._sizes = {}                # func -> {block: instructions}
        self._order = {}                # func -> rank of its first block event
        self._early = {}                # func -> {block: visits} until its loops are known
        self.frames = []                # per frame: list of active _Recording
        self.left = budget if budget is not None else 1 << 62   # block events to take in
        self.stopped = False
        self.on_stop = []
        self.active = []                # all active recordings, every frame
        # The events since the oldest iteration being recorded began: every
        # recording, in every frame, sees every event (callee blocks included), so
        # an iteration's events are the log from its first event on.  One log, not
        # a list per recording: in deep recursion hundreds of recordings are open.
        self.log = []
        self.base = 0                   # the log position of log[0]
        self.calls = {}                 # func -> CallStats (with `values`)

    @property
    def loops(self):
        """(func, header) -> LoopStats of every function whose loops were looked
        at, functions in the order of their first block event."""
        order = self._order
        return dict(sorted(self._loops.items(), key=lambda kv: order.get(kv[0][0], -1)))

    def headers_of(self, fname):
        """{header: LoopStats} of fname's loops (found on first use)."""
        hs = self._headers.get(fname)
        if hs is None:
            from .trace_build import FunctionInfo
            info = self.infos.get(fname)
            if info is None:
                info = self.infos[fname] = FunctionInfo(self.funcs[fname])
            early = self._early.pop(fname, {})
            sizes = self._sizes_of(fname)
            self.instrs += sum(n * sizes[b] for b, n in early.items())
            hs = {}
            loops = natural_loops(info.cfg)
            sampled = wanted(info.func, info.cfg, loops) if self.values else {}
            for loop in loops:
                st = LoopStats(fname, loop.header, loop.body)
                st.visits = early.get(loop.header, 0)
                st.wanted = sampled.get(loop.header, frozenset())
                hs[loop.header] = self._loops[(fname, loop.header)] = st
            self._headers[fname] = hs
            self._blocks[fname] = {b: (n, hs.get(b)) for b, n in sizes.items()}
        return hs

    def scale_to(self, count):
        """Once the run is over (`count` instructions): a loop still running when
        the recorder stopped is taken to have gone on as recorded for the rest of
        the run (`LoopStats.scale`: the instructions of the run from its first
        recorded iteration on, over those heard from then); the others were
        recorded whole."""
        if not self.stopped:
            return
        heard = self.heard()
        for st in self._loops.values():
            st.scale = 1.0
            if st.running and st.start is not None and heard > st.start:
                # (from its first recorded iteration on: the run before it did not
                # run it)
                st.scale = max(1.0, (count - st.start) / (heard - st.start))

    def heard(self):
        """The instructions of the block events taken in so far."""
        instrs = self.instrs
        for fname, early in self._early.items():
            sizes = self._sizes_of(fname)
            instrs += sum(n * sizes[b] for b, n in early.items())
        return instrs

    def _sizes_of(self, fname):
        sizes = self._sizes.get(fname)
        if sizes is None:
            sizes = self._sizes[fname] = block_sizes(self.funcs[fname])
        return sizes

    def max_visits(self):
        """The visits of the busiest loop header so far (for one still running when
        the recorder stopped, as `scale_to` estimates them for the whole run)."""
        best = max((round(st.visits * st.scale) for st in self._loops.values()), default=0)
        for fname, early in list(self._early.items()):
            # A function whose loops were never looked at: only if one of its
            # labeled blocks (a header has a label) ran more often than that header.
            cands = [b for b, n in early.items() if n > best]
            if any(b.startswith("_b.") for b in cands):
                labels = {i.get("label") for i in self.funcs[fname].get("instrs", ())}
                cands = [b for b in cands if b in labels]
            if cands:
                best = max([best] + [st.visits for st in self.headers_of(fname).values()])
        return best

    # --- events from the engine ------------------------------------------------------

    def stop(self):
        """Stop listening: the iterations being recorded are dropped (as when a
        return cuts one short), every later event is ignored."""
        # The loops still running: those being recorded, and those whose latest
        # iteration ended during the current iteration of one being recorded (an
        # inner loop, or a callee's, between two of its runs).
        since = max((r.since for r in self.active), default=None)
        for st in self._loops.values():
            st.running = since is not None and st.last is not None and st.last <= since
        for r in self.active:
            r.stats.running = True
        self.stopped = True
        self.left = -1
        self.frames = []
        self.active = []
        self.log = []
        for fn in self.on_stop:
            fn()

    def enter(self, fname, args=None):
        """A function is entered; `args`: its arguments, in the order of its
        parameters (counted with `values`)."""
        if not self.stopped:
            self.frames.append([])
            if self.values and args is not None:
                cs = self.calls.get(fname)
                if cs is None:
                    cs = self.calls[fname] = CallStats(fname, _value_params(self.funcs[fname]))
                if cs.params:
                    cs.count(args)

    def leave(self):
        if self.stopped:
            return
        recs = self.frames.pop()
        for r in recs:                  # an iteration cut short by a return: drop it
            self.active.remove(r)
        if not self.active:
            self._drop_log()

    def _events(self, r):
        """The events of r's iteration, up to the latest (inclusive); None if it is
        an over-long one (more than `max_events` before the latest)."""
        log = self.log
        first = r.start - self.base
        if len(log) - 1 - first > self.max_events:
            return None
        return tuple(log[first:])

    def _iterated(self, r):
        """Recording r is back at its header (the latest event): one iteration done."""
        st = r.stats
        events = self._events(r)
        st.outcome(LONG if events is None else st.path_id(events), self.max_seq)
        r.start = self.base + len(self.log) - 1
        r.since = st.last = self.left

    def _left(self, r):
        """Recording r's loop was left (the latest event: a block outside it)."""
        st = r.stats
        events = self._events(r)
        st.outcome(EXIT if events is None else st.exit_id(events), self.max_seq)
        st.last = self.left

    def _drop_log(self):
        self.base += len(self.log)
        self.log = []

    def _trim_log(self):
        """Forget events no recording can use: an iteration that began before the
        latest `max_events` + 1 is over-long whatever comes."""
        drop = len(self.log) - self.max_events - 1
        del self.log[:drop]
        self.base += drop

    def _step(self, bname, recs, active):
        """This frame's recordings at a block event (the others need nothing: the
        event is in the log)."""
        for r in list(recs):
            st = r.stats
            if bname == st.header:
                self._iterated(r)
            elif bname not in r.body:
                self._left(r)
                recs.remove(r)
                active.remove(r)

    def block(self, fname, bname):
        active = self.active
        # (the budget counts work: an event costs more the more recordings see it)
        self.left -= 1 + len(active)
        if self.left < 0:
            if not self.stopped:
                self.stop()
            return
        ev = (fname, bname)
        recs = self.frames[-1]
        if active:
            log = self.log
            log.append(ev)
            if len(active) == 1 and recs:
                # The common case, one recording and in this frame (`_step` inlined).
                r = recs[0]
                st = r.stats
                if bname == st.header:
                    self._iterated(r)
                elif bname not in r.body:
                    self._left(r)
                    recs.clear()
                    active.clear()
            else:
                self._step(bname, recs, active)
            if not active:
                self._drop_log()
            elif len(log) > 2 * self.max_events + 2:
                self._trim_log()
        blocks = self._blocks.get(fname)
        if blocks is None:
            # A function's loops are looked for only once one of its blocks has run
            # `hot` times (none of its headers can be hot before): until then, the
            # blocks count their visits (cold code costs no CFG).
            early = self._early.get(fname)
            if early is None:
                early = self._early[fname] = {}
                self._order.setdefault(fname, len(self._order))
            n = early.get(bname, 0) + 1
            if n < self.hot:
                early[bname] = n
                return
            self.headers_of(fname)
            blocks = self._blocks[fname]
        size, st = blocks[bname]
        self.instrs += size
        if st is not None:
            st.visits += 1
            if st.visits >= self.hot:
                for r in recs:
                    if r.stats is st:
                        return
                if st.start is None:
                    st.start = self.heard() - size
                log = self.log
                if not log or log[-1] is not ev:
                    log.append(ev)
                r = _Recording(st, self.base + len(log) - 1, self.left)
                recs.append(r)
                active.append(r)
                st.entries += 1
                if st.wanted and st.samples < VALUE_SAMPLES:
                    return st

    def sample(self, st, get):
        """The values at an entry of st's loop (`get`: variable -> value or None)."""
        st.samples += 1
        for v in st.wanted:
            record_value(st, v, get(v))
