"""Control-flow graphs of Bril programs as Graphviz DOT, with traced regions shown.

One cluster per function, one box per basic block (`bril.analysis.cfg.CFG`) listing its
instructions, and edges for jumps, branches (labelled with the condition),
fall-through and guard failure (dashed red).

Traced regions, as `bril.tracing.tracer` splices them in, are recognised by their
marks: a loop header label `H` whose code starts with a `speculate` carrying
`"trace": "H"`, the original header code at `H.trace.orig`, a trace's
repeating (peeled) part at `H.trace.loop` or `H.trace.loopJ`, the J-th trace
of a chain at `H.trace.cJ`, resume points in the original code at
`H.trace.rN`.  Trace blocks are filled blue, resume points yellow, the
original header code grey.

A trace report (`brili --trace-report`) adds the hot paths: the blocks and
edges of each trace's `path` ([[func, block], ...]) are drawn thick orange, and
each trace's first block gets the report's figures for it.  Fields the report
lacks are skipped.
"""


from dataclasses import dataclass, field

from ..analysis.cfg import CFG
from ..ir.errors import BrilError
from ..ir.printer import format_instr, format_type
from ..ir.tracelabels import (MARK, ORIG_PART, chain_label, is_resume_part, is_trace_part,
                              orig_label, part)

TRACE_FILL = "#cfe2ff"
RESUME_FILL = "#fff3bf"
ORIG_FILL = "#e9ecef"
HOT_COLOR = "#e8590c"
GUARD_COLOR = "#c92a2a"

# The report's per-trace figures worth a line on the header box, in this order.
REPORT_FIELDS = (("unroll", "unroll"), ("blocks", "blocks"), ("guards", "guards"),
                 ("inlined_calls", "calls inlined"), ("instrs_replaced", "instrs replaced"),
                 ("cost_first", "first pass"), ("cost_loop", "loop pass"),
                 ("entries", "entries"), ("aborts", "aborts"), ("saved", "saved"),
                 ("saved_estimate", "saves ~"))



def quote(text):
    """A DOT double-quoted string (any text)."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _line(text):
    """One left-justified line of a box label (escaped for a DOT string)."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + "\\l"


@dataclass
class FunctionGraph:
    func: dict
    cfg: CFG
    ids: dict                               # block name -> DOT node id
    traces: dict = field(default_factory=dict)   # trace header -> set of its blocks
    resumes: set = field(default_factory=set)
    origs: set = field(default_factory=set)

    def kind(self, name):
        if any(name in blocks for blocks in self.traces.values()):
            return "trace"
        if name in self.resumes:
            return "resume"
        if name in self.origs:
            return "orig"
        return None


def find_traces(cfg):
    """{header: blocks of its trace} for the regions the tracer marked in a CFG.

    A trace is what its header reaches through blocks the tracer made: its
    repeating parts (`H.trace.loopJ`), the later traces of its chain
    (`H.trace.cJ`) and the unlabelled blocks its guards start; the original
    code (every other label, resume points and `H.trace.orig` included) is
    outside."""
    traces = {}
    for name, block in cfg.blocks.items():
        if not any(i.get("op") == "speculate" and i.get(MARK) == name for i in block.instrs):
            continue

        def inside(b, h=name):
            if cfg.blocks[b].label is None:
                return True
            rest = part(h, b)
            return rest is not None and is_trace_part(rest)
        region, stack = {name}, [name]
        while stack:
            for s in cfg.succs[stack.pop()]:
                if s not in region and inside(s):
                    region.add(s)
                    stack.append(s)
        traces[name] = region
    return traces


def analyse(func, index):
    cfg = CFG.from_function(func)
    ids = {name: f"f{index}b{i}" for i, name in enumerate(cfg.blocks)}
    g = FunctionGraph(func, cfg, ids, find_traces(cfg))
    for h in g.traces:
        for b in cfg.blocks:
            rest = part(h, b)
            if rest is not None:
                if rest == ORIG_PART:
                    g.origs.add(b)
                elif is_resume_part(rest):
                    g.resumes.add(b)
    return g


# --- the report's hot paths ------------------------------------------------------------

def _report_traces(report):
    """The report's trace entries that are objects (anything else is ignored)."""
    traces = report.get("traces") if isinstance(report, dict) else None
    return [t for t in traces if isinstance(t, dict)] if isinstance(traces, list) else []


