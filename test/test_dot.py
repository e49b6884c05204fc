"""`bril2dot`: control-flow graphs as DOT, traced regions and hot paths marked.

The DOT text is read back by a small parser below (tokens, statements, node
and edge attributes, label unescaping), so the tests check what the picture
says -- which block is filled, which edge is dashed -- not how it is spelled.
Where Graphviz's `dot` is installed it must also render every graph; where it is
not, the command's rendering runs against a stand-in `dot` that checks how it is
called.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from bril.tools import dot as bdot
from bril.ir.errors import BrilError
from bril.interpreter.interp import run_capture
from bril.ir.text import parse_program

from corpus import program_text

HAVE_DOT = shutil.which("dot") is not None

# Graphviz's command line as bril2dot uses it: `dot -TFMT -o FILE`, DOT on stdin.
STAND_IN_DOT = """#!{python}
import sys
args = sys.argv[1:]
fmt = [a[2:] for a in args if a.startswith("-T")]
out = args[args.index("-o") + 1] if "-o" in args else None
text = sys.stdin.read()
if len(fmt) != 1 or fmt[0] not in ("svg", "png") or out is None \\
        or not text.lstrip().startswith("digraph"):
    sys.exit("stand-in dot: unexpected call " + repr(args))
magic = {{"svg": b"<svg>", "png": b"\\x89PNG\\r\\n\\x1a\\n"}}[fmt[0]]
with open(out, "wb") as fh:
    fh.write(magic + text.encode())
"""


@pytest.fixture
def dot_on_path(tmp_path, monkeypatch):
    """Graphviz's `dot` if installed, else the stand-in, first on PATH."""
    if not HAVE_DOT:
        folder = tmp_path / "bin"
        folder.mkdir()
        (folder / "dot").write_text(STAND_IN_DOT.format(python=sys.executable))
        (folder / "dot").chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

# --- reading DOT back ----------------------------------------------------------------

_TOKEN = re.compile(r'\s+|(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->)|(?P<id>[A-Za-z_][A-Za-z_0-9]*'
                    r'|-?\d+(?:\.\d+)?)|(?P<punct>[{}\[\];=,])|(?P<bad>.)', re.S)
_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph"}


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            c = s[i + 1]
            out.append("\n" if c in "lnr" else c)
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def parse_dot(text):
    """(nodes {id: attrs}, edges [(a, b, attrs)], clusters [label]) of our DOT
    output; asserts the token-level syntax on the way."""
    toks = []
    for m in _TOKEN.finditer(text):
        assert m.lastgroup != "bad", f"stray character {m.group()!r} at {m.start()}"
        if m.lastgroup == "str":
            toks.append(("str", _unescape(m.group()[1:-1])))
        elif m.lastgroup:
            toks.append((m.lastgroup, m.group()))
    assert toks[:3] == [("id", "digraph"), ("id", "bril"), ("punct", "{")]
    depth, nodes, edges, clusters = 0, {}, [], []
    stmt = []
    for tok in toks:
        if tok == ("punct", "{"):
            if stmt[:1] == [("id", "subgraph")]:
                assert len(stmt) == 2 and stmt[1][1].startswith("cluster_")
            depth += 1
            stmt = []
        elif tok == ("punct", "}"):
            assert not stmt, f"unterminated statement {stmt}"
            depth -= 1
            assert depth >= 0
        elif tok == ("punct", ";"):
            kind, ident, attrs, target = _statement(stmt)
            if kind == "node":
                assert ident not in nodes, f"node {ident} declared twice"
                nodes[ident] = attrs
            elif kind == "edge":
                edges.append((ident, target, attrs))
            elif kind == "label" and depth == 2:
                clusters.append(attrs)
            stmt = []
        else:
            stmt.append(tok)
    assert depth == 0 and not stmt
    for a, b, _ in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} to an undeclared node"
    return nodes, edges, clusters


def _statement(stmt):
    """Classify one `;`-terminated statement."""
    if len(stmt) == 3 and stmt[1] == ("punct", "="):
        return ("label" if stmt[0][1] == "label" else "attr"), None, stmt[2][1], None
    head = stmt[0]
    assert head[0] == "id", stmt
    if head[1] in _KEYWORDS:
        return "default", None, _attr_list(stmt[1:]), None
    if len(stmt) > 2 and stmt[1][0] == "arrow":
        return "edge", head[1], _attr_list(stmt[3:]), stmt[2][1]
    return "node", head[1], _attr_list(stmt[1:]), None


