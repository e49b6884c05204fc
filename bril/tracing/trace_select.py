"""Choosing traces: building candidates and estimating what they would save.

For a hot loop header the recorder gives the distinct iteration paths and the
sequence of iterations.  A *candidate* is one path made into a trace with some
unrolling (`trace_build` replays it, `trace_opt` optimizes it), emitted as
Bril: the first pass computes loop invariants, later passes run a peeled loop
part that jumps to itself.  A header can carry a *chain* of candidates for
different paths: when the first one's guards fail, the second one is tried
from the same header state, and so on, and the last one falls back to the
original header code.  That is what keeps loops whose branch direction
changes over time fast in every phase.

Regions that can never need a rollback are emitted without
`speculate`/`commit`, their guards as plain branches (`trace_emit`); a guard
whose state is proven to be the original's leaves through a side exit
(`trace_exit`) and does not count as one that needs a rollback.  A merged
loop test that fails because fewer iterations are left than a pass runs goes
to the loop's *tail*, a copy of the original loop (`trace_emit.loop_clone`).

`bril.tracing.trace_cost.simulate` replays the recorded iteration sequence against a
chain, counting successful passes, aborted ones and the instructions won or
wasted (the cost model).
"""

import heapq
from collections import Counter

from ..ir.record import Record

from . import trace_plugin
from ..analysis.dataflow import liveness, live_after_each
from ..ir.ops import FOLDABLE
from .trace_build import NotTraceable, Replayer
from . import trace_cost
from ..analysis.cfg import block_sizes
from .trace_emit import Emitter, clone_site, count_ops, loop_clone, tail_label
from ..ir.tracelabels import chain_label, loop_label, orig_label, resume_label
from .trace_exit import Exits, variable_types
from ..analysis.folding import single_constants
from .trace_opt import (eliminate_dead, find_cut, hoist_guards, number_values, place_regions,
                        strengthen_guards)

UNROLLS = (1, 2, 4, 8, 16, 32)
# Traces chosen for time (a growth price) unroll at most this far: over the 131
# programs of the corpus and ours, no 32-unrolled trace was chosen at the default
# price (1 at 16, 1 at 8, 19 at 1-4), while the 53 built were the largest to
# build; at price 0 (instruction counts alone), 23 of the 69 chosen were.
MAX_PRICED_UNROLL = 16
# ... and from this unrolling on, only the most frequent run of paths is built
# (not the two most frequent): the same counts on the 134 programs at the default
# price (0.7130 / 0.8050), mat-mul's selection 50 -> 38 ms; at price 0 the second
# still wins now and then (0.7669 -> 0.7672 on the loop-heavy ones).
ONE_PATTERN_FROM = 4
MAX_CHAIN = 3
BEAM = 3                    # chains of each length kept while growing them
# An iteration path that enters some block more often than this has gone round
# an inner loop (or recursion) that many times: its trip count is usually data
# (a matrix dimension, a string length), and a trace with it unrolled fails on
# every other input.  The inner loop gets its own trace instead.
MAX_REPEAT = 4
# A trace's code is at least this share of the original instructions a pass of it
# replaces (the least seen on our corpus, 2026-11-25: 0.198, a loop unrolled 32
# times whose invariant work moved out of it; 0.39 unrolled once): a pass saves at
# most what it replaces, so a pattern taken no more than `price * MIN_BODY_SHARE`
# passes cannot pay for its code (`_can_pay`, known before it is built; with
# discounted growth, `_cannot_pay`: passes that could not pay even at the discount).
MIN_BODY_SHARE = 0.1


