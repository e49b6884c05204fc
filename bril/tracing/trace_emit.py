"""Emitting a trace: a candidate's region sequence as Bril instructions.

`trace_opt` leaves a trace as items split into regions by ("spec", site) /
("commit", None) markers; the `Emitter` decides, per region, how its guards
fail (a side exit proven by `trace_exit`, a plain branch back to the region's
start when nothing needs rolling back, or `speculate` ... `commit` with
`guard`s) and writes the instructions, the exit stubs, and the rotated
(bottom-tested) loop part.  `loop_clone` writes the copy of a loop that
merged loop tests fail to when the loop is about to end (its tail).
"""

from .trace_build import Item
from .trace_cost import FailPoint
from .trace_opt import is_effect
from ..ir.tracelabels import MARK, resume_label


def count_ops(instrs):
    """Instructions in a list (labels are not executed)."""
    return sum(1 for i in instrs if "op" in i)


# A loop part whose first guard is a plain branch this close to its top is
# rotated (bottom-tested): the code up to that branch is repeated at its end,
# so each pass saves the `jmp` back.
MAX_ROTATE = 64


class Emitter:
    """Turns a region sequence into Bril.

    A region is speculative (`speculate` ... `commit`, guards abort to its
    resume label with a rollback) unless no guard in it can fail after a
    write to a variable live at that label: then a rollback would change
    nothing, and it is emitted without `speculate`/`commit`, each guard as
    `br COND .next .RESUME` (a guard on a negated value branches on the value
    itself, the other way round).  The first instruction of every region
    carries the `"trace": HEADER` mark."""

    def __init__(self, header, tag, labels, live, temps, seq, inv, fresh, exits=None):
        self.header, self.tag, self.labels = header, tag, labels
        self.exits = exits                  # trace_exit.Exits, or None: no side exits
        self.stubs = {}                     # (target, copies) -> stub label
        self.nexits = 0
        self.misses = 0
        # origin -> (instructions of the pass up to its guard, side exit?,
        # instructions of the exit's stub, to the tail?)
        self.guard_at = {}
        self.stub_len = {}
        self.tail = None
        self.exit_tests = set()             # origins of branches whose other side leaves the loop
        self.sym = None
        self.fresh = fresh
        self.live = live
        self.temps = temps                  # fresh trace temporaries (dead in the original)
        self.inv = inv
        self.nlabel = 0
        self.uses = {}
        for e in seq:
            if not isinstance(e, tuple):
                for a in e.instr.get("args") or ():
                    self.uses[a] = self.uses.get(a, 0) + 1

    def fresh_label(self):
        self.nlabel += 1
        return f"{self.header}.{MARK}.k{self.tag}.{self.nlabel}"

    def live_at(self, site):
        if site is None:
            # The next trace of the chain or the original header: both read
            # only what the original reads at the header (traces define their
            # temporaries before reading them).
            return self.live.live_in[self.header]
        return self.live.before(site)

    def emit(self, seq, first_fail, seed=(), exits=True, tail=None):
        """(instructions, number of guards).  `seed`: items computed before
        (the loop invariants a loop part does not recompute); `exits`: give
        guards side exits where possible; `tail`: where a merged loop test
        of the first region fails (fewer iterations left than the pass
        runs), if not to `first_fail`."""
        self.tail = tail
        body = []
        guards = 0
        region = None                       # (resume label, resume site, items)
        self.sym = None
        self.guard_at = {}
        if self.exits is not None and exits:
            self.sym = self.exits.start(seed)
        for entry in seq:
            if isinstance(entry, tuple):
                kind, site = entry
                if kind == "spec":
                    lab = first_fail if site is None else self.labels.setdefault(
                        site, resume_label(self.header, site))
                    region = (lab, site, [])
                else:
                    guards += self._region(body, *region)
                    region = None
                continue
            if region is not None:
                region[2].append(entry)
            else:
                body.append(dict(entry.instr))
                if self.sym is not None:
                    self.sym.run(entry.instr)
        if region is not None:
            guards += self._region(body, *region)
        return body, guards

    def _spec_free(self, site, items, exits=()):
        live = self.live_at(site)
        written = set()
        for i, it in enumerate(items):
            if it.instr["op"] == "guard":
                if i in exits:
                    continue                # leaves through its side exit
                if written & live:
                    return False
            elif it.barrier or is_effect(it):
                written |= live             # a guard after it could not undo it
            elif it.instr.get("dest") is not None:
                written.add(it.instr["dest"])
        return True

    def _swappable(self, items, idx):
        """Is items[idx], a guard, on a fresh `not` right before it?"""
        c = items[idx].instr["args"][0]
        prev = items[idx - 1].instr if idx > 0 else None
        return (prev is not None and prev["op"] == "not" and prev.get("dest") == c
                and c in self.temps and self.uses.get(c) == 1
                and id(items[idx - 1]) not in self.inv)

    def _renamed(self, site, items, first):
        """The region's items made free of rollbacks by writing, up to its
        last guard, fresh copies of the variables live at its resume label
        (copied back after that guard), if that costs fewer instructions than
        `speculate`/`commit` and the `not`s a plain branch saves (and, for the
        first region of a loop part, the `jmp` a rotation saves); else None."""
        live = self.live_at(site)
        last = max(i for i, it in enumerate(items) if it.instr["op"] == "guard")
        written = {}
        for it in items[:last]:
            if it.barrier or is_effect(it):
                return None
            d = it.instr.get("dest")
            if d is not None and d in live:
                written[d] = it.instr.get("type")
        # A copy back is needed unless the rest of the region overwrites first.
        need = []
        for v in written:
            for it in items[last + 1:]:
                if v in (it.instr.get("args") or ()):
                    need.append(v)
                    break
                if it.instr.get("dest") == v:
                    break
            else:
                need.append(v)
        nots = sum(1 for i, it in enumerate(items)
                   if it.instr["op"] == "guard" and self._swappable(items, i))
        if len(need) >= 2 + nots + first:
            return None
        ren = {v: self.fresh() for v in written}
        cur = {}
        out = []
        for it in items[:last + 1]:
            ins = dict(it.instr)
            if "args" in ins:
                ins["args"] = [cur.get(a, a) for a in ins["args"]]
            d = ins.get("dest")
            if d in ren:
                ins["dest"] = cur[d] = ren[d]
            out.append(Item(ins, it.site, it.frame, it.barrier, it.origin, it.covers))
        for v in need:
            out.append(Item({"op": "id", "dest": v, "type": written[v], "args": [ren[v]]},
                            items[last].site, 0))
        out.extend(items[last + 1:])
        return out

    def _find_exits(self, items):
        """{index of a guard in items: side exit label} for the region's guards
        that can leave to the original code, emitted as plain branches."""
        if self.sym is None:
            return {}
        st = self.sym.copy()
        found = {}
        self.stub_len = {}
        for i, it in enumerate(items):
            if it.instr["op"] != "guard":
                st.run(it.instr)
                continue
            x = self.exits.find(it, st)
            st.passed(it)
            if x is None:
                continue
            target, copies = x
            self.stub_len[i] = len(copies) + 1 if copies else 0
            if not copies:
                found[i] = target
                continue
            key = (target, tuple(copies))
            lab = self.stubs.get(key)
            if lab is None:
                lab = self.stubs[key] = f"{self.header}.{MARK}.x{self.tag}.{len(self.stubs) + 1}"
            found[i] = lab
        return found

    def stub_code(self, body):
        """The stubs of the side exits `body` takes: copies back to the original
        variables, then the jump to the branch target in the original code."""
        used = {lab for ins in body for lab in ins.get("labels", ())}
        out = []
        for (target, copies), lab in self.stubs.items():
            if lab not in used:
                continue
            out.append({"label": lab})
            for v, t, src in copies:
                out.append({"op": "id", "dest": v, "type": t, "args": [src]})
            out.append({"op": "jmp", "labels": [target]})
        return out

    def _region(self, body, resume, site, items):
        start = len(body)
        self._emit_region(body, resume, site, items)
        if self.sym is not None:
            for ins in body[start:]:
                self.sym.run(ins)
            for it in items:
                if it.instr["op"] == "guard":
                    self.sym.passed(it)
        return sum(1 for it in items if it.instr["op"] == "guard")

    def _emit_region(self, body, resume, site, items):
        n = sum(1 for it in items if it.instr["op"] == "guard")
        if not items:
            return
        start = len(body)
        exits = self._find_exits(items) if n else {}
        if n and not self._spec_free(site, items, exits):
            exits = {}
            renamed = self._renamed(site, items, start == 0)
            if renamed is not None:
                items = renamed
        if n and not self._spec_free(site, items, exits):
            if self.sym is not None:
                self.misses += sum(1 for it in items
                                   if it.instr["op"] == "guard" and it.origin >= 0)
            body.append({"op": "speculate"})
            done = count_ops(body)
            for it in items:
                ins = dict(it.instr)
                body.append(ins)
                done += 1
                if ins["op"] == "guard":
                    ins["labels"] = [self._fail_to(it, site, resume)]
                    self._at(it, done, False, 0, ins["labels"][0] == self.tail)
            body.append({"op": "commit"})
        else:
            done = count_ops(body)
            for idx, it in enumerate(items):
                ins = dict(it.instr)
                if ins["op"] != "guard":
                    body.append(ins)
                    done += 1
                    continue
                cont = self.fresh_label()
                c = ins["args"][0]
                fail = exits.get(idx) or self._fail_to(it, site, resume)
                if idx in exits:
                    self.nexits += 1
                elif items[idx].origin >= 0 and self.sym is not None:
                    self.misses += 1
                prev = body[-1] if len(body) > start else None
                if (prev is not None and prev.get("dest") == c and self._swappable(items, idx)):
                    body.pop()
                    body.append({"op": "br", "args": list(prev["args"]), "labels": [fail, cont]})
                else:
                    body.append({"op": "br", "args": [c], "labels": [cont, fail]})
                    done += 1
                self._at(it, done, idx in exits, self.stub_len.get(idx, 0),
                         idx not in exits and fail == self.tail)
                body.append({"label": cont})
        if len(body) > start:
            first = next(i for i in body[start:] if "op" in i)
            first[MARK] = self.header

    def _fail_to(self, item, site, resume):
        """Where a guard rolling back (or needing no rollback) goes: a merged
        loop test of the first region (it stands for several original
        branches, each of which leaves the loop the other way: the loop ends
        within the pass) goes to the tail, if there is one; any other guard
        to the resume label."""
        if (self.tail is not None and site is None and item.origin < 0 and item.covers
                and all(o in self.exit_tests for o in item.covers)):
            return self.tail
        return resume

    def _at(self, item, done, exits, stub, tail):
        """Note where the guard `item` fails: after `done` instructions of the
        pass, leaving through a side exit (whose stub runs `stub` more), to
        the tail or rolling back (`trace_cost.simulate` charges aborts by it)."""
        for o in (item.origin,) + tuple(item.covers):
            if o >= 0:
                self.guard_at[o] = FailPoint(done, exits, stub, tail)

    def rotate(self, loop, loop_label):
        """The loop part as it follows the first pass: bottom-tested if it
        starts (nearly) with a branch, else `loop_label: ...; jmp loop_label`."""
        p = next((i for i, ins in enumerate(loop) if ins.get("op") == "br"), None)
        if p is None or count_ops(loop[:p]) > MAX_ROTATE:
            return [{"label": loop_label}] + loop + [{"op": "jmp", "labels": [loop_label]}]
        head, cont, rest = loop[:p + 1], loop[p + 1]["label"], loop[p + 2:]

        def copy():
            ren = {ins["label"]: self.fresh_label() for ins in head if "label" in ins}
            ren[cont] = loop_label
            out = []
            for ins in head:
                if "label" in ins:
                    out.append({"label": ren[ins["label"]]})
                elif ins.get("op") == "br":
                    out.append(dict(ins, labels=[ren.get(l, l) for l in ins["labels"]]))
                else:
                    out.append(dict(ins))
            return out

        return copy() + [{"label": loop_label}] + rest + copy()


