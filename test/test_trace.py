"""The tracer: traced programs behave exactly like the originals, and traces pay.

For every benchmark (the corpus's and ours): trace on its ARGS, then run the
traced program; stdout must be identical.  Our programs with an `# ALT-ARGS:`
line are also run on that other input, which the traces were not built from;
they are traced as users trace them (the default growth price) and their traced
count is turnt's X.trace.prof snapshot.
"""


import pytest

from bril.interpreter import interp
from bril.analysis.cfg import CFG
from bril.ir.errors import BrilError
from bril.ir.text import parse_program
from bril.tracing.trace_cost import DEFAULT_GROWTH_PRICE
from bril.tracing.trace_emit import count_ops
from bril.ir.tracelabels import MARK
from bril.tracing.tracer import trace_program

from corpus import (BENCHMARKS, CONFORMANCE, alt_args_of, args_of, bril_files, case_id,
                    program_text)
from helpers import run_brili

# (ours: every program, the typed twins of the dynamic family too, traced as users trace
# them -- at the default growth price -- and checked against turnt's X.trace.prof
# snapshot; test_benchmarks_snapshots runs the `trace` env itself on one per folder)
CASES = ([pytest.param(p, CONFORMANCE, id=case_id(p)) for p in bril_files("benchmarks")]
         + [pytest.param(p, BENCHMARKS, id="ours/" + case_id(p, BENCHMARKS))
            for p in bril_files(root=BENCHMARKS)])


def load(path):
    return parse_program(path.read_text())


@pytest.mark.parametrize("path,root", CASES)
def test_traced_program_prints_the_same(path, root):
    prog = load(path)
    args = args_of(path)
    expected = (path.with_suffix(".out")).read_text()
    snapshot = path.with_suffix(".trace.prof")
    ours = root == BENCHMARKS
    # (the conftest's price, 0, elsewhere: more traces on short runs)
    result = trace_program(prog, args, growth_price=DEFAULT_GROWTH_PRICE if ours else None)
    # The tracer's own check ran the traced program on the training input.
    assert result.output == expected
    assert result.traced_output == expected
    # Never more instructions than the original on the training input.
    assert result.traced_count <= result.original_count
    if ours:
        assert f"total_dyn_inst: {result.traced_count}" == snapshot.read_text().strip()
    # No code the splice left unreachable (it would only cost set-up and size).
    for func in result.program["functions"]:
        if not any(i.get("op") == "phi" for i in func.get("instrs", ())):
            cfg = CFG.from_function(func)
            assert set(cfg.blocks) == cfg.reachable(), func["name"]
    alt = alt_args_of(path)
    if alt is not None:
        want_out, want_count = interp.run_capture(prog, alt)
        got_out, _ = interp.run_capture(result.program, alt)
        assert got_out == want_out


def assert_same_output(prog, traced, argsets):
    """The traced program prints what the original prints on every input."""
    for args in argsets:
        assert interp.run_capture(traced, args)[0] == interp.run_capture(prog, args)[0], args


def _spec_ops(prog):
    return [i["op"] for f in prog["functions"] for i in f["instrs"]
            if i.get("op") in ("speculate", "guard", "commit")]


LOOP = program_text("trace/loop_calls")


def _loop_text():
    # `rem2` is not an op: build the callee from real ops instead.
    return LOOP.replace("r: int = rem2 i two;", "q: int = div i two;\n  q: int = mul q two;\n"
                        "  d: int = sub i q;\n  r: int = add s d;")


def _loop_program():
    return parse_program(_loop_text())


def test_hot_loop_gets_a_trace_that_saves_instructions():
    prog = _loop_program()
    result = trace_program(prog, ["5000"])
    assert result.chains, "the hot loop should be traced"
    ops = _spec_ops(result.program)
    assert ops.count("speculate") == ops.count("commit")
    assert any(i.get(MARK) for f in result.program["functions"] for i in f["instrs"])
    out, count = interp.run_capture(result.program, ["5000"])
    assert out == "2500\n"
    assert count == result.traced_count < result.original_count * 0.9
    # Other inputs, including ones where the loop does not run at all.
    assert_same_output(prog, result.program, [[n] for n in ["0", "1", "7", "20000"]])


def _size(prog):
    return sum(1 for f in prog["functions"] for i in f["instrs"] if "op" in i)