class Candidate(Record):
    # func: str
    # header: str
    # pattern: tuple  # the recorded paths of the iterations it covers, in order
    # body: list  # Bril instructions; the first region fails to FAIL_LABEL
    # labels: dict  # original instr index -> label to insert before it
    # cost_pre: int  # instructions executed by the first (peeled) pass
    # cost_loop: int  # instructions executed by each later pass
    # replaced: int  # original instructions one successful pass stands for
    # guards: int
    # blocks: int
    # inlined: int
    # cut: bool
    # path: list = []  # the (function, block) events it follows
    # exits: int = 0  # guards that leave through a side exit
    # exit_misses: int = 0  # guards from original branches that have none
    # body_x: list = []  # `body` with side exits in the first pass too
    # cost_pre_x: int = 0
    # first_exits: bool = False  # every branch of body_x's first pass has a side exit
    # Where a deviation from the path is caught, for the first pass (`body`,
    # `body_x`) and the loop part: {origin: trace_cost.FailPoint},
    # origins as `branch_origin` maps them: {index in `path` of a branch
    # target: origin}.
    # fails: tuple = ({}, {}, {})
    # branch_origin: dict = {}
    # orig_at: dict = {}  # origin -> original instructions up to it
    fields = ('func', 'header', 'pattern', 'body', 'labels', 'cost_pre', 'cost_loop',
              'replaced', 'guards', 'blocks', 'inlined', 'cut', 'path', 'exits', 'exit_misses',
              'body_x', 'cost_pre_x', 'first_exits', 'fails', 'branch_origin', 'orig_at')
    defaults = {'path': list, 'exits': 0, 'exit_misses': 0, 'body_x': list, 'cost_pre_x': 0,
                'first_exits': False, 'fails': ({}, {}, {}), 'branch_origin': dict,
                'orig_at': dict}

    @property
    def exits_everywhere(self):
        """Does every branch of the path leave through a side exit?  Then a
        deviation from the pattern wastes (almost) nothing."""
        return self.exits > 0 and self.exit_misses == 0

    @property
    def unroll(self):
        return len(self.pattern)


class Chain(Record):
    # func: str
    # header: str
    # traces: list  # Candidates, tried in order
    # first_exits: bool = True  # the last trace's first pass exits (its `body_x`)
    # tail: bool = False  # merged loop tests fail to a copy of the loop (`loop_clone`)
    # body: frozenset = frozenset()  # the loop's blocks
    # gain: float = 0.0  # estimated instructions saved on the training run
    # entries: list = []
    # aborts: list = []
    # added: int = 0  # instructions it adds to the program (its traces, the tail copy)
    # price: int = 0  # what each added instruction costs (`trace_cost.GROWTH_PRICE`)
    # free: int = 0  # instructions it may add at a discount (`trace_cost.free_growth`)
    fields = ('func', 'header', 'traces', 'first_exits', 'tail', 'body', 'gain', 'entries',
              'aborts', 'added', 'price', 'free')
    defaults = {'first_exits': True, 'tail': False, 'body': frozenset(), 'gain': 0.0, 'entries':
                list, 'aborts': list, 'added': 0, 'price': 0, 'free': 0}

    @property
    def worth(self):
        """The gain less what the added code costs: what the chain is chosen, kept
        and dropped by."""
        return self.gain - code_cost(self.added, self.price, self.free)


def code_cost(added, price, free):
    """What `added` instructions cost, `free` of them at the discount of
    `trace_cost.free_growth` (paid for by a run FREE_GROWTH_RUNS times as long)."""
    return price * max(0, added - free) + price / trace_cost.FREE_GROWTH_RUNS * min(added, free)


# Placeholders the chain fills in: where a candidate's first pass fails to (the
# next trace in the chain), and where its loop part fails to (the original code).
FAIL_LABEL = "\0fail"
ORIG_LABEL = "\0orig"
# Where merged loop tests fail: the first pass's (the next trace, or for the
# last one the tail) and the loop part's (the tail).  The tail is a copy of
# the original loop whose back edges stay in the copy: fewer iterations are
# left than a pass runs, so they run there without re-entering the chain.
TAIL_PRE = "\0tail-pre"
TAIL_LOOP = "\0tail-loop"


class _Liveness:
    """Variables live before each instruction index of a function (original code)."""

    def __init__(self, info):
        self.info = info
        self.live_in, self.live_out = liveness(info.cfg)
        self._before = {}
        for name, blk in info.cfg.blocks.items():
            after = live_after_each(blk, self.live_out[name])
            for ins, live in zip(blk.instrs, after):
                self._before[info.index[id(ins)] + 1] = live
            if blk.instrs:
                self._before[info.index[id(blk.instrs[0])]] = self.live_in[name]

    def before(self, index):
        """Live variables just before original instruction `index`."""
        live = self._before.get(index)
        if live is None:
            # An index just after a block's last instruction that starts a label:
            # the label's block is the one reached, use its live-in.
            instrs = self.info.func["instrs"]
            while index < len(instrs) and "label" in instrs[index]:
                blk = self.info.cfg.blocks.get(instrs[index]["label"])
                if blk is not None:
                    return self.live_in[blk.name]
                index += 1
            return frozenset()
        return live