def _attr_list(toks):
    if not toks:
        return {}
    assert toks[0] == ("punct", "[") and toks[-1] == ("punct", "]"), toks
    attrs, body = {}, toks[1:-1]
    for i in range(0, len(body), 4):
        key, eq, value = body[i:i + 3]
        assert eq == ("punct", "=") and key[0] == "id", body
        attrs[key[1]] = value[1]
        if i + 3 < len(body):
            assert body[i + 3] == ("punct", ","), body
    return attrs


def block_name(attrs):
    """A node's block label line (".name:"), or its first instruction if it has none."""
    lines = [l.strip() for l in attrs["label"].splitlines() if l.strip()]
    return next((l for l in lines if l.startswith(".") and l.endswith(":")), lines[0])


def names(nodes):
    """{node id: block_name} (unlabelled blocks' names may repeat)."""
    return {i: block_name(a) for i, a in nodes.items()}


def render(text, fmt="svg"):
    done = subprocess.run(["dot", f"-T{fmt}"], input=text.encode(), capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


# --- programs ------------------------------------------------------------------------

PLAIN = program_text("dot/plain")

ORIGINAL = program_text("dot/original")

# The loop of ORIGINAL with a trace spliced in by hand, in the marks the tracer
# uses: a first pass, a peeled loop part (`k` is invariant), the original
# header code at .loop.trace.orig and a resume point .loop.trace.r9.
TRACED = program_text("dot/traced")

REPORT = {
    "original_count": 1000, "traced_count": 900,
    "traces": [{"func": "main", "header": "loop", "unroll": 1,
                "path": [["main", "loop"], ["main", "body"], ["main", "hi"],
                         ["main", "next"], ["main", "loop"]],
                "blocks": 4, "instrs_replaced": 9, "cost_first": 12, "cost_loop": 11,
                "guards": 2, "inlined_calls": 0, "entries": 20, "aborts": 3, "saved": 77}],
    "dropped": [],
}


def traced_program():
    """TRACED as JSON, its speculates carrying the tracer's "trace" mark."""
    prog = parse_program(TRACED)
    for ins in prog["functions"][0]["instrs"]:
        if ins.get("op") == "speculate":
            ins[bdot.MARK] = "loop"
    return prog


# --- tests -----------------------------------------------------------------------------

def test_plain_program_blocks_edges_and_clusters():
    text = bdot.program_to_dot(parse_program(PLAIN))
    nodes, edges, clusters = parse_dot(text)
    assert clusters == ["@main(n: int)", "@twice(v: int): int"]
    name = names(nodes)
    block = {n: nodes[i] for i, n in name.items()}
    assert len(block) == len(nodes) == 5
    assert set(block) == {"one: int = const 1", ".loop:", ".body:", ".done:",
                          "r: int = add v v"}
    assert block[".body:"]["label"] == ".body:\n  i: int = add i one\n  jmp .loop\n"
    # Entry blocks have a thicker border; nothing is filled in a plain program.
    assert block["one: int = const 1"]["penwidth"] == "2"
    assert block["r: int = add v v"]["penwidth"] == "2"
    assert all("penwidth" not in block[n] for n in (".loop:", ".body:", ".done:"))
    assert all("fillcolor" not in a for a in nodes.values())
    named = {(name[a], name[b], attrs.get("label")) for a, b, attrs in edges}
    assert named == {("one: int = const 1", ".loop:", None),        # fall-through
                     (".loop:", ".body:", "more"), (".loop:", ".done:", "!more"),
                     (".body:", ".loop:", None)}                    # jmp; ret: no edge
    assert not any(a.get("style") == "dashed" for _, _, a in edges)


def test_one_function_only():
    prog = parse_program(PLAIN)
    _, _, clusters = parse_dot(bdot.program_to_dot(prog, "@twice"))
    assert clusters == ["@twice(v: int): int"]
    assert parse_dot(bdot.program_to_dot(prog, "twice"))[2] == clusters
    with pytest.raises(BrilError, match="no function @nope"):
        bdot.program_to_dot(prog, "nope")


def test_hand_traced_program_is_faithful():
    # The test's traced program must mean what the original means.
    for n in ("0", "3", "12"):
        assert run_capture(traced_program(), [n])[0] == run_capture(parse_program(ORIGINAL), [n])[0]


def test_traced_regions_are_filled_and_guard_failures_dashed():
    nodes, edges, _ = parse_dot(bdot.program_to_dot(traced_program()))
    fills = {}
    for ident, attrs in nodes.items():
        fills.setdefault(attrs.get("fillcolor"), set()).add(ident)
    name = names(nodes)
    trace = fills[bdot.TRACE_FILL]
    # The header, the peeled loop part and the four blocks after its guards.
    assert len(trace) == 6
    assert {".loop:", ".loop.trace.loop:"} < {name[i] for i in trace}
    assert nodes[next(i for i in trace if name[i] == ".loop:")]["label"].startswith(
        ".loop:\n  speculate\n")
    assert [name[i] for i in fills[bdot.ORIG_FILL]] == [".loop.trace.orig:"]
    assert [name[i] for i in fills[bdot.RESUME_FILL]] == [".loop.trace.r9:"]
    assert {name[i] for i in fills[None]} == {"one: int = const 1", ".body:", ".lo:", ".hi:",
                                              ".next:", ".done:"}
    dashed = [(a, b) for a, b, attrs in edges if attrs.get("style") == "dashed"]
    assert len(dashed) == 4                       # one per guard
    assert all(a in trace and b not in trace for a, b in dashed)
    assert all(nodes[a]["label"].rstrip().splitlines()[-1].lstrip().startswith("guard ")
               for a, _ in dashed)
    assert all(attrs["color"] == bdot.GUARD_COLOR for _, _, attrs in edges
               if attrs.get("style") == "dashed")


def test_report_highlights_the_hot_path_and_annotates_the_header():
    nodes, edges, _ = parse_dot(bdot.program_to_dot(traced_program(), report=REPORT))
    name = names(nodes)
    hot = {name[i] for i, a in nodes.items() if a.get("color") == bdot.HOT_COLOR}
    # The path's header is the original header code; .body continues into the
    # resume block that a resume label split off it.
    assert hot == {".loop.trace.orig:", ".body:", ".loop.trace.r9:", ".hi:", ".next:"}
    hot_edges = {(name[a], name[b]) for a, b, attrs in edges
                 if attrs.get("color") == bdot.HOT_COLOR}
    # ... and the loop closes into the trace, which now owns the header label.
    assert hot_edges == {(".loop.trace.orig:", ".body:"), (".body:", ".loop.trace.r9:"),
                         (".loop.trace.r9:", ".hi:"), (".hi:", ".next:"), (".next:", ".loop:")}
    header = next(a["label"] for a in nodes.values() if a["label"].startswith("trace:"))
    assert "unroll 1" in header and "guards 2" in header and "saved 77" in header
    assert ".loop:\n  speculate" in header


def test_report_on_the_original_program():
    nodes, edges, _ = parse_dot(bdot.program_to_dot(parse_program(ORIGINAL), report=REPORT))
    name = names(nodes)
    hot = {name[i] for i, a in nodes.items() if a.get("color") == bdot.HOT_COLOR}
    assert hot == {".loop:", ".body:", ".hi:", ".next:"}
    # No trace in this program: no header annotation either.
    assert not any(a["label"].startswith("trace") for a in nodes.values())
    hot_edges = {(name[a], name[b]) for a, b, attrs in edges
                 if attrs.get("color") == bdot.HOT_COLOR}
    assert hot_edges == {(".loop:", ".body:"), (".body:", ".hi:"), (".hi:", ".next:"),
                         (".next:", ".loop:")}


@pytest.mark.parametrize("report", [
    {}, {"traces": "no"}, {"traces": [7, None, {"path": "x"}]},
    {"traces": [{"func": "main", "header": "loop"}]},                   # no figures, no path
    {"traces": [{"path": [["main", "nowhere"], ["ghost", "loop"], [1, 2], "junk"]}]},
    [1, 2, 3],
])
def test_incomplete_reports_are_tolerated(report):
    nodes, _, _ = parse_dot(bdot.program_to_dot(traced_program(), report=report))
    assert not any(a.get("color") == bdot.HOT_COLOR for a in nodes.values())
    if isinstance(report, dict) and report.get("traces") and \
            isinstance(report["traces"][0], dict) and "header" in report["traces"][0]:
        assert any(a["label"].startswith("trace (no figures") for a in nodes.values())


def test_awkward_names_are_escaped():
    prog = {"functions": [{"name": 'f"\\{x}', "instrs": [
        {"op": "const", "dest": 'v"1', "type": "char", "value": "\""},
        {"op": "jmp", "labels": ['l\\"a b']},
        {"label": 'l\\"a b'},
        {"op": "print", "args": ['v"1']}]}]}
    text = bdot.program_to_dot(prog)
    nodes, edges, clusters = parse_dot(text)
    assert clusters == ['@f"\\{x}']
    assert any(a["label"].startswith('.l\\"a b:\n  print v"1') for a in nodes.values())
    assert len(edges) == 1
    if HAVE_DOT:
        assert b"<svg" in render(text)


def test_long_blocks_can_be_elided():
    body = "".join(f"  x{i}: int = const {i};\n" for i in range(50))
    prog = parse_program("@main {\n" + body + "  print x0;\n}\n")
    nodes, _, _ = parse_dot(bdot.program_to_dot(prog, max_lines=5))
    (label,), = [[a["label"] for a in nodes.values()]]
    lines = label.splitlines()
    assert lines == ["  x0: int = const 0", "  x1: int = const 1", "  ... 47 more ...",
                     "  x49: int = const 49", "  print x0"]


def test_the_traced_program_is_drawn_with_its_guard_failures():
    text = bdot.program_to_dot(traced_program(), report=REPORT)
    nodes, edges, _ = parse_dot(text)
    assert any("loop.trace.orig" in a.get("label", "") for a in nodes.values())
    assert any(a.get("style") == "dashed" for _, _, a in edges)
    if HAVE_DOT:
        svg = render(text).decode()
        assert "<svg" in svg and "loop.trace.orig" in svg
        # The dashed guard-failure edges survive into the picture.
        assert "stroke-dasharray" in svg


# --- the command ------------------------------------------------------------------------

BRIL2DOT = [sys.executable, "-P", "-m", "bril.cli.bril2dot"]


def bril2dot(*args, stdin, cwd=None):
    return subprocess.run(BRIL2DOT + [str(a) for a in args], input=stdin, cwd=cwd,
                          capture_output=True, timeout=120)


def test_command_prints_dot(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(REPORT))
    done = bril2dot("--report", report, stdin=json.dumps(traced_program()).encode())
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == bdot.program_to_dot(traced_program(), report=REPORT)


@pytest.mark.parametrize("fmt,magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_command_renders_with_graphviz(tmp_path, fmt, magic, dot_on_path):
    out = tmp_path / f"g.{fmt}"
    done = bril2dot(f"--{fmt}", out, "main", stdin=json.dumps(traced_program()).encode())
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert magic in out.read_bytes()[:1000]


@pytest.mark.parametrize("args,stdin,message", [
    (["--report", "/nonexistent/r.json"], "{}", "cannot read report"),
    (["--report", "BAD"], json.dumps({"functions": []}), "is not JSON"),
    ([], "{", "invalid JSON"),
    (["nope"], json.dumps({"functions": [{"name": "main", "instrs": []}]}), "no function"),
])
def test_command_errors_are_one_line(tmp_path, args, stdin, message):
    (tmp_path / "BAD").write_text("{not json")
    done = bril2dot(*args, stdin=stdin.encode(), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


# A chain of two traces for one header, as the tracer lays it out: the first
# trace's guard failures go to the second (`.h.trace.c1`), whose own go to the
# original code; each trace's repeating part is `.h.trace.loopJ`.
CHAIN = program_text("dot/chain")


def test_chains_of_traces():
    prog = parse_program(CHAIN)
    for ins in prog["functions"][0]["instrs"]:
        if ins.get("op") == "speculate":
            ins[bdot.MARK] = "h"
    g = bdot.analyse(prog["functions"][0], 0)
    assert set(g.traces) == {"h"}
    labelled = {b for b in g.traces["h"] if g.cfg.blocks[b].label is not None}
    assert labelled == {"h", "h.trace.loop0", "h.trace.c1"}
    assert (g.origs, g.resumes) == ({"h.trace.orig"}, {"h.trace.r6"})
    report = {"traces": [
        {"func": "main", "header": "h", "chain_position": 0, "unroll": 2,
         "saved_estimate": 40, "cut": False},
        {"func": "main", "header": "h", "chain_position": 1, "unroll": 1,
         "saved_estimate": None, "cut": True}]}
    nodes, _, _ = parse_dot(bdot.program_to_dot(prog, report=report))
    labels = {block_name(a): a["label"] for a in nodes.values()}
    assert labels[".h:"].startswith("trace: unroll 2, saves ~40\n.h:\n")
    assert labels[".h.trace.c1:"].startswith("trace 2 of the chain: unroll 1, cut\n")
    assert not labels[".h.trace.loop0:"].startswith("trace")