def test_a_trace_must_pay_for_the_code_it_adds(monkeypatch):
    # (the other tests charge nothing for growth: see conftest.py)
    from bril.tracing import trace_cost
    prog = _loop_program()
    free = trace_program(prog, ["500"])
    assert free.chains
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", trace_cost.DEFAULT_GROWTH_PRICE)
    monkeypatch.setattr(trace_cost, "FREE_GROWTH_SHARE", 0)     # (the price alone: below)
    # 500 iterations save too little for the code a trace adds: -O alone.
    short = trace_program(prog, ["500"])
    assert not short.chains and short.optimized and short.traced_count == short.base_count
    # A run long enough pays for a trace, but not for the longest unrolling
    # (with room to grow: this program is tiny, see the next test).
    from bril.tracing import tracer
    monkeypatch.setattr(tracer, "GROWTH_LIMIT", 100)
    long = trace_program(prog, ["300000"])
    assert long.chains and long.traced_count < long.base_count
    for ch in long.chains:
        assert ch.worth > 0 and ch.gain > trace_cost.GROWTH_PRICE * ch.added > 0
    # Checked: what the traces saved on the training run pays for what was added.
    from bril.tracing.tracer import _optimized, report
    added = _size(long.program) - _size(_optimized(prog) if long.optimized else prog)
    assert long.growth_cost == trace_cost.GROWTH_PRICE * added > 0
    assert long.base_count - long.traced_count >= long.growth_cost
    assert report(long)["code_cost"] == round(long.growth_cost)
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", 0)
    unpriced = trace_program(prog, ["300000"])
    assert _size(long.program) < _size(unpriced.program)
    assert_same_output(prog, long.program, [[n] for n in ["0", "1", "7", "20000"]])


def test_the_checking_run_charges_the_price_again(monkeypatch):
    # An estimate can be far off: state-machine's generator loop changes its
    # mix of characters near the end, after the recorder stopped listening, so
    # its trace was estimated to save ~69,000 instructions and saved ~7,000 on
    # the checking run, less than the code it adds costs at the price: the
    # traces that do not pay on the checking run are dropped (-O alone).
    from bril.tracing import trace_cost
    from bril.tracing.trace_select import code_cost
    from bril.tracing.tracer import splice
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", trace_cost.DEFAULT_GROWTH_PRICE)
    prog = load(BENCHMARKS / "spec" / "state-machine.bril")
    args = ["40000", "36000", "11"]
    result = trace_program(prog, args)
    assert [(ch.func, ch.header) for ch in result.dropped] == [("generate", "draw")]
    dropped = result.dropped[0]
    assert dropped.worth > 0                    # (the estimate: it would pay)
    assert not result.chains and result.optimized
    assert result.traced_count == result.base_count
    # What it saved when checked, against what the code it added costs:
    with_trace = splice(result.program, result.dropped)
    saved = result.base_count - interp.run_capture(with_trace, args)[1]
    added = _size(with_trace) - _size(result.program)
    assert 0 < saved < code_cost(added, dropped.price, dropped.free)
    # Charged nothing for its code, the same trace is kept: it saves instructions.
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", 0)
    unpriced = trace_program(prog, args)
    assert [(ch.func, ch.header) for ch in unpriced.chains] == [("generate", "draw")]
    assert unpriced.traced_count < unpriced.base_count


def test_a_little_growth_is_free(monkeypatch):
    # 1,000 iterations save too little to pay for a trace at the price alone;
    # code whose preparation costs at most 1% of the whole process on that input
    # (start-up included) is taken if it would pay on a run ten times as long.
    # (room to grow: the program is tiny, see the next test)
    from bril.tracing import trace_cost, tracer
    monkeypatch.setattr(tracer, "GROWTH_LIMIT", 100)
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", trace_cost.DEFAULT_GROWTH_PRICE)
    prog = parse_program(SQUARES)
    share = trace_cost.FREE_GROWTH_SHARE
    monkeypatch.setattr(trace_cost, "FREE_GROWTH_SHARE", 0)
    priced = trace_program(prog, ["1000"])
    assert not priced.chains
    monkeypatch.setattr(trace_cost, "FREE_GROWTH_SHARE", share)
    result = trace_program(prog, ["1000"])
    free = trace_cost.free_growth(result.original_count, trace_cost.GROWTH_PRICE)
    assert 0 < sum(ch.added for ch in result.chains) <= free
    for ch in result.chains:
        assert ch.gain * trace_cost.FREE_GROWTH_RUNS > trace_cost.GROWTH_PRICE * ch.added
    assert result.traced_count < priced.traced_count
    long = [str(10 ** 6)]
    assert interp.run_capture(result.program, long)[1] < \
        0.85 * interp.run_capture(priced.program, long)[1]
    assert_same_output(prog, result.program, [[n] for n in ["0", "1", "7", "20000"]])
    assert trace_cost.free_growth(10 ** 6, 0) == 0