def build_candidate(funcs, infos, stats, pattern, livecache, tag):
    """Candidate for consecutive iterations taking the recorded paths `pattern`;
    `tag` makes its labels unique within the header's chain."""
    fname, header = stats.func, stats.header
    path = [e for pid in pattern for e in stats.path_list[pid][:-1]]
    path.append(stats.path_list[pattern[-1]][-1])
    func = funcs[fname]
    info = infos[fname]
    rep = Replayer(funcs, infos)
    line = rep.replay(fname, path)
    counter = [0]
    used = rep.used
    temps = set()

    def fresh():
        while True:
            counter[0] += 1
            # `tag` keeps names of different traces of this header apart (one
            # name per type: the JIT and other typed tools need that).
            name = f"_g{counter[0]}.{header}.{tag}"
            if name not in used:
                used.add(name)
                temps.add(name)
                return name

    known = single_constants(func)
    items = number_values(line.items, fresh, known)
    implied = {it.origin for it in line.items if it.instr["op"] == "guard"} - {
        it.origin for it in items if it.instr["op"] == "guard"}
    items = strengthen_guards(items, fresh, known)
    items = hoist_guards(items)
    if trace_plugin.PASSES:         # brili --trace-pass: the user's passes on the line
        items = trace_plugin.apply(items, variable_types(func))
    cut_site = line.cut_site
    cut = find_cut(items)
    if cut is not None:
        del items[cut[0]:]
        cut_site = cut[1] if cut_site is None else min(cut_site, cut[1])
    if not any(it.instr["op"] == "guard" for it in items):
        raise NotTraceable("no guard: nothing to speculate on")
    seq = place_regions(items)
    live = livecache.get(fname)
    if live is None:
        live = livecache[fname] = _Liveness(info)
    if cut_site is None:
        end_live = live.live_in[header]
    else:
        end_live = live.before(cut_site)
    seq = eliminate_dead(seq, live.before, end_live)

    labels = {}
    inv, inv_vars = invariant_items(seq)
    exits = Exits(line.items, func, live.live_in, known, variable_types(func), implied)
    em = Emitter(header, tag, labels, live, temps, seq, inv, fresh, exits)
    em.exit_tests = {it.origin for it in line.items if it.instr["op"] == "guard"
                     and _leaves(exits.target(it), stats.body)}
    # The first pass keeps its resumes (a failure there tries the next trace
    # of the chain); the loop part, which fails to the original code, exits.
    pre, guards = em.emit(seq, FAIL_LABEL, exits=False, tail=TAIL_PRE)
    fail_pre = em.guard_at
    # The last trace of a chain has no next trace to try: its first pass exits
    # too (`body_x`).
    em.nexits = em.misses = 0
    pre_x, _ = em.emit(seq, FAIL_LABEL, tail=TAIL_PRE)
    fail_pre_x = em.guard_at
    first_exits = em.nexits > 0 and em.misses == 0
    em.nexits = em.misses = 0
    fail_loop = {}
    if cut_site is not None:
        end = [{"op": "jmp", "labels": [
            labels.setdefault(cut_site, resume_label(header, cut_site))]}]
        body, body_x = pre + end, pre_x + end
        cost_pre = cost_loop = count_ops(body)
        cost_pre_x = count_ops(body_x)
        replaced = line.orig_before.get(cut_site, line.orig_instrs)
    else:
        replaced = line.orig_instrs
        # The first pass falls into the loop part, which repeats while the
        # path holds; the loop part skips what the first pass made invariant
        # (and the guards on such values: they passed in the first pass).
        loop_at = loop_label(header, tag)
        checked = _checked_invariants(seq, inv_vars)
        loop, _ = em.emit([e for e in seq if id(e) not in inv
                           and id(e) not in checked], ORIG_LABEL,
                          seed=[e for e in seq if id(e) in inv or id(e) in checked],
                          tail=TAIL_LOOP)
        fail_loop = em.guard_at
        rotated = em.rotate(loop, loop_at)
        body, body_x = pre + rotated, pre_x + rotated
        cost_pre = count_ops(pre)
        cost_pre_x = count_ops(pre_x)
        # Rotated, a pass is the loop part without its `jmp`: the copy of
        # its head at the end starts the next pass (and runs once on entry).
        cost_loop = count_ops(loop) + (rotated[-1].get("op") == "jmp")
    body = body + em.stub_code(body)
    body_x = body_x + em.stub_code(body_x)
    return Candidate(fname, header, tuple(pattern), body, labels, cost_pre=cost_pre,
                     cost_loop=cost_loop, replaced=replaced, guards=guards,
                     blocks=line.blocks, inlined=line.inlined, cut=cut_site is not None,
                     path=[list(e) for e in path], exits=em.nexits,
                     exit_misses=em.misses, body_x=body_x, cost_pre_x=cost_pre_x,
                     first_exits=first_exits, fails=(fail_pre, fail_pre_x, fail_loop),
                     branch_origin=line.branch_origin, orig_at=line.orig_at)


