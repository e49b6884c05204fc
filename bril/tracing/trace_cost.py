"""The cost model of speculation: what a chain of traces would have saved on the
recorded run of its loop.

`simulate` replays the recorded iteration sequence (`trace_record.LoopStats`:
runs of iteration outcomes) against a chain of candidates (`trace_select`),
counting successful passes, aborted ones, and the instructions won or wasted.
Where a guard catches a deviation is what the emitter noted for each candidate
(`FailPoint`, by the origin of the branch in the original code).
"""

from collections import namedtuple

from ..ir.errors import int_setting
from .trace_record import LONG

EXIT_COST = 3               # estimated instructions a side exit costs (copies, a jump)
# What one instruction a chain adds to the program costs, in instructions it must
# save on the training run to pay: every run prepares the code it reaches (type
# inference and code generation, then loading it from the code cache; the JIT
# compiles a traced region per instruction it holds), and the gain is an
# estimate on one input.  Measured here (2026-11-25): mat-mul traced at every
# unrolling (3,052 instructions for 84) takes 20 ms more than the original on a
# warm 36-ms run, 44 ms more cold (7-15 us per added instruction), where brili
# executes an instruction in 15-70 ns: 100-1,000 instructions.  On our loop
# benchmarks (`bench_trace.py --wall`): 0 -> static size 4.96x, --jit traced /
# original 1.14; 300 -> 1.81x, 1.02; 1000 -> 1.52x, 1.01 (brili 0.79, 0.82, 0.85).
# BRIL_TRACE_GROWTH_PRICE: another price (experiments; the tests of the trace
# machinery, on runs too short for any trace to pay, charge none).
DEFAULT_GROWTH_PRICE = 300
GROWTH_PRICE = int_setting("BRIL_TRACE_GROWTH_PRICE", DEFAULT_GROWTH_PRICE)
# ... except for a little growth at a discount: code whose preparation costs at
# most FREE_GROWTH_SHARE of the whole process on the training input (its count
# plus STARTUP_INSTRS, a process's start-up in instructions: ~40 ms at 15-70 ns
# each) is invisible on that input, and is taken if it would pay at the full
# price on a run FREE_GROWTH_RUNS times as long (sum-check trained on 1,000
# iterations, run on 4,000,000: no trace at the price alone).
FREE_GROWTH_SHARE = 0.01
STARTUP_INSTRS = 1_000_000
FREE_GROWTH_RUNS = 10


def free_growth(count, price):
    """Instructions the chains of a program whose training run executes `count`
    may add at the discount (`FREE_GROWTH_SHARE`); none at price 0."""
    if not price:
        return 0
    return int(FREE_GROWTH_SHARE * (count + STARTUP_INSTRS) / price)


# Runs of the recorded iteration sequence a chain is simulated on (the first
# ones; what they show is scaled to the whole sequence): the simulations are
# most of the cost of choosing traces, linear in the runs.  BRIL_TRACE_SIM_RUNS:
# another number (experiments).
SIM_RUNS = int_setting("BRIL_TRACE_SIM_RUNS", 1000)
EXITED, TAIL = "exited", "tail"     # how a failed first pass goes on (else: a rollback)


# Where a trace's guard catches a deviation from its path: the instructions of
# the pass run up to the guard; whether it leaves through a side exit (the work
# done stays done) and the instructions of that exit's stub; whether it goes to
# the loop's tail copy (a merged loop test).
FailPoint = namedtuple("FailPoint", ("run", "exits", "stub", "to_tail"))