def _path_steps(trace):
    """(func, block) pairs of a trace's path; malformed steps are skipped."""
    path = trace.get("path")
    if not isinstance(path, list):
        return []
    return [(s[0], s[1]) for s in path
            if isinstance(s, (list, tuple)) and len(s) == 2
            and isinstance(s[0], str) and isinstance(s[1], str)]


def hot_paths(graphs, report):
    """(hot nodes, hot edges) as sets of (func, block) and (func, from, to).

    A path names the original program's blocks.  In a traced program a traced
    header's original code is at `H.trace.orig`, and a block a resume label
    split continues through the resume blocks it falls into; both count."""
    nodes, edges = set(), set()
    for trace in _report_traces(report):
        by_func = {}
        for fname, block in _path_steps(trace):
            by_func.setdefault(fname, []).append(block)
        for fname, blocks in by_func.items():
            g = graphs.get(fname)
            if g is None:
                continue
            spans = [_stand_ins(g, b) for b in blocks]
            for span in spans:
                nodes.update((fname, b) for b in span)
                edges.update((fname, a, b) for a, b in zip(span, span[1:]))
            # Consecutive blocks of one function, and the last back to the first
            # (a path is one loop iteration): an edge only where the CFG has one.
            for (i, a), b in zip(enumerate(spans), spans[1:] + spans[:1]):
                src = a[-1] if a else None
                target = blocks[(i + 1) % len(blocks)]
                for dst in ((b[0] if b else None), target):
                    if src is not None and dst in g.cfg.succs.get(src, ()):
                        edges.add((fname, src, dst))
                        break
    return nodes, edges


def _stand_ins(g, block):
    """The blocks of graph g that hold original block `block`'s code, in order
    (see hot_paths); [] if it has none."""
    name = block
    if name in g.traces and orig_label(name) in g.cfg.blocks:
        name = orig_label(name)
    if name not in g.cfg.blocks:
        return []
    span = [name]
    while True:
        b = g.cfg.blocks[span[-1]]
        nxt = b.fall if b.terminator is None else None
        if nxt is None or nxt not in g.resumes or nxt in span:
            return span
        span.append(nxt)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _chain_position(trace):
    j = trace.get("chain_position", 0)
    return j if isinstance(j, int) and not isinstance(j, bool) and j >= 0 else 0


def _report_lines(trace, per_line=4):
    """The report's figures for a trace, a few per line."""
    parts = [f"{label}{'' if label.endswith('~') else ' '}{trace[key]}"
             for key, label in REPORT_FIELDS if _is_number(trace.get(key))]
    if trace.get("cut") is True:
        parts.append("cut")
    j = _chain_position(trace)
    title = f"trace {j + 1} of the chain" if j else "trace"
    if not parts:
        return [f"{title} (no figures in the report)"]
    rows = [", ".join(parts[i:i + per_line]) for i in range(0, len(parts), per_line)]
    return [f"{title}: {rows[0]}"] + ["  " + r for r in rows[1:]]


def _trace_start(trace):
    """The block where a reported trace starts: its header, or `H.trace.cJ`."""
    j, h = _chain_position(trace), trace["header"]
    return chain_label(h, j)


# --- writing -----------------------------------------------------------------------------

def _signature(func):
    sig = "@" + func["name"]
    if func.get("args"):
        sig += "(" + ", ".join(f"{a['name']}: {format_type(a['type'])}" for a in func["args"]) + ")"
    if func.get("type", "void") != "void":
        sig += ": " + format_type(func["type"])
    return sig


def _block_label(g, name, max_lines, notes):
    block = g.cfg.blocks[name]
    lines = list(notes or ())
    if block.label is not None:
        lines.append(f".{name}:")
    instrs = [format_instr(i) for i in block.instrs]
    if max_lines and len(instrs) > max_lines:
        keep = max(1, max_lines - 1)
        head, tail = keep - keep // 2, keep // 2
        instrs = instrs[:head] + [f"... {len(instrs) - head - tail} more ..."] + \
            (instrs[len(instrs) - tail:] if tail else [])
    lines += ["  " + i for i in instrs]
    if not lines:
        lines = ["(empty)"]
    return '"' + "".join(_line(l) for l in lines) + '"'