def _leaves(target, body):
    """A guard's exit target outside the loop (None: it has none)."""
    return target is not None and target not in body


def _checked_invariants(seq, inv_vars):
    """ids of the guards on an invariant value that the first pass computed
    before checking it: they hold in every later pass."""
    done = set()
    out = set()
    for e in seq:
        if isinstance(e, tuple):
            continue
        ins = e.instr
        if ins["op"] == "guard" and ins["args"][0] in done:
            out.add(id(e))
        d = ins.get("dest")
        if d in inv_vars:
            done.add(d)
    return out


def invariant_items(seq):
    """ids of the items a loop trace need not recompute after its first pass
    (and the variables they define):
    pure (or safely re-run trapping) computations over variables the trace
    never assigns, whose destination only they assign."""
    items = [e for e in seq if not isinstance(e, tuple)]
    writers = {}
    for it in items:
        d = it.instr.get("dest")
        if d is not None:
            writers.setdefault(d, []).append(it)
    inv = set()
    inv_vars = set()
    changed = True
    while changed:
        changed = False
        for it in items:
            ins = it.instr
            d = ins.get("dest")
            if d is None or id(it) in inv or it.barrier:
                continue
            op = ins["op"]
            if op not in ("const", "id") and op not in FOLDABLE:
                continue
            if not all(a not in writers or a in inv_vars for a in ins.get("args") or []):
                continue
            key = _key(ins)
            if all(_key(w.instr) == key for w in writers[d]):
                for w in writers[d]:
                    inv.add(id(w))
                inv_vars.add(d)
                changed = True
    return inv, inv_vars


def _key(ins):
    return (ins["op"], str(ins.get("type")), tuple(ins.get("args") or ()),
            type(ins.get("value")).__name__, ins.get("value"))


def frequent_patterns(stats, k, most=2, cap=100_000):
    """The `most` most frequent runs of k consecutive iteration paths."""
    if k == 1 or len(stats.seq) == 1:
        order = sorted(range(len(stats.counts)), key=lambda p: -stats.counts[p])
        return [(p,) * k for p in order[:most]]
    # Windows of paths only: those within the stretches between exits (and
    # over-long iterations), counted in order of first occurrence; a long run
    # shows its first k + 1 iterations (only its first windows matter), the
    # outcomes shown stop once more than `cap` were.
    counts = Counter()
    seg = []
    shown = 0
    for o, n in stats.seq:
        n = min(n, k + 1)
        shown += n
        if o < 0:
            if len(seg) >= k:
                counts.update(zip(*(seg[j:] for j in range(k))))
            seg = []
        else:
            seg.extend([o] * n)
        if shown > cap:
            break
    if len(seg) >= k:
        counts.update(zip(*(seg[j:] for j in range(k))))
    for o, n in stats.seq:                      # credit long uniform runs in full
        if o >= 0 and n > k + 1:
            w = (o,) * k
            counts[w] = counts.get(w, 0) + (n - k - 1)
    # (the most frequent, ties in order of first occurrence, as a stable sort)
    return heapq.nlargest(most, counts, key=counts.__getitem__)