def simulate(chain, stats, memo=None):
    """Replay the recorded iteration sequence against a chain of candidates.

    At the header the traces are tried in order: one succeeds if the next
    iterations take its pattern of paths (then its loop part keeps running
    while they do); otherwise a guard aborts it.  Where the recorded path of
    the deviating iteration says which branch went the other way, the abort
    costs what the trace runs up to the guard that checks that branch (a
    hoisted, strengthened loop test fails before any work), or, if that guard
    has a side exit, the few copies of the exit (the iterations done stay
    done); else roughly the iterations it ran.  When none succeeds, the
    original code runs one iteration.  Returns (gain, entries per trace,
    aborts per trace).

    `memo`: a dict kept across the simulations of one loop's chains.  What a
    trace does from a point of the sequence depends only on the trace and on
    its place in the chain (last or not), so the beam search, which tries
    every candidate behind every base, works each move out once; and a chain
    simulated again (the second selection, without first-pass exits, where
    that changes nothing) is not replayed."""
    if memo is None:
        memo = {}
    nt = len(chain.traces)
    roles = [_role(t, j == nt - 1 and chain.first_exits, j == nt - 1, chain.tail)
             for j, t in enumerate(chain.traces)]
    key = (tuple(map(id, chain.traces)), tuple(roles), bool(chain.tail))
    got = memo.get(key)
    if got is None:
        got = memo[key] = _replay(chain, stats, roles, memo)
    gain, entries, aborts = got
    # (a prefix of the sequence stands for the sequence, the recording for the run)
    scale = memo["seq"].scale * stats.scale
    if scale != 1.0:
        return (gain * scale, [round(e * scale) for e in entries],
                [round(a * scale) for a in aborts])
    return gain, list(entries), list(aborts)


# The place of a trace in a chain: its first pass fails to the next trace
# (MID), or it is the last and runs its side-exiting variant (LAST_X) or not
# (LAST).  A last trace whose variant is the same as its plain first pass
# plays LAST either way, and one none of whose first pass's guards goes to
# the tail plays MID.
MID, LAST_X, LAST = 0, 1, 2


def _role(t, last_x, last, tail):
    if not last:
        return MID
    if last_x and (t.cost_pre_x != t.cost_pre or t.first_exits or t.fails[1] != t.fails[0]):
        return LAST_X
    if tail and any(fp.to_tail for fp in t.fails[0].values()):
        return LAST
    return MID


# What a trace's first pass does from a point of the sequence: it fails and
# the next trace is tried there (FALL), it fails and the chain is done with
# the iteration (STOP: a side exit, the tail), it passes and the header comes
# next (CUT) or its loop part does (LOOP).
FALL, STOP, CUT, LOOP = range(4)


class _Memo(dict):
    """A table filled on first use: `fn(key)`."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, key):
        v = self[key] = self.fn(key)
        return v


class _Seq:
    """The recorded runs of iteration outcomes, a point in them as one int:
    run index + offset * width (the end is the run count)."""

    def __init__(self, stats):
        self.stats = stats
        self.source = seq = stats.seq
        # A long sequence is replayed on its first SIM_RUNS runs, the figures scaled
        # by the iterations of the whole over those of the prefix (`scale`).
        self.scale = 1.0
        if len(seq) > SIM_RUNS:
            whole = sum(n for _, n in seq)
            seq = seq[:SIM_RUNS]
            self.scale = whole / sum(n for _, n in seq)
        self.seq = seq
        self.n_runs = len(self.seq)
        self.width = self.n_runs + 1
        self.next1 = _Memo(lambda p: self.advance(p, 1))

    def matched(self, p, pattern):
        """(iterations from p that follow `pattern`, outcome of the one that
        does not, the point after those that follow)."""
        seq, n_runs, w = self.seq, self.n_runs, self.width
        j, o = p % w, p // w
        m = 0
        while m < len(pattern) and j < n_runs and seq[j][0] == pattern[m]:
            m += 1
            o += 1
            if o == seq[j][1]:
                j += 1
                o = 0
        return m, (seq[j][0] if m < len(pattern) and j < n_runs else None), j + o * w

    def advance(self, p, n):
        seq, n_runs, w = self.seq, self.n_runs, self.width
        i, off = p % w, p // w
        while n > 0 and i < n_runs:
            step = seq[i][1] - off
            if step > n:
                step = n
            off += step
            n -= step
            if off == seq[i][1]:
                i += 1
                off = 0
        return i + off * w

    def to_loop_exit(self, p):
        """Skip the iterations the tail clone runs: up to the loop's exit."""
        seq, n_runs = self.seq, self.n_runs
        i = start = p % self.width
        while i < n_runs and (seq[i][0] >= 0 or seq[i][0] == LONG):
            i += 1
        return self.advance(p if i == start else i, 1)