def _edges(g):
    """(from, to, attributes) for every edge of a function's CFG."""
    out = []
    for name, block in g.cfg.blocks.items():
        term = block.terminator
        op = term["op"] if term else None
        if op == "br":
            # A malformed br (not two labels) is drawn as written, not judged.
            cond = (term.get("args") or ["?"])[0]
            labels = list(term.get("labels") or ())
            if len(labels) == 2 and labels[0] != labels[1]:
                out.append((name, labels[0], {"label": cond}))
                out.append((name, labels[1], {"label": "!" + cond}))
            else:
                out += [(name, l, {}) for l in dict.fromkeys(labels)]
        elif op == "jmp":
            out += [(name, l, {}) for l in term.get("labels", ())]
        elif op != "ret":
            if block.fall is not None:
                out.append((name, block.fall, {}))
            if op == "guard":
                out += [(name, l, {"style": "dashed", "color": GUARD_COLOR})
                        for l in term.get("labels", ())]
    return [(a, b, attrs) for a, b, attrs in out if b in g.cfg.blocks]


def _attrs(attrs):
    """` [k="v", ...]`, or nothing for no attributes."""
    return " [" + ", ".join(f"{k}={quote(v)}" for k, v in attrs.items()) + "]" if attrs else ""


def program_to_dot(prog, func=None, report=None, max_lines=None):
    """The DOT text of a program's CFGs (or only of function `func`)."""
    funcs = prog["functions"]
    if func is not None:
        name = func[1:] if func.startswith("@") else func
        funcs = [f for f in funcs if f["name"] == name]
        if not funcs:
            raise BrilError(f"no function @{name} in the program")
    graphs = {}
    for i, f in enumerate(funcs):
        graphs.setdefault(f["name"], analyse(f, i))
    hot_nodes, hot_edges = hot_paths(graphs, report) if report else (set(), set())
    notes = {}
    for t in _report_traces(report or {}):
        if isinstance(t.get("func"), str) and isinstance(t.get("header"), str):
            notes.setdefault((t["func"], _trace_start(t)), []).extend(_report_lines(t))

    out = ["digraph bril {",
           '  node [shape=box, fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=9];']
    seen = set()
    for i, f in enumerate(funcs):
        g = graphs[f["name"]]
        if id(g) in seen:          # a duplicate function name: drawn once
            continue
        seen.add(id(g))
        fname = f["name"]
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f"    label={quote(_signature(f))}; labeljust=l; fontname=\"monospace\";")
        for name in g.cfg.blocks:
            attrs = {}
            kind = g.kind(name)
            fill = {"trace": TRACE_FILL, "resume": RESUME_FILL, "orig": ORIG_FILL}.get(kind)
            if fill:
                attrs.update(style="filled", fillcolor=fill)
            if (fname, name) in hot_nodes:
                attrs.update(color=HOT_COLOR, penwidth="3")
            elif name == g.cfg.entry:
                attrs["penwidth"] = "2"
            note = notes.get((fname, name)) if kind == "trace" else None
            label = _block_label(g, name, max_lines, note)
            extra = "".join(f", {k}={quote(v)}" for k, v in attrs.items())
            out.append(f"    {g.ids[name]} [label={label}{extra}];")
        for a, b, attrs in _edges(g):
            attrs = dict(attrs)
            if (fname, a, b) in hot_edges:
                attrs.update(color=HOT_COLOR, penwidth="3")
            out.append(f"    {g.ids[a]} -> {g.ids[b]}{_attrs(attrs)};")
        out.append("  }")
    legend = _legend(graphs.values(), bool(hot_nodes))
    if legend:
        out.append(f"  label={quote(legend)}; labelloc=b; fontname=\"monospace\"; fontsize=10;")
    out.append("}")
    return "\n".join(out) + "\n"


def _legend(graphs, hot):
    items = []
    if any(g.traces for g in graphs):
        items += ["blue: speculative trace", "yellow: resume point",
                  "grey: original header code"]
    if any(op == "guard" for g in graphs for b in g.cfg.blocks.values()
           for op in [b.terminator and b.terminator["op"]]):
        items.append("dashed red: guard failure")
    if hot:
        items.append("thick orange: hot path (trace report)")
    return "; ".join(items)