def _repeats(events):
    """How often the most entered block of an iteration path is entered."""
    seen = {}
    for e in events[:-1]:
        seen[e] = seen.get(e, 0) + 1
    return max(seen.values(), default=0)


def choose_chain(funcs, infos, stats, livecache, min_share=0.05, min_count=8,
                 first_exits=True, price=None, max_added=None, free=0):
    """The chain worth the most (`Chain.worth`, each added instruction at `price`,
    default `trace_cost.GROWTH_PRICE`, the first `free` at a discount) for one header,
    adding at most `max_added` instructions (None: no limit), or None."""
    total = sum(stats.counts)
    if total < min_count:
        return None
    # The candidates do not depend on `first_exits`: built once per loop (the
    # second selection reuses them).
    price = trace_cost.GROWTH_PRICE if price is None else price
    key = (min_share, min_count, price, max_added, free)
    memo = stats.__dict__.setdefault("candidates", {})
    cands = memo.get(key)
    if cands is None:
        cands = memo[key] = _candidates(funcs, infos, stats, livecache, total, min_share,
                                        min_count, price, max_added, free)
    return _best_chain(infos, stats, cands, first_exits, price, max_added, free)


def _replaced(funcs, stats, pattern, livecache):
    """The original instructions a pass of `pattern` runs (callees' included)."""
    total = 0
    for pid in pattern:
        for fname, bname in stats.path_list[pid][:-1]:
            sizes = livecache.get(("sizes", fname))
            if sizes is None:
                sizes = livecache[("sizes", fname)] = block_sizes(funcs[fname])
            total += sizes.get(bname, 0)
    return total


def _candidates(funcs, infos, stats, livecache, total, min_share, min_count, price=0,
                max_added=None, free=0):
    cands = []
    # A pattern too rarely taken to pay at the price can only be discounted
    # growth: its code must fit `free`, and an unrolling's code is larger than the
    # shorter one's, so once none of those fits, no longer one is built.
    free_fits = True
    for k in UNROLLS:
        if price and k > MAX_PRICED_UNROLL:
            break
        most = 1 if price and k >= ONE_PATTERN_FROM else 2
        free_sizes = []
        for pattern in frequent_patterns(stats, k, most):
            taken = sum(stats.counts[p] for p in set(pattern))
            if taken < max(min_count, min_share * total):
                continue
            passes = taken * stats.scale / k
            priced_out = price and passes <= price * MIN_BODY_SHARE
            if priced_out and (not free_fits or _cannot_pay(
                    passes, _replaced(funcs, stats, pattern, livecache), price, free)):
                # Too few passes to pay for its code, however good (not built:
                # building is most of choosing on a short run).
                continue
            if any(_repeats(stats.path_list[p]) > MAX_REPEAT for p in set(pattern)):
                continue
            if max_added is not None and \
                    MIN_BODY_SHARE * _replaced(funcs, stats, pattern, livecache) > max_added:
                continue                # (its code could not fit: not built)
            try:
                c = build_candidate(funcs, infos, stats, pattern, livecache, len(cands))
            except NotTraceable:
                continue
            if priced_out:
                free_sizes.append(min(count_ops(c.body), count_ops(c.body_x or c.body)))
            if not (c.cut and k > 1):
                cands.append(c)
        if free_sizes and min(free_sizes) > free:
            free_fits = False
    return cands


def _can_pay(c, stats, price, free=0):
    """Could candidate `c` pay for its code (`free` instructions of it at a
    discount) anywhere in a chain?  At best it takes every recorded iteration
    whose path is in its pattern and saves all of the original instructions of
    each (`replaced` a pass of `unroll` iterations)."""
    if not price:
        return True
    most = sum(stats.counts[p] for p in set(c.pattern)) * stats.scale * c.replaced / c.unroll
    return most > code_cost(min(count_ops(c.body), count_ops(c.body_x or c.body)), price, free)