class _Moves:
    """One trace in one place of a chain: its figures, and what its first pass
    (`head`) and its loop part (`loop`) do from each point of the sequence."""

    def __init__(self, t, role, tail, stats, sq, matched):
        self.t, self.stats, self.sq, self.tail = t, stats, sq, tail
        self.matched = matched
        self.last = role != MID
        self.last_x = role == LAST_X
        pat = self.pat = t.pattern
        k = self.k = len(pat)
        # The last trace may run its side-exiting variant.
        cost_pre = self.cost_pre = t.cost_pre_x if self.last_x else t.cost_pre
        self.per_iter = cost_pre / k
        # With side exits, an iteration that leaves the pattern exits where it
        # leaves: the iterations before it keep their gain and the exit costs a
        # few copies.  Without, the pass is wasted and rolled back.
        self.exiting = t.exits_everywhere
        self.saved_loop = (t.replaced - t.cost_loop) / k
        self.last_exits = self.last_x and t.first_exits
        self.saved_last = (t.replaced - cost_pre) / k
        self.uniform = pat[0] if len(set(pat)) == 1 else None
        # Start of iteration m of the trace's path, in its events.
        self.starts, o = [], 0
        for pid in pat:
            self.starts.append(o)
            o += len(stats.path_list[pid]) - 1
        self.origins = {}
        self.head = _Memo(self._head)
        self.loop = _Memo(self._loop)
        self.loop_run = _Memo(self._loop_run)
        # (first_pass_fails depends on the point only through m and od)
        self.fails_at = _Memo(lambda mo: self.first_pass_fails(*mo))
        self.fail0 = _Memo(lambda od: self.fails_at[0, od])

    # --- where the trace fails ----------------------------------------------------

    def fail_at(self, part, m, od):
        """The FailPoint where the trace's `part` (0: first pass, 1: its
        side-exiting variant, 2: loop part) catches iteration m taking outcome
        od instead of its pattern's path; None if unknown."""
        g = self.fail_origin(m, od)
        return self.t.fails[part].get(g) if g is not None else None

    def fail_origin(self, m, od):
        """The origin of the branch where iteration m leaves the trace's path."""
        key = (m, od)
        memo = self.origins
        if key in memo:
            return memo[key]
        g = None
        stats = self.stats
        ev = stats.events_of(od) if od is not None else None
        if ev is not None:
            want = stats.path_list[self.pat[m]]
            d = 1
            while d < len(want) and d < len(ev) and want[d] == ev[d]:
                d += 1
            g = self.t.branch_origin.get(self.starts[m] + d)
        memo[key] = g
        return g

    def exit_gain(self, fp, m, od):
        """A side exit at iteration m: the original would have run the
        instructions up to that branch; the trace ran its own and the stub."""
        g = self.fail_origin(m, od)
        return self.t.orig_at.get(g, 0) - fp.run - fp.stub

    def first_pass_fails(self, m, od):
        """(gain, how) of the first pass failing at iteration m: how is EXITED
        (a side exit: the original finishes that iteration), TAIL (the loop's
        clone runs the rest of the loop) or None (a rollback)."""
        fp = self.fail_at(1 if self.last_x else 0, m, od)
        if fp is not None:
            if fp.exits:
                return self.exit_gain(fp, m, od), EXITED
            if fp.to_tail and self.last and self.tail:
                return -fp.run, TAIL
            return -fp.run, None
        if self.last and self.last_exits and od is not None and od >= 0:
            return m * self.saved_last - EXIT_COST, EXITED
        return -min(self.cost_pre, self.per_iter * (m + 1)), None

    # --- its moves ----------------------------------------------------------------

    def _head(self, p):
        """(FALL/STOP/CUT/LOOP, gain, next point) of the first pass tried at p."""
        sq = self.sq
        m, od, q = self.matched[p]
        if m == self.k:
            return (CUT if self.t.cut else LOOP), self.t.replaced - self.cost_pre, q
        d, how = self.fails_at[m, od]
        if how is EXITED:
            return STOP, d, sq.next1[q]
        if how is TAIL:
            return STOP, d, sq.to_loop_exit(p)
        return FALL, d, p

    def _loop(self, p):
        """(gain, entries, aborts, still in the loop part, next point) of the
        loop part at p."""
        sq, t, k = self.sq, self.t, self.k
        w = sq.width
        o, left = sq.seq[p % w][0], sq.seq[p % w][1] - p // w
        if self.uniform == o and left >= k:
            passes = left // k
            return passes * (t.replaced - t.cost_loop), passes, 0, True, \
                sq.advance(p, passes * k)
        m, od, q = self.matched[p]
        if m == k:
            return t.replaced - t.cost_loop, 1, 0, True, q
        fp = self.fail_at(2, m, od)
        if fp is not None and fp.exits:
            return self.exit_gain(fp, m, od), 1, 1, False, sq.next1[q]
        if fp is not None and fp.to_tail and self.tail:
            return -fp.run, 1, 1, False, sq.to_loop_exit(p)
        if fp is None and self.exiting and od is not None and od >= 0:
            return m * self.saved_loop - EXIT_COST, 1, 1, False, sq.next1[q]
        # Rolled back: the original runs this iteration.
        lost = fp.run if fp is not None else min(self.cost_pre, self.per_iter * (m + 1))
        return -lost, 1, 1, False, sq.next1[p]

    def _loop_run(self, p):
        """(gain, entries, aborts, False, next point) of the loop part from p
        until it is left: its passes, then the one that fails.  Every later point
        of the run gets its own remainder (a chain may enter the loop part
        there).  The sums are exact: the figures are multiples of 1/k, k a
        power of two (`exact`)."""
        loop, memo, end = self.loop, self.loop_run, self.sq.n_runs
        pts, steps = [], []
        q = p
        while q != end:             # (the recording may end in the loop part)
            if q in memo:
                d, n, a, _, q = memo[q]
                steps.append((d, n, a))
                break
            pts.append(q)
            step = loop[q]
            steps.append(step[:4])
            q = step[4]
            if not step[3]:
                break
        d = n = a = 0
        if not pts:
            return d, n, a, False, q
        for j in range(len(steps) - 1, -1, -1):
            dd, nn, aa = steps[j][:3]
            d, n, a = dd + d, nn + n, aa + a
            if j < len(pts):
                memo[pts[j]] = (d, n, a, False, q)
        return memo[p]