def test_a_traced_program_is_at_most_three_times_the_original(monkeypatch):
    # Priced by the instruction, a long enough run pays for any unrolling; the
    # code is still loaded (and compiled) by every run: at most GROWTH_LIMIT
    # times the original's instructions are added.
    from bril.tracing import trace_cost, tracer
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", trace_cost.DEFAULT_GROWTH_PRICE)
    # (a function that runs once gives the loop room for one trace)
    body = "\n".join(f"  x{i}: int = add x{i - 1} x{i - 1};" for i in range(1, 40))
    prog = parse_program(SQUARES.replace("print s;", "print s;\n  r: int = call @once s;\n"
                                         "  print r;")
                         + "@once(x0: int): int {\n" + body + "\n  ret x39;\n}\n")
    from bril.tracing import trace_select
    built = []
    real = trace_select.build_candidate
    monkeypatch.setattr(trace_select, "build_candidate",
                        lambda *a: built.append(len(a[3])) or real(*a))
    unlimited = None
    for limit in (100, tracer.GROWTH_LIMIT):
        monkeypatch.setattr(tracer, "GROWTH_LIMIT", limit)
        built.clear()
        result = trace_program(prog, ["400000"])
        assert result.chains
        assert_same_output(prog, result.program, [["0"], ["3"], ["1000"]])
        if unlimited is None:
            unlimited = _size(result.program)
            assert trace_select.MAX_PRICED_UNROLL in built
    assert _size(result.program) <= (1 + tracer.GROWTH_LIMIT) * _size(prog) < unlimited
    # Little room: the longest unrolling could not fit (its code is at least
    # MIN_BODY_SHARE of the 80 instructions it replaces), and is not built.
    monkeypatch.setattr(tracer, "GROWTH_LIMIT", 0.1)
    built.clear()
    result = trace_program(prog, ["400000"])
    assert built and trace_select.MAX_PRICED_UNROLL not in built
    assert _size(result.program) <= 1.1 * _size(prog)


def test_a_pattern_taken_too_few_times_is_not_built(monkeypatch):
    # A pass saves at most what it replaces, and a trace's code is at least
    # MIN_BODY_SHARE of that: a pattern taken no more than price * MIN_BODY_SHARE
    # passes cannot pay, and is not even built (building is most of choosing
    # traces on a short run).
    from bril.tracing import trace_cost, trace_select
    built = []
    real = trace_select.build_candidate

    def spy(funcs, infos, stats, pattern, *rest):
        built.append((sum(stats.counts[p] for p in set(pattern)), len(pattern)))
        return real(funcs, infos, stats, pattern, *rest)

    monkeypatch.setattr(trace_select, "build_candidate", spy)
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", trace_cost.DEFAULT_GROWTH_PRICE)
    monkeypatch.setattr(trace_cost, "FREE_GROWTH_SHARE", 0)     # (the price alone)
    prog = _loop_program()
    limit = trace_cost.DEFAULT_GROWTH_PRICE * trace_select.MIN_BODY_SHARE
    trace_program(prog, ["80"], optimize=False)        # 25 iterations recorded
    assert built == []
    trace_program(prog, ["500"], optimize=False)       # 445
    assert built and all(taken / k > limit for taken, k in built)
    assert max(k for _, k in built) < max(trace_select.UNROLLS)
    # The bound holds for what is built (the rule's premise), here at every unrolling.
    monkeypatch.setattr(trace_cost, "GROWTH_PRICE", 0)
    rec = _recorded(_loop_text(), ["5000"], optimize=False)
    st = next(st for st in rec.loops.values() if st.counts)
    cands = trace_select._candidates(rec.funcs, rec.infos, st, {}, sum(st.counts), 0.05, 8)
    assert {c.unroll for c in cands} == set(trace_select.UNROLLS)
    for c in cands:
        assert min(count_ops(c.body), count_ops(c.body_x)) >= \
            trace_select.MIN_BODY_SHARE * c.replaced
        # (what is known of it before it is built: `_candidates` skips one whose
        # code could not fit in the room left)
        assert trace_select._replaced(rec.funcs, st, c.pattern, {}) == c.replaced


SQUARES = program_text("trace/squares")