def tail_label(header, block):
    return f"{header}.{MARK}.t.{block}"


def loop_clone(cfg, header, body, label=None):
    """A copy of the loop of `header` (its blocks `body`, as `cfg` names them)
    whose jumps inside the loop stay in the copy and whose exits go where
    the loop's go; its entry is `label(header, header)` (default `tail_label`).
    None if some block falls through to an unlabeled block or off the
    function's end."""
    label = label or tail_label
    out = []
    for name, blk in cfg.blocks.items():
        if name not in body:
            continue
        out.append({"label": label(header, name)})
        for ins in blk.instrs:
            if "labels" in ins:         # (jmp, br, and a trace's guards)
                ins = dict(ins, labels=[label(header, l) if l in body else l
                                        for l in ins["labels"]])
            out.append(dict(ins))
        if blk.terminator is None:
            nxt = blk.fall
            if nxt is None or (nxt not in body and cfg.blocks[nxt].label is None):
                return None
            out.append({"op": "jmp", "labels": [label(header, nxt) if nxt in body else nxt]})
    return out


def clone_site(instrs):
    """An index where code can be inserted that nothing falls into (right
    after a `jmp`, `br` or `ret`), or None."""
    for i, ins in enumerate(instrs):
        if ins.get("op") in ("jmp", "br", "ret"):
            return i + 1
    return None