def _replay(chain, stats, roles, memo):
    """(gain, entries per trace, aborts per trace) of one chain: a pass of a
    trace at a time, its figures added up one by one."""
    sq = memo.get("seq")
    if sq is None or sq.source is not stats.seq:
        sq = memo["seq"] = _Seq(stats)
    tail = bool(chain.tail)
    moves = []
    for t, r in zip(chain.traces, roles):
        # (the moves keep their trace alive: its id stays its own)
        mv = memo.get((id(t), r, tail))
        if mv is None:
            matched = memo.get(id(t))
            if matched is None:
                matched = memo[id(t)] = _Memo(lambda p, pat=t.pattern: sq.matched(p, pat))
            mv = memo[(id(t), r, tail)] = _Moves(t, r, tail, stats, sq, matched)
        moves.append(mv)
    if all(mv.k & (mv.k - 1) == 0 for mv in moves):
        return _replay_exact(moves, sq, memo)
    nt = len(moves)
    heads = [mv.head for mv in moves]
    loops = [mv.loop for mv in moves]
    known = {p for mv in moves for p in mv.pat}
    entries, aborts = [0] * nt, [0] * nt
    seq, w, end, next1 = sq.seq, sq.width, sq.n_runs, sq.next1
    gain = 0.0
    unknown = {}                # outcome no pattern starts with -> (gain, aborted by, how)
    state = None                # None: at the header; j: in trace j's loop part
    p = 0
    while p != end:
        if state is not None:
            d, n, a, stay, p = loops[state][p]
            gain += d
            entries[state] += n
            aborts[state] += a
            if not stay:
                state = None
            continue
        o = seq[p % w][0]
        if o not in known:
            # No trace starts with this outcome: each such iteration aborts
            # the traces up to one that leaves through a side exit (or to
            # the tail, which runs the rest of the loop).
            got = unknown.get(o)
            if got is None:
                g, by, how = 0.0, [], None
                for j in range(nt):
                    d, how = moves[j].fail0[o]
                    g += d
                    by.append(j)
                    if how is not None:
                        break
                got = unknown[o] = (g, by, how)
            i = p % w
            n = 1 if got[2] is TAIL else seq[i][1] - p // w
            gain += n * got[0]
            for j in got[1]:
                entries[j] += n
                aborts[j] += n
            p = sq.to_loop_exit(p) if got[2] is TAIL else i + 1
            continue
        for j in range(nt):
            entries[j] += 1
            kind, d, q = heads[j][p]
            gain += d
            if kind == FALL:
                aborts[j] += 1
                continue
            p = q
            if kind == STOP:
                aborts[j] += 1
            elif kind == LOOP:
                state = j
            break
        else:
            p = next1[p]        # the original runs one iteration
    return gain, entries, aborts