@pytest.mark.parametrize("optimize", [True, False])
def test_counted_loop_needs_no_speculation(optimize):
    # The unrolled loop's guards (one, strengthened) are all at its top:
    # nothing to roll back, so no speculate/commit, only branches.
    prog = parse_program(SQUARES)
    result = trace_program(prog, ["1000"], optimize=optimize)
    assert result.chains and result.optimized == optimize
    ops = [i.get("op") for f in result.program["functions"] for i in f["instrs"]]
    assert "speculate" not in ops and "commit" not in ops and "guard" not in ops
    marked = [i for f in result.program["functions"] for i in f["instrs"] if i.get(MARK)]
    assert marked
    assert result.chains[0].traces[0].guards >= 1
    assert result.traced_count < 0.7 * result.original_count
    assert_same_output(prog, result.program,
                       [[n] for n in ["0", "1", "7", "8", "9", "1000", "3001", "-5"]])


def test_trace_no_opt_keeps_the_program_otherwise_unchanged():
    prog = parse_program(SQUARES)
    plain = trace_program(prog, ["1000"], optimize=False)
    opt = trace_program(prog, ["1000"])
    assert not plain.optimized and opt.optimized
    # The run's figures are the original's either way.
    assert plain.original_count == opt.original_count
    assert plain.output == opt.output == "332833500\n"
    assert opt.traced_count <= opt.base_count < opt.original_count
    # Without -O the code outside the traces is the original's.
    rest = iter(plain.program["functions"][0]["instrs"])
    assert all(any(i == j for j in rest) for i in prog["functions"][0]["instrs"])


PHASES = program_text("trace/phases")


def test_branch_that_flips_midway_keeps_output_on_other_inputs():
    prog = parse_program(PHASES)
    result = trace_program(prog, ["4000", "3000"])
    out, count = interp.run_capture(result.program, ["4000", "3000"])
    assert out == interp.run_capture(prog, ["4000", "3000"])[0]
    assert count <= result.original_count
    assert_same_output(prog, result.program,
                       (["4000", "0"], ["4000", "4000"], ["100", "7"], ["0", "0"]))


EFFECTS = program_text("trace/effects")


def test_effects_before_guards_are_never_repeated_or_lost():
    # The guard on `big` reads memory written in the same iteration, so it
    # cannot move above the store: the trace must commit before the store.
    prog = parse_program(EFFECTS)
    for train in (["300"], ["3000"]):
        result = trace_program(prog, train)
        for args in (["300"], ["3000"], ["5"], ["0"]):
            assert interp.run_capture(result.program, args)[0] == \
                interp.run_capture(prog, args)[0]


def test_error_inside_traced_loop_is_the_same_error():
    # Divides by (z - i): trained where z is never reached, run where it is.
    text = program_text("trace/divides_by_z_minus_i")
    prog = parse_program(text)
    result = trace_program(prog, ["2000", "-1"])
    assert result.chains
    for args in (["2000", "1500"], ["10", "0"]):
        with pytest.raises(BrilError, match="division by zero") as want:
            interp.run_capture(prog, args)
        with pytest.raises(BrilError, match="division by zero") as got:
            interp.run_capture(result.program, args)
        assert str(got.value) == str(want.value)


# --- the command ------------------------------------------------------------------

import json


def test_brili_trace_command_keeps_output_and_count(tmp_path):
    prog = json.dumps(_loop_program())
    plain = run_brili(["-p", "3000"], prog)
    out_json = tmp_path / "traced.json"
    report = tmp_path / "report.json"
    traced = run_brili(["--trace", str(out_json), "--trace-report", str(report), "-p", "3000"],
                       prog)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    assert traced.stderr == plain.stderr            # the same total_dyn_inst line
    result = json.loads(out_json.read_text())
    rep = json.loads(report.read_text())
    assert rep["traces"] and rep["traced_count"] < rep["original_count"]
    t = rep["traces"][0]
    # Traced after -O, which rotates the loop: its header is the body.
    assert rep["optimized"] and rep["base_count"] < rep["original_count"]
    assert t["func"] == "main" and t["header"] == "body" and t["guards"] >= 1
    assert t["path"][0] == ["main", "body"]
    again = run_brili(["-p", "3000"], json.dumps(result))
    assert again.stdout == plain.stdout
    assert again.stderr == f"total_dyn_inst: {rep['traced_count']}\n"


