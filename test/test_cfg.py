"""CFG construction, dominance and dataflow analyses on small programs."""

from bril.analysis.cfg import CFG, back_edges, is_reducible, natural_loops, form_blocks
from bril.analysis.dataflow import (ALL, defined_vars, liveness, live_after_each,
                                    reaching_definitions, uses)
from bril.analysis.dominance import (Dominance, dominance_frontier, dominator_tree, dominators,
                                     immediate_dominators)
from bril.ir.text import parse_program

from corpus import program_text

# entry -> head; head -> body | done; body -> then | else; then/else -> latch -> head
LOOP = program_text("cfg/loop")


def cfg_of(src):
    return CFG.from_function(parse_program(src)["functions"][0])


def test_blocks_edges_and_generated_names():
    cfg = cfg_of(LOOP)
    names = list(cfg.blocks)
    entry = names[0]
    assert names[1:] == ["head", "body", "then", "else", "latch", "done"]
    assert cfg.entry == entry and entry.startswith("_b")
    assert cfg.succs == {entry: ["head"], "head": ["body", "done"], "body": ["then", "else"],
                         "then": ["latch"], "else": ["latch"], "latch": ["head"], "done": []}
    assert sorted(cfg.preds["head"]) == sorted([entry, "latch"])
    assert cfg.blocks["else"].fall == "latch"
    assert cfg.exits() == ["done"]


def test_to_instrs_round_trips_the_layout():
    func = parse_program(LOOP)["functions"][0]
    assert CFG.from_function(func).to_instrs() == func["instrs"]


def test_to_instrs_adds_jumps_when_the_layout_changes():
    cfg = cfg_of(LOOP)
    order = list(cfg.blocks)
    order.remove("latch")
    cfg.set_order(order + ["latch"])         # `else` no longer falls into `latch`
    instrs = cfg.to_instrs()
    at = instrs.index({"label": "else"})
    assert instrs[at + 2] == {"op": "jmp", "labels": ["latch"]}
    assert instrs[-1] == {"op": "jmp", "labels": ["head"]}


def test_form_blocks_splits_after_terminators():
    instrs = parse_program("""@main { a: int = const 1; ret; b: int = const 2;
    .l: print b; }""")["functions"][0]["instrs"]
    assert [len(b) for b in form_blocks(instrs)] == [2, 1, 2]


def test_dominators_tree_and_frontier():
    cfg = cfg_of(LOOP)
    entry = cfg.entry
    dom = dominators(cfg)
    assert dom["latch"] == {entry, "head", "body", "latch"}
    assert dom["then"] == {entry, "head", "body", "then"}
    idom = immediate_dominators(cfg)
    assert idom == {entry: None, "head": entry, "body": "head", "then": "body",
                    "else": "body", "latch": "body", "done": "head"}
    tree = {n: sorted(children) for n, children in dominator_tree(cfg).items()}
    assert tree == {entry: ["head"], "head": ["body", "done"],
                    "body": ["else", "latch", "then"],
                    "then": [], "else": [], "latch": [], "done": []}
    df = dominance_frontier(cfg)
    assert df["then"] == {"latch"} and df["else"] == {"latch"}
    assert df["latch"] == {"head"} and df["body"] == {"head"} and df["head"] == {"head"}
    assert df[entry] == set() and df["done"] == set()


def test_unreachable_blocks_have_no_dominators():
    cfg = cfg_of("""@main { jmp .b; .a: print; .b: ret; }""")
    assert "a" not in dominators(cfg)
    assert "a" not in cfg.reachable()


def test_back_edges_and_natural_loops():
    cfg = cfg_of(LOOP)
    assert back_edges(cfg) == [("latch", "head")]
    (loop,) = natural_loops(cfg)
    assert loop.header == "head" and loop.latches == ["latch"]
    assert loop.body == {"head", "body", "then", "else", "latch"}
    assert loop.exits(cfg) == [("head", "done")]
    assert is_reducible(cfg)