def _cannot_pay(passes, replaced, price, free):
    """Can `passes` passes that each replace `replaced` instructions not pay for
    the least code they could have (`MIN_BODY_SHARE`)?"""
    return passes * replaced <= code_cost(MIN_BODY_SHARE * replaced, price, free)


def _best_chain(infos, stats, cands, first_exits, price, max_added=None, free=0):
    # Candidates that cannot pay for their own code are not tried (simulating the
    # chains is most of choosing them).
    cands = [c for c in cands if _can_pay(c, stats, price, free)]
    # Grow chains a candidate at a time, keeping the BEAM best of each length:
    # a trace that loses alone (its first pass taxes the other phase) can win
    # behind one that takes that phase.
    info = infos[stats.func]
    clone = loop_clone(info.cfg, stats.header, stats.body)
    tail = clone is not None and clone_site(info.func.get("instrs", [])) is not None
    tail_size = count_ops(clone) if tail else 0
    # What each candidate does from each point of the recording, shared by
    # the chains and by both selections (`trace_cost.simulate`).
    memo = stats.__dict__.setdefault("replays", {})
    best = None
    beams = [[]]
    for _ in range(MAX_CHAIN):
        grown = []
        for base in beams:
            for c in cands:
                if any(c is b or _same_cycle(c.pattern, b.pattern) for b in base):
                    continue
                ch = Chain(stats.func, stats.header, base + [c], first_exits, tail, stats.body)
                ch.added, ch.price, ch.free = _added(ch, tail_size), price, free
                if max_added is not None and ch.added > max_added:
                    continue            # (too large: not simulated)
                ch.gain, ch.entries, ch.aborts = trace_cost.simulate(ch, stats, memo)
                grown.append(ch)
        if not grown:
            break
        grown.sort(key=lambda ch: -ch.worth)
        if best is None or grown[0].worth > best.worth:
            best = grown[0]
        beams = [ch.traces for ch in grown[:BEAM]]
    if best is None or best.worth <= 0:
        return None
    return best


def _added(chain, tail_size):
    """The instructions a chain adds: its traces' and the tail copy's."""
    last = len(chain.traces) - 1
    return (tail_size if chain.tail else 0) + sum(
        count_ops(t.body_x if j == last and chain.first_exits else t.body)
        for j, t in enumerate(chain.traces))


def _same_cycle(a, b):
    """Do two patterns repeat one cycle of different paths, from different
    starts?  The recording starts mid-run, so the simulation cannot tell
    which start the run meets first, and in a chain of both the second may
    take the loop with its shorter unrolling.  (Traces of one path, unrolled
    differently, chain well: the shorter one takes the trip count's tail.)"""
    ca = _cycle(a)
    return len(ca) > 1 and ca == _cycle(b)


def _cycle(pattern):
    """The repeating unit of a pattern, up to rotation."""
    n = len(pattern)
    p = next(p for p in range(1, n + 1) if n % p == 0 and pattern == pattern[:p] * (n // p))
    unit = pattern[:p]
    return min(unit[i:] + unit[:i] for i in range(p))


def chain_instrs(chain):
    """The instructions placed right after the header label for a chain, and
    the labels it needs in the original code ({index: [labels]})."""
    h = chain.header
    out = []
    labels = {}
    starts = [None] + [chain_label(h, j) for j in range(1, len(chain.traces))]
    orig = orig_label(h)
    for j, t in enumerate(chain.traces):
        nxt = starts[j + 1] if j + 1 < len(chain.traces) else orig
        tail = tail_label(h, h) if chain.tail else orig
        fill = {FAIL_LABEL: nxt, ORIG_LABEL: orig, TAIL_LOOP: tail,
                TAIL_PRE: tail if nxt == orig else nxt}
        if starts[j] is not None:
            out.append({"label": starts[j]})
        last = j == len(chain.traces) - 1
        for ins in (t.body_x if last and chain.first_exits else t.body):
            if any(l in fill for l in ins.get("labels", ())):
                ins = dict(ins, labels=[fill.get(l, l) for l in ins["labels"]])
            out.append(ins)
        for site, lab in t.labels.items():
            labels.setdefault(site, set()).add(lab)
    out.append({"label": orig})
    return out, labels