def test_brili_trace_counts_chooses_for_instructions_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("BRIL_TRACE_GROWTH_PRICE")   # (as users run it)
    prog = json.dumps(_loop_program())
    counts = {}
    for flags in ([], ["--trace-counts"]):
        report = tmp_path / "report.json"
        done = run_brili(["--trace", str(tmp_path / "t.json"), "--trace-report", str(report)]
                         + flags + ["500"], prog)
        assert done.returncode == 0, done.stderr
        rep = json.loads(report.read_text())
        counts[bool(flags)] = (rep["traces"], rep["traced_count"], rep["base_count"])
    # 500 iterations: by default no trace pays for its code (-O alone) ...
    assert counts[False][0] == [] and counts[False][1] == counts[False][2]
    # ... but one saves instructions.
    assert counts[True][0] and counts[True][1] < counts[False][1]


def test_brili_trace_no_opt_traces_the_program_as_it_is(tmp_path):
    prog = json.dumps(_loop_program())
    plain = run_brili(["-p", "3000"], prog)
    out_json = tmp_path / "traced.json"
    report = tmp_path / "report.json"
    traced = run_brili(["--trace", str(out_json), "--trace-no-opt", "--trace-report",
                        str(report), "-p", "3000"], prog)
    assert traced.returncode == 0, traced.stderr
    assert (traced.stdout, traced.stderr) == (plain.stdout, plain.stderr)
    rep = json.loads(report.read_text())
    assert not rep["optimized"] and rep["base_count"] == rep["original_count"]
    t = rep["traces"][0]
    assert t["header"] == "head" and t["path"][0] == ["main", "head"]
    again = run_brili(["-p", "3000"], out_json.read_text())
    assert again.stdout == plain.stdout
    assert again.stderr == f"total_dyn_inst: {rep['traced_count']}\n"


def test_brili_trace_error_run_writes_nothing(tmp_path):
    text = LOOP.replace("r: int = rem2 i two;", "z: int = const 0;\n  r: int = div s z;")
    out_json = tmp_path / "traced.json"
    proc = run_brili(["--text", "--trace", str(out_json), "100"], text)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: division by zero"
    assert not out_json.exists()


# --- side exits --------------------------------------------------------------------------

BIASED = program_text("trace/biased")


def _labels(prog):
    return {i["label"] for f in prog["functions"] for i in f["instrs"] if "label" in i}


def test_rare_branch_leaves_the_unrolled_trace_through_a_side_exit():
    # A 95%-biased branch inside a counted loop: the unrolled trace keeps
    # running, and the rare side leaves it straight into the original `.rare`
    # block instead of rolling back the iterations already done.
    prog = parse_program(BIASED)
    result = trace_program(prog, ["20000", "95"], optimize=False)
    assert result.chains
    trace = result.chains[0].traces[0]
    assert trace.unroll > 1 and trace.exits > 0
    funcs = result.program["functions"]
    brs = [i for f in funcs for i in f["instrs"] if i.get("op") == "br"]
    stubs = [lab for lab in _labels(result.program) if ".x" in lab]
    # Some trace branch goes to `.rare` directly or through a stub of copies.
    assert any("rare" in b["labels"] for b in brs if b["labels"] != ["usual", "rare"]) or stubs
    ops = [i.get("op") for f in funcs for i in f["instrs"]]
    assert "speculate" not in ops       # nothing left to roll back
    assert result.traced_count < 0.95 * result.original_count
    assert_same_output(prog, result.program,
                       (["20000", "95"], ["5000", "50"], ["3000", "0"], ["3000", "100"],
                        ["7", "95"], ["0", "95"], ["100000", "99"]))


INVARIANT_BRANCH = program_text("trace/invariant_branch")


@pytest.mark.parametrize("program", ["invariant-branch", "nested-varying"])
def test_side_exit_never_skips_an_earlier_branch(program, tmp_path):
    # The guard on the loop-invariant branch moves to the top of the inner
    # loop's trace, above the loop test.  Exiting there into the branch's
    # other side would skip that test (the loop would never end): an exit is
    # only taken where every earlier branch of the original path is already
    # checked.  Run in subprocesses: the bug this guards against hangs.
    if program == "nested-varying":
        path = BENCHMARKS / "spec" / "nested-varying.bril"
        text, train = path.read_text(), args_of(path)
        others = [alt_args_of(path), ["300", "40", "0"], ["50", "60", "20"]]
    else:
        text, train = INVARIANT_BRANCH, ["300", "150"]
        others = [["300", "0"], ["300", "300"], ["40", "20"], ["0", "0"]]
    prog = json.dumps(parse_program(text))
    out_json = tmp_path / "traced.json"
    for flag in ([], ["--trace-no-opt"]):
        r = run_brili(["--trace", str(out_json), *flag, *train], prog)
        assert r.returncode == 0, r.stderr
        traced = out_json.read_text()
        for args in [train] + others:
            assert run_brili(args, traced).stdout == run_brili(args, prog).stdout