def _unknown(moves, o):
    """(gain, traces aborted, how) of an iteration with outcome `o`, which no
    pattern of the chain starts with: the traces fail up to one that leaves
    through a side exit (or to the tail, which runs the rest of the loop)."""
    g, by, how = 0.0, [], None
    for j, mv in enumerate(moves):
        d, how = mv.fail0[o]
        g += d
        by.append(j)
        if how is not None:
            break
    return g, by, how


def _replay_exact(moves, sq, memo):
    """`_replay` where every figure is a multiple of 1/k, k a power of two
    (the unrollings are): sums of them are exact in any order, so a header
    visit (the traces tried in turn, the loop part of the one that passes)
    is one step, and the traces before the last, shared by the chains that
    extend them, are tried as one (`memo`)."""
    nt = len(moves)
    key = ("prefix",) + tuple(map(id, moves[:-1]))
    pre = memo.get(key)
    if pre is None:
        pre = memo[key] = _Memo(lambda p, mvs=moves[:-1]: _first_taker(mvs, p))
    last = moves[-1]
    last_head, last_loop = last.head, last.loop_run
    known = {p for mv in moves for p in mv.pat}
    counts = [0] * (4 * nt)     # header visits by (trace that took it, how) (j * 4 + kind)
    lent, labt = [0] * nt, [0] * nt     # entries, aborts of the loop parts
    seq, w, end, next1 = sq.seq, sq.width, sq.n_runs, sq.next1
    gain = 0.0
    unknown = {}
    p = 0
    while p != end:
        o = seq[p % w][0]
        if o not in known:
            got = unknown.get(o)
            if got is None:
                got = unknown[o] = _unknown(moves, o)
            i = p % w
            n = 1 if got[2] is TAIL else seq[i][1] - p // w
            gain += n * got[0]
            code = 4 * got[1][-1] + (STOP if got[2] is not None else FALL)
            counts[code] += n
            p = sq.to_loop_exit(p) if got[2] is TAIL else i + 1
            continue
        d, code, q, ln, la = pre[p]
        if code < 0:
            kind, d2, q = last_head[p]
            d += d2
            code = 4 * (nt - 1) + kind
            if kind == LOOP:
                d2, ln, la, _, q = last_loop[q]
                d += d2
                lent[nt - 1] += ln
                labt[nt - 1] += la
            elif kind == FALL:
                q = next1[p]        # the original runs one iteration
        elif ln:
            lent[code >> 2] += ln
            labt[code >> 2] += la
        gain += d
        counts[code] += 1
        p = q
    entries, aborts = lent, labt
    for code, c in enumerate(counts):
        if c:
            j, kind = divmod(code, 4)
            for i in range(j):
                entries[i] += c
                aborts[i] += c
            entries[j] += c
            if kind == FALL or kind == STOP:
                aborts[j] += c
    return gain, entries, aborts


def _first_taker(moves, p):
    """A header visit at p to the traces `moves` (before a chain's last):
    (gain, j * 4 + kind of the one that takes it, or -1 if all fail, next
    point, entries and aborts of its loop part)."""
    d = 0
    for j, mv in enumerate(moves):
        kind, dj, q = mv.head[p]
        d += dj
        if kind == FALL:
            continue
        if kind == LOOP:
            dl, ln, la, _, q = mv.loop_run[q]
            return d + dl, 4 * j + kind, q, ln, la
        return d, 4 * j + kind, q, 0, 0
    return d, -1, p, 0, 0