def test_nested_loops_come_innermost_first():
    cfg = cfg_of("""@main { i: int = const 0;
    .outer: j: int = const 0;
    .inner: j: int = add j i; c: bool = lt j i; br c .inner .next;
    .next: d: bool = lt i j; br d .outer .end;
    .end: }""")
    loops = natural_loops(cfg)
    assert [l.header for l in loops] == ["inner", "outer"]
    assert loops[0].body == {"inner"}
    assert loops[1].body == {"outer", "inner", "next"}


def test_irreducible_control_flow_is_detected():
    cfg = cfg_of("""@main(c: bool) { br c .a .b;
    .a: jmp .b;
    .b: jmp .a; }""")
    assert not is_reducible(cfg)
    assert back_edges(cfg) == []


def test_liveness():
    cfg = cfg_of(LOOP)
    live_in, live_out = liveness(cfg)
    assert live_in["head"] == {"i", "n", "one"}
    assert live_in["then"] == {"i", "n", "one"}      # x is dead: never read
    assert live_out["latch"] == {"i", "n", "one"}
    assert live_in["done"] == {"i"}
    assert live_in[cfg.entry] == {"n"}
    after = live_after_each(cfg.blocks["head"], live_out["head"])
    assert after[0] == {"c", "i", "n", "one"} and after[1] == {"i", "n", "one"}


def test_reaching_definitions():
    cfg = cfg_of(LOOP)
    reach_in, _ = reaching_definitions(cfg, ["n"])
    entry = cfg.entry
    # i reaches head from the entry and around the loop from the latch.
    assert {(entry, 0), ("latch", 0)} <= reach_in["head"]
    assert ("arg", "n") in reach_in["head"]
    x_defs = {d for d in reach_in["latch"] if d[0] in ("then", "else")}
    assert x_defs == {("then", 0), ("else", 0)}
    assert ("then", 0) in reach_in["head"] and ("body", 0) in reach_in["head"]


def test_defined_vars_is_a_must_analysis():
    cfg = cfg_of("""@main(c: bool) { br c .a .b;
    .a: x: int = const 1; y: int = const 2; jmp .join;
    .b: x: int = const 3;
    .join: print x; }
    """)
    def_in, _ = defined_vars(cfg, ["c"])
    assert def_in["join"] == {"c", "x"}                # y only on one path
    assert def_in[cfg.entry] == {"c"}


def test_unreachable_blocks_are_defined_everywhere():
    cfg = cfg_of("""@main { ret; .dead: print x; }""")
    def_in, _ = defined_vars(cfg)
    assert def_in["dead"] is ALL


def test_set_names_a_shadow_variable_not_a_use():
    assert uses({"op": "set", "args": ["shadow", "v"]}) == ["v"]
    assert uses({"op": "add", "args": ["a", "b"], "dest": "c"}) == ["a", "b"]


def test_dominance_queries_agree_with_dominator_sets():
    for src in (LOOP, """@main(c: bool) { br c .a .b; .a: jmp .b; .b: jmp .a; }"""):
        cfg = cfg_of(src)
        sets = dominators(cfg)
        fast = Dominance(cfg)
        for a in cfg.blocks:
            for b in cfg.blocks:
                assert fast.dominates(a, b) == (b in sets and a in sets[b]), (a, b)


def test_natural_loops_from_the_forest_match_listed_loops():
    """On reducible graphs the bodies come from the loop forest; they must hold
    exactly the blocks a backward walk from the latches finds (sibling loops,
    nests and loops sharing nothing included)."""
    import random
    from bril.analysis.cfg import Graph, natural_loops, _listed_loops
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        n = rng.randint(1, 14)
        succs = [sorted(rng.sample(range(n), rng.randint(0, min(2, n)))) for _ in range(n)]
        g = Graph.of_succs(succs)
        a, b = natural_loops(g), _listed_loops(g)
        assert [l.header for l in a] == [l.header for l in b]
        for x, y in zip(a, b):
            assert set(x.body) == y.body and len(x.body) == len(y.body)
            assert all((v in x.body) == (v in y.body) for v in range(n))
            assert x.latches == y.latches and x.parent == y.parent
        checked += len(a)
    assert checked > 100