def test_inner_loop_trip_count_is_not_baked_into_the_outer_trace():
    # Trained on 15x15 matrices, run on 20x20: a trace of the row loop with the
    # column loop unrolled 15 times would fail on every row of the bigger
    # input.  Such paths (a block entered more than MAX_REPEAT times per
    # iteration) are not traced; the inner loop gets its own trace.
    path = BENCHMARKS / "memory" / "matrix-power.bril"
    prog = load(path)
    result = trace_program(prog, alt_args_of(path))
    args = args_of(path)
    want_out, want_count = interp.run_capture(prog, args)
    got_out, got_count = interp.run_capture(result.program, args)
    assert got_out == want_out
    assert got_count <= want_count


def test_exit_states_are_compared_symbolically():
    from bril.tracing.trace_exit import Symbols, SymbolicState
    syms = Symbols()
    a, b = SymbolicState(syms, {"one": 1}), SymbolicState(syms, {})
    # i + 1 + 1 (through a known constant) is i + 2; commutative operands match.
    for ins in ({"op": "add", "dest": "i", "type": "int", "args": ["i", "one"]},
                {"op": "add", "dest": "i", "type": "int", "args": ["i", "one"]},
                {"op": "mul", "dest": "p", "type": "int", "args": ["x", "y"]}):
        a.run(ins)
    for ins in ({"op": "const", "dest": "two", "type": "int", "value": 2},
                {"op": "add", "dest": "t", "type": "int", "args": ["two", "i"]},
                {"op": "mul", "dest": "p", "type": "int", "args": ["y", "x"]}):
        b.run(ins)
    assert a.get("i") == b.get("t") != b.get("i")
    assert a.get("p") == b.get("p")
    # Loads depend on the effects before them.
    a.run({"op": "load", "dest": "v", "type": "int", "args": ["ptr"]})
    b.run({"op": "store", "args": ["ptr", "x"]})
    b.run({"op": "load", "dest": "v", "type": "int", "args": ["ptr"]})
    assert a.get("v") != b.get("v") and a.chain != b.chain


def test_exit_needs_every_earlier_branch_checked():
    from bril.analysis.dataflow import liveness
    from bril.tracing.trace_build import FunctionInfo, Item
    from bril.tracing.trace_exit import Exits, variable_types
    func = parse_program(INVARIANT_BRANCH)["functions"][0]
    instrs = func["instrs"]
    site = {i["args"][0]: n for n, i in enumerate(instrs) if i.get("op") == "br"}
    live_in, _ = liveness(FunctionInfo(func).cfg)
    # The original path from `.inner`: `go` held, then `first` held.
    line = [Item({"op": "guard", "args": ["go"]}, site["go"], 0, origin=0),
            Item({"op": "guard", "args": ["first"]}, site["first"], 0, origin=1)]
    exits = Exits(line, func, live_in, {}, variable_types(func))
    state = exits.start()
    # The trace tests `first` before `go` (hoisted): no exit to `.b` there.
    assert exits.find(line[1], state) is None
    state.passed(line[0])
    assert exits.find(line[1], state) == ("b", [])
    # A value the trace keeps in a temporary is copied back by the exit stub.
    line.insert(1, Item({"op": "add", "dest": "sb", "type": "int", "args": ["sb", "one"]}, 0, 0))
    line[2].origin = 2
    exits = Exits(line, func, live_in, {}, variable_types(func))
    state = exits.start()
    state.passed(line[0])
    state.run({"op": "add", "dest": "_tmp", "type": "int", "args": ["one", "sb"]})
    assert exits.find(line[2], state) == ("b", [("sb", "int", "_tmp")])
    state.run({"op": "print", "args": ["_tmp"]})       # an effect the original has not done
    assert exits.find(line[2], state) is None


DOT = program_text("trace/dot")


def _recorded(text, args, optimize=True):
    import io
    from bril.tracing.trace_record import Recorder
    from bril.tracing.tracer import _optimized
    prog = parse_program(text)
    base = _optimized(prog) if optimize else prog
    rec = Recorder({f["name"]: f for f in base["functions"]}, {}, hot=56)   # (the whole run)
    interp.run_recording(base, args, io.StringIO(), rec)
    return rec


def test_recorder_keeps_the_path_that_left_the_loop():
    rec = _recorded(DOT, ["200", "15"], optimize=False)
    st = rec.loops[("main", "dot")]
    exits = [o for o, _ in st.seq if o < 0]
    assert exits and all(st.events_of(o) is not None for o in exits)
    # The partial iteration: the header, then the block outside the loop.
    assert st.events_of(exits[0]) == (("main", "dot"), ("main", "dot_done"))


