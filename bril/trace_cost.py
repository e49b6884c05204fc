"""The cost model of speculation: what a chain of traces would have saved on the
recorded run of its loop.

`simulate` replays the recorded iteration sequence (`trace_record.LoopStats`:
runs of iteration outcomes) against a chain of candidates (`trace_select`),
counting successful passes, aborted ones, and the instructions won or wasted.
Where a guard catches a deviation is what the emitter noted for each candidate
(`FailPoint`, by the origin of the branch in the original code).
"""

from collections import namedtuple

from .trace_record import LONG

EXIT_COST = 3               # estimated instructions a side exit costs (copies, a jump)
EXITED, TAIL = "exited", "tail"     # how a failed first pass goes on (else: a rollback)


# Where a trace's guard catches a deviation from its path: the instructions of
# the pass run up to the guard; whether it leaves through a side exit (the work
# done stays done) and the instructions of that exit's stub; whether it goes to
# the loop's tail copy (a merged loop test).
FailPoint = namedtuple("FailPoint", ("run", "exits", "stub", "to_tail"))


def simulate(chain, stats):
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
    aborts per trace)."""
    return _Replay(chain, stats).run()


class _Replay:
    """One replay: the chain's figures per trace and a cursor into the sequence
    of runs (`i`: run index, `off`: iterations of it already replayed)."""

    def __init__(self, chain, stats):
        self.chain, self.stats = chain, stats
        traces = self.traces = chain.traces
        nt = self.nt = len(traces)
        self.entries = [0] * nt
        self.aborts = [0] * nt
        pats = self.pats = [t.pattern for t in traces]
        ks = self.ks = [len(p) for p in pats]
        # The last trace may run its side-exiting variant.
        last = traces[-1]
        self.last_x = chain.first_exits
        cost_pre = self.cost_pre = [t.cost_pre for t in traces[:-1]] + [
            last.cost_pre_x if self.last_x else last.cost_pre]
        self.per_iter = [c / k for c, k in zip(cost_pre, ks)]
        # With side exits, an iteration that leaves the pattern exits where it
        # leaves: the iterations before it keep their gain and the exit costs a
        # few copies.  Without, the pass is wasted and rolled back.
        self.exiting = [t.exits_everywhere for t in traces]
        self.saved_loop = [(t.replaced - t.cost_loop) / k for t, k in zip(traces, ks)]
        self.last_exits = self.last_x and last.first_exits
        self.saved_last = (last.replaced - cost_pre[-1]) / ks[-1]
        self.uniform = [p[0] if len(set(p)) == 1 else None for p in pats]
        self.known = {p for pat in pats for p in pat}
        # Start of iteration m of each trace's path, in its events.
        self.starts = []
        for t in traces:
            offs, o = [], 0
            for pid in t.pattern:
                offs.append(o)
                o += len(stats.path_list[pid]) - 1
            self.starts.append(offs)
        self.memo = {}
        self.seq = stats.seq
        self.n_runs = len(self.seq)
        self.i = self.off = 0

    # --- where a trace fails ------------------------------------------------------

    def fail_at(self, j, part, m, od):
        """The FailPoint where trace j's `part` (0: first pass, 1: its
        side-exiting variant, 2: loop part) catches iteration m taking outcome
        od instead of its pattern's path; None if unknown."""
        g = self.fail_origin(j, m, od)
        return self.traces[j].fails[part].get(g) if g is not None else None

    def fail_origin(self, j, m, od):
        """The origin of the branch where iteration m leaves trace j's path."""
        key = (j, m, od)
        memo = self.memo
        if key in memo:
            return memo[key]
        g = None
        stats = self.stats
        ev = stats.events_of(od) if od is not None else None
        if ev is not None:
            want = stats.path_list[self.pats[j][m]]
            d = 1
            while d < len(want) and d < len(ev) and want[d] == ev[d]:
                d += 1
            g = self.traces[j].branch_origin.get(self.starts[j][m] + d)
        memo[key] = g
        return g

    def exit_gain(self, j, fp, m, od):
        """A side exit at iteration m: the original would have run the
        instructions up to that branch; the trace ran its own and the stub."""
        g = self.fail_origin(j, m, od)
        return self.traces[j].orig_at.get(g, 0) - fp.run - fp.stub

    def first_pass_fails(self, j, m, od):
        """(gain, how) of trace j's first pass failing at iteration m: how is
        EXITED (a side exit: the original finishes that iteration), TAIL (the
        loop's clone runs the rest of the loop) or None (a rollback)."""
        last = j == self.nt - 1
        fp = self.fail_at(j, 1 if last and self.last_x else 0, m, od)
        if fp is not None:
            if fp.exits:
                return self.exit_gain(j, fp, m, od), EXITED
            if fp.to_tail and last and self.chain.tail:
                return -fp.run, TAIL
            return -fp.run, None
        if last and self.last_exits and od is not None and od >= 0:
            return m * self.saved_last - EXIT_COST, EXITED
        return -min(self.cost_pre[j], self.per_iter[j] * (m + 1)), None

    # --- the cursor ---------------------------------------------------------------

    def matched(self, pattern):
        """(iterations that follow `pattern`, outcome of the one that does not)."""
        seq, n_runs = self.seq, self.n_runs
        j, o, m = self.i, self.off, 0
        while m < len(pattern) and j < n_runs and seq[j][0] == pattern[m]:
            m += 1
            o += 1
            if o == seq[j][1]:
                j += 1
                o = 0
        return m, (seq[j][0] if m < len(pattern) and j < n_runs else None)

    def advance(self, n):
        seq, n_runs = self.seq, self.n_runs
        i, off = self.i, self.off
        while n > 0 and i < n_runs:
            step = min(n, seq[i][1] - off)
            off += step
            n -= step
            if off == seq[i][1]:
                i += 1
                off = 0
        self.i, self.off = i, off

    def to_loop_exit(self):
        """Skip the iterations the tail clone runs: up to the loop's exit."""
        seq, n_runs = self.seq, self.n_runs
        while self.i < n_runs and (seq[self.i][0] >= 0 or seq[self.i][0] == LONG):
            self.i += 1
            self.off = 0
        self.advance(1)

    # --- the replay ---------------------------------------------------------------

    def run(self):
        traces, ks, pats, nt = self.traces, self.ks, self.pats, self.nt
        entries, aborts = self.entries, self.aborts
        seq, n_runs = self.seq, self.n_runs
        advance = self.advance
        gain = 0.0
        unknown = {}                # outcome no pattern starts with -> (gain, aborted by, how)
        state = None                # None: at the header; j: in trace j's loop part
        while self.i < n_runs:
            o, left = seq[self.i][0], seq[self.i][1] - self.off
            if state is not None:
                t, k = traces[state], ks[state]
                if self.uniform[state] == o and left >= k:
                    passes = left // k
                    gain += passes * (t.replaced - t.cost_loop)
                    entries[state] += passes
                    advance(passes * k)
                    continue
                m, od = self.matched(pats[state])
                entries[state] += 1
                if m == k:
                    gain += t.replaced - t.cost_loop
                    advance(k)
                    continue
                aborts[state] += 1
                fp = self.fail_at(state, 2, m, od)
                if fp is not None and fp.exits:
                    gain += self.exit_gain(state, fp, m, od)
                    state = None
                    advance(m + 1)
                    continue
                if fp is not None and fp.to_tail and self.chain.tail:
                    gain -= fp.run
                    state = None
                    self.to_loop_exit()
                    continue
                if fp is None and self.exiting[state] and od is not None and od >= 0:
                    gain += m * self.saved_loop[state] - EXIT_COST
                    state = None
                    advance(m + 1)
                    continue
                gain -= fp.run if fp is not None else min(self.cost_pre[state],
                                                          self.per_iter[state] * (m + 1))
                state = None
                advance(1)          # the original runs this iteration
                continue
            if o not in self.known:
                # No trace starts with this outcome: each such iteration aborts
                # the traces up to one that leaves through a side exit (or to
                # the tail, which runs the rest of the loop).
                got = unknown.get(o)
                if got is None:
                    g, by, how = 0.0, [], None
                    for j in range(nt):
                        d, how = self.first_pass_fails(j, 0, o)
                        g += d
                        by.append(j)
                        if how is not None:
                            break
                    got = unknown[o] = (g, by, how)
                n = 1 if got[2] is TAIL else left
                gain += n * got[0]
                for j in got[1]:
                    entries[j] += n
                    aborts[j] += n
                if got[2] is TAIL:
                    self.to_loop_exit()
                else:
                    advance(left)
                continue
            for j in range(nt):
                entries[j] += 1
                m, od = self.matched(pats[j])
                if m == ks[j]:
                    gain += traces[j].replaced - self.cost_pre[j]
                    advance(m)
                    state = None if traces[j].cut else j
                    break
                d, how = self.first_pass_fails(j, m, od)
                gain += d
                aborts[j] += 1
                if how is EXITED:
                    advance(m + 1)
                    break
                if how is TAIL:
                    self.to_loop_exit()
                    break
            else:
                advance(1)
        return gain, entries, aborts