def test_trip_count_tail_aborts_before_any_work(monkeypatch):
    # Unrolled 4 times over a 15-iteration loop, every pass ends 3 iterations
    # short.  The four loop tests become one guard at the top of the pass
    # (`t < k - 4`), so leaving there costs only that test: the simulation
    # charges exactly that, not a pass's worth of work.  (The whole sequence
    # replayed: exact figures.)
    from bril.tracing import trace_cost
    from bril.tracing.trace_cost import FailPoint, simulate
    monkeypatch.setattr(trace_cost, "SIM_RUNS", 1 << 30)
    from bril.tracing.trace_select import Chain, build_candidate
    rec = _recorded(DOT, ["2000", "15"])
    st = rec.loops[("main", "dot_body")]       # -O rotates the loop
    c = build_candidate(rec.funcs, rec.infos, st, (0, 0, 0, 0), {}, 0)
    loop_tests = sorted(c.branch_origin.values())
    assert len(loop_tests) == 4
    assert all(c.fails[2][o] == FailPoint(run=2, exits=False, stub=0, to_tail=True)
               for o in loop_tests)
    pre_cost = c.fails[0][loop_tests[0]].run
    assert pre_cost < c.cost_pre / 2          # the wrap-around check and the test
    gain, entries, aborts = simulate(Chain("main", "dot_body", [c]), st)
    # -O's loop visits its header 15 times a run, the last to leave.  The
    # first pass and two loop passes run 12 iterations; the loop part fails
    # at its top, the original runs the 13th, and the first pass fails at the
    # top on the 14th and on the visit that leaves.
    per_run = (c.replaced - c.cost_pre) + 2 * (c.replaced - c.cost_loop) - 2 - 2 * pre_cost
    runs = sum(1 for o, _ in st.seq[2:] if o < 0)
    assert st.seq[2:4] == [[0, 14], [st.seq[3][0], 1]]
    first_run = (c.replaced - c.cost_pre) - 2
    assert gain == first_run + runs * per_run
    # With the tail copy, the 3 left run there: no more first passes failing.
    tail_run = (c.replaced - c.cost_pre) + 2 * (c.replaced - c.cost_loop) - 2
    gain, _, _ = simulate(Chain("main", "dot_body", [c], tail=True), st)
    assert gain == first_run + runs * tail_run


def test_a_long_sequence_is_simulated_on_a_prefix_scaled_to_the_whole(monkeypatch):
    # The simulations are linear in the recorded runs: past SIM_RUNS runs, the
    # first SIM_RUNS are replayed and the figures scaled to the iterations of
    # the whole sequence.  On a regular loop that is the whole replay's result.
    from bril.tracing import trace_cost
    from bril.tracing.trace_cost import simulate
    from bril.tracing.trace_select import Chain, build_candidate
    rec = _recorded(DOT, ["2000", "15"])
    st = rec.loops[("main", "dot_body")]
    assert len(st.seq) > 3000
    c = build_candidate(rec.funcs, rec.infos, st, (0, 0, 0, 0), {}, 0)
    monkeypatch.setattr(trace_cost, "SIM_RUNS", 1 << 30)
    whole = simulate(Chain("main", "dot_body", [c], tail=True), st)
    assert whole[0] > 0
    monkeypatch.setattr(trace_cost, "SIM_RUNS", 200)
    memo = {}
    part = simulate(Chain("main", "dot_body", [c], tail=True), st, memo)
    assert memo["seq"].n_runs == 200
    assert part[0] == pytest.approx(whole[0], rel=0.01)
    assert part[1] == pytest.approx(whole[1], rel=0.01)
    assert part[2] == pytest.approx(whole[2], rel=0.01)
    assert part[0] != whole[0]          # (it did replay only the prefix)


def test_lone_loop_guard_moved_to_the_top_keeps_its_side_exit():
    # The branch on `x` of the first iteration is hoisted to the trace's start
    # (rewritten on the entry value): it still tests exactly the original
    # branch, so it leaves through a side exit instead of rolling back.
    from bril.tracing.trace_select import build_candidate
    path = BENCHMARKS / "spec" / "phases.bril"
    rec = _recorded(path.read_text(), ["3000", "100", "100"], optimize=False)
    st = rec.loops[("recurrence", "loop")]
    c = build_candidate(rec.funcs, rec.infos, st, (0, 0), {}, 0)
    branch = [o for d, o in sorted(c.branch_origin.items())]
    # Per iteration: the loop test (strengthened, no exit) and the branch on x.
    assert [c.fails[1][o][1] for o in branch] == [False, True, False, True]


def test_chain_never_holds_two_starts_of_one_cycle():
    from bril.tracing.trace_select import _same_cycle
    assert _same_cycle((0, 1) * 16, (1, 0))
    assert _same_cycle((0, 1, 2), (2, 0, 1, 2, 0, 1))
    assert not _same_cycle((0,) * 32, (0,) * 8)       # a tail trace: fine
    assert not _same_cycle((0, 1), (0, 0, 1, 1))


def test_loop_tail_runs_in_a_copy_of_the_loop():
    # Unrolled 4 times over 15 iterations, the merged loop test fails with 3
    # left: those run in a copy of the original loop (`H.trace.t.*`), whose
    # back edges stay in the copy, instead of re-entering the trace at every
    # iteration.  A branch whose other side stays in the loop (a phase) never
    # goes to the copy: the trace must come back after it.
    prog = parse_program(DOT)
    result = trace_program(prog, ["2000", "15"])
    assert any(ch.tail for ch in result.chains)
    labels = _labels(result.program)
    assert any(".trace.t." in lab for lab in labels)
    assert result.traced_count < result.base_count
    assert_same_output(prog, result.program,
                       [["2000", "15"], ["30", "0"], ["30", "1"], ["30", "3"], ["30", "4"],
                        ["30", "5"], ["7", "100"], ["0", "15"]])
    phases = load(BENCHMARKS / "spec" / "phase-branch.bril")
    # (a run whose phase change the recording budget sees)
    result = trace_program(phases, ["6000", "3000"], optimize=False)
    # (Sent to the copy at the phase change, the second phase would run
    # untraced: 0.78x the original instead of 0.51x.)
    assert result.traced_count < 0.6 * result.original_count


def test_run_with_timeout_stops_a_program_that_loops_forever():
    prog = parse_program("@main {\n.l:\n  jmp .l;\n}\n")
    with pytest.raises(BrilError, match="time limit exceeded"):
        interp.run_capture(prog, [], timeout=0.3)


def test_traced_program_that_hangs_is_dropped_not_waited_for(monkeypatch):
    # A tracer bug that spliced in an endless loop must cost the traces, not
    # hang `brili --trace`: the checking run is stopped and the chain dropped.
    import bril.tracing.tracer as tracer
    hang = parse_program("@main(n: int) {\n.l:\n  jmp .l;\n}\n")
    monkeypatch.setattr(tracer, "splice", lambda base, chains: hang)
    monkeypatch.setattr(tracer, "CHECK_TIME_SLACK", 0.3)
    prog = _loop_program()
    result = trace_program(prog, ["5000"])
    assert result.chains == [] and result.dropped
    assert result.traced_output == "2500\n"
    assert interp.run_capture(result.program, ["5000"])[0] == "2500\n"


def test_selections_are_checked_in_the_order_of_their_estimates(monkeypatch):
    """The selections (per base, first passes exiting or not) are estimated for
    the whole run; they are checked (each a whole run) best estimate first, until
    none left is estimated to beat the best checked."""
    import copy
    from bril.tracing import tracer
    path = CONFORMANCE / "benchmarks" / "core" / "check-primes.bril"
    prog = parse_program(path.read_text())
    args = args_of(path)
    selections, checks = [], []
    real_select, real_paying = tracer.select, tracer._paying

    def select(funcs, infos, rec, *rest):
        chains = real_select(funcs, infos, rec, *rest)
        selections.append((funcs, copy.deepcopy(chains)))
        return chains

    def paying(base, chains, *rest):
        checks.append(base)
        return real_paying(base, chains, *rest)

    monkeypatch.setattr(tracer, "select", select)
    monkeypatch.setattr(tracer, "_paying", paying)
    result = trace_program(prog, args)
    # (here the best estimate checks out, and nothing left is estimated to beat it)
    # (one base: a small program is recorded only as `-O` made it)
    assert len(selections) == 2 and len(checks) == 1
    estimates = []
    for funcs, chains in selections:
        base = {"functions": list(funcs.values())}
        base_count = interp.run_capture(base, args)[1]
        estimates.append(base_count - sum(ch.worth for ch in chains))
    estimates.sort()
    # The ones checked are the best estimated (count plus the price of their
    # code); those left are estimated no better.
    worth = result.traced_count + result.growth_cost
    assert all(worth <= e for e in estimates[len(checks):])
