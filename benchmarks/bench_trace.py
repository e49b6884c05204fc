"""Dynamic instruction counts: original vs `bril-opt -O` vs traced, per program.

    python benchmarks/bench_trace.py [--train alt] [--only SUBSTRING] [--hot N]

For every program of the conformance benchmarks and of our `benchmarks/`, it
prints the `-p` count of the original, then as ratios to it: `-O` alone
(`bril-opt -O`), traces alone (`brili --trace --trace-no-opt`: recorded on and
spliced into the original) and the traced program (`brili --trace`: the best,
on the training input, of original + traces, `-O` alone and `-O` + traces),
with geometric means over all programs and over the loop-heavy ones (a loop
header visited at least 1000 times in the training run).

`--train alt`: traces judged on an input they were not built from.  Our
programs record on their `# ALT-ARGS:` (mostly smaller) and are measured on
`# ARGS:`; the conformance programs that take arguments record on `# ARGS:`
and are measured on the larger input listed in LARGER below (the others,
marked `same`, on their training input: they take no size argument).
Every program's output on the measured input is compared with the
original's (a difference is reported as an error row).  Counts, not seconds:
the figure of merit Bril users compare optimizations by.

`--wall`: what a user's clock shows.  Per program, traces are recorded by
`brili --trace` on the training input (as `--train alt`: ALT-ARGS for ours,
ARGS for the conformance programs), then the original and the traced program
run as whole processes, in turn, on the training input and on the larger one
(LARGER, WALL_INPUTS; ARGS for ours) under `brili`, warm `brili --jit` (its code
cache filled first, JIT_FILLS) and the `brilc` executable: traced time / original
time for each (below 1: the traces pay); the native engines also on a long input
(LONG_INPUTS: the executable runs 0.15 s or more, where on the larger input it
runs a few milliseconds, mostly the process itself); the dynamic-instruction
ratio on the larger input, the static size ratio (instructions) and tracing
time / plain-run time on the training input.  Geomeans over the programs whose
original runs at least `--min-time` seconds under `brili` on the larger input.

`--time`: what tracing costs instead.  Per program, the whole-process wall
time of `brili --trace OUT -p ARGS` and of a plain `brili -p ARGS` (best of
`--repeat` runs each, taken in turn so that both see the same load), their
ratio, and its geometric mean and worst over the programs.  `--brili CMD`
times another build (e.g. an older checkout's).
"""

import argparse
import math
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))

from corpus import BENCHMARKS, CONFORMANCE, args_of, bril_files  # noqa: E402
from harness import compile_bytecode, dyn_count  # noqa: E402

from bril.interpreter import interp  # noqa: E402
from bril.ir.errors import BrilError  # noqa: E402
from bril.passes.registry import optimize  # noqa: E402
from bril.ir.text import parse_program  # noqa: E402
from bril.tracing.tracer import trace_program  # noqa: E402

_ALT = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)

# Larger inputs for the conformance benchmarks that take a size (`--train alt`
# measures on these after recording on `# ARGS:`).  Ours carry `# ALT-ARGS:`.
LARGER = {
    "benchmarks/core/primes-between": "1 3000",
    "benchmarks/core/pythagorean_triple": "325",
    "benchmarks/core/sum-check": "4000",
    "benchmarks/float/harmonic-sum": "2000000",
    "benchmarks/mem/2dconvol": "16 5 1",
    "benchmarks/mem/csrmv": "90 90 5",
    "benchmarks/mem/eight-queens": "9",
    "benchmarks/mem/mat-mul": "70 109658",
    "benchmarks/mem/quicksort-hoare": "8 80 109658",
    "benchmarks/mixed/random_walk": "3 5",
}


def selected(files, only):
    """(display name, path) of each program whose name contains `only`."""
    for path, root in files:
        name = str(path.relative_to(root).with_suffix(""))
        if root == BENCHMARKS:
            name = "ours/" + name
        if only in name:
            yield name, path


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", choices=["args", "alt"], default="args",
                    help="record traces on ARGS (default) or on ALT-ARGS where present")
    ap.add_argument("--only", default="", help="only programs whose path contains this")
    ap.add_argument("--hot", type=int, default=56, help="loop hotness threshold")
    ap.add_argument("--time", action="store_true",
                    help="time brili --trace against plain brili (whole processes)")
    ap.add_argument("--repeat", type=int, default=3, help="with --time: runs of each, best counts")
    ap.add_argument("--brili", default="brili", help="with --time/--wall: the brili command")
    ap.add_argument("--wall", action="store_true",
                    help="wall time of traced vs original programs on every engine")
    ap.add_argument("--engines", default="brili,jit,native",
                    help="with --wall: comma-separated among brili, jit, native")
    ap.add_argument("--brilc", default="brilc", help="with --wall: the brilc command")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="with --wall: geomeans over programs whose original runs this "
                         "long (seconds) under brili on the larger input")
    opts = ap.parse_args()

    files = [(p, CONFORMANCE) for p in bril_files("benchmarks")]
    files += [(p, BENCHMARKS) for p in bril_files(root=BENCHMARKS)]
    if opts.time or opts.wall:
        compile_bytecode()          # (whole processes are timed: see harness)
    if opts.time:
        return time_tracing(files, opts)
    if opts.wall:
        return wall_times(files, opts)
    rows = []
    print(f"{'program':40} {'original':>11} {'-O':>7} {'tr-only':>7} {'traced':>7}  loop")
    for name, path in selected(files, opts.only):
        prog = parse_program(path.read_text())
        args = train = args_of(path)
        m = _ALT.search(path.read_text())
        if opts.train == "alt" and m:
            train = m.group(1).split()
        elif opts.train == "alt" and name in LARGER:
            args = LARGER[name].split()
        unseen = train != args
        try:
            want, base = interp.run_capture(prog, args)
            opt = optimize(prog)
            o_opt, c_opt = interp.run_capture(opt, args)
            tr = trace_program(prog, train, hot=opts.hot, optimize=False)
            o_tr, c_tr = interp.run_capture(tr.program, args)
            tr_opt = trace_program(prog, train, hot=opts.hot)
            o_tropt, c_tropt = interp.run_capture(tr_opt.program, args)
        except BrilError as e:
            print(f"{name:40} error: {e}")
            continue
        if not want == o_opt == o_tr == o_tropt:
            # Counts of a program that prints something else mean nothing.
            print(f"{name:40} error: output differs from the original's")
            continue
        loopy = tr.max_header_visits >= 1000
        rows.append((name, base, c_opt / base, c_tr / base, c_tropt / base, loopy))
        print(f"{name:40} {base:11d} {c_opt / base:7.3f} {c_tr / base:7.3f} "
              f"{c_tropt / base:7.3f}  {'yes' if loopy else '   '}"
              f"{'' if unseen or opts.train == 'args' else '  same'}", flush=True)

    for label, sel in (("all", rows), ("loop-heavy", [r for r in rows if r[5]])):
        if not sel:
            continue
        print(f"geomean {label} ({len(sel)} programs): -O {geomean([r[2] for r in sel]):.4f}  "
              f"traces-only {geomean([r[3] for r in sel]):.4f}  "
              f"traced {geomean([r[4] for r in sel]):.4f}  "
              f"worst traces-only {max(r[3] for r in sel):.3f}  "
              f"worst traced {max(r[4] for r in sel):.3f}")


def time_tracing(files, opts):
    """--time: seconds of `brili --trace` / seconds of plain `brili`, per program."""
    brili = shlex.split(opts.brili)
    rows = []
    print(f"{'program':40} {'plain s':>8} {'trace s':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "traced.json")
        for name, path in selected(files, opts.only):
            data = interp_json(path)
            args = args_of(path)
            times, outs = _best_pair(
                [(brili + ["-p"] + args, data),
                 (brili + ["--trace", out, "--hot", str(opts.hot), "-p"] + args, data)],
                opts.repeat)
            best = dict(zip(("plain", "trace"), times))
            results = dict(zip(("plain", "trace"), outs))
            if results["plain"] != results["trace"]:
                print(f"{name:40} error: brili --trace printed something else")
                continue
            ratio = best["trace"] / best["plain"]
            rows.append((name, ratio))
            print(f"{name:40} {best['plain']:8.3f} {best['trace']:8.3f} {ratio:6.2f}", flush=True)
    if rows:
        worst = max(rows, key=lambda r: r[1])
        print(f"tracing time / plain run ({len(rows)} programs): geomean "
              f"{geomean([r[1] for r in rows]):.2f}  worst {worst[1]:.2f} ({worst[0]})")


# Larger inputs still for `--wall` (original runs of 0.2 s or more under brili).
WALL_INPUTS = {
    "benchmarks/core/sum-check": "4000000",
    "benchmarks/core/check-primes": "4000",
    "benchmarks/core/fizz-buzz": "500000",
    "benchmarks/core/primes-between": "1 6000",
    "benchmarks/mem/mat-mul": "80 109658",
}


# Inputs on which the original's brilc executable runs 0.15 s or more, for the
# `:long` columns of the native engines (`--wall`): on the larger inputs above
# (chosen for brili) an executable runs 1-7 ms, 1 ms of it the process itself,
# and its ratio is mostly the machine's noise.  Programs with no scalable input
# (leibniz; random_walk stops at 100,000 steps) have none.
LONG_INPUTS = {
    "benchmarks/core/check-primes": "60000",
    "benchmarks/core/fizz-buzz": "20000000",
    "benchmarks/core/primes-between": "1 100000",
    "benchmarks/core/sum-check": "4000000000",
    "benchmarks/float/harmonic-sum": "200000000",
    "benchmarks/mem/eight-queens": "12",
    "benchmarks/mem/mat-mul": "500 109658",
    "ours/bitcast/float-bits": "30000000",
    "ours/char/caesar": "10000000 k e y 2718",
    "ours/float/nbody": "1000000",
    "ours/loops/modpow-sum": "2000000 65537 1000003",
    "ours/loops/prime-count": "3000000",
    "ours/memory/bst": "200000 77",
}
LONG_ENGINES = ("jit", "native")


def _inputs(name, path):
    """(training arguments, larger arguments) as `--wall` uses them."""
    text = path.read_text()
    train = args_of(path)
    m = _ALT.search(text)
    if m:                                       # ours: record on ALT-ARGS, measure on ARGS
        return m.group(1).split(), train
    larger = WALL_INPUTS.get(name) or LARGER.get(name)
    return train, (larger.split() if larger else train)


def _best(cmd, data, repeat, env=None):
    """(best wall seconds, (returncode, stdout, stderr)) of a whole process."""
    best, result = None, None
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        r = subprocess.run(cmd, input=data, capture_output=True, env=env)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
        result = (r.returncode, r.stdout, r.stderr)
    return best, result


# Runs that fill the code cache before warm `--jit` is timed (the steady state of
# a program run again and again): first with `--hot N` (every loop reaching N
# iterations is compiled and kept; the first such run learns whether native code
# needs the shared heap), then as users run it (None: sampled).  Filled by
# sampled runs only, what was native depended on whether the sampler happened to
# look during a loop of a few milliseconds (mat-mul 0.84-1.67 after 2 or 5 runs,
# primes-between's training input 0.99-1.36).
JIT_FILLS = (1000, 1000, 1000, None, None)

# Short runs (a few ms: the brilc executables) are repeated until each side has
# run this long in all, up to SHORT_RUNS times: the best of 3 runs of 5 ms is
# mostly the machine's noise.
SHORT_TOTAL = 0.5
SHORT_RUNS = 40


def _best_pair(runs, repeat, env=None):
    """Best wall seconds and last result of each (cmd, stdin) in `runs`, run in
    turn (so that every side sees the same load) at least `repeat` times, more
    while they are short."""
    best = [None] * len(runs)
    results = [None] * len(runs)
    spent, n = 0.0, 0
    while n < max(1, repeat) or (spent < SHORT_TOTAL * len(runs) and n < SHORT_RUNS):
        for i, (cmd, data) in enumerate(runs):
            t = time.perf_counter()
            r = subprocess.run(cmd, input=data, capture_output=True, env=env)
            dt = time.perf_counter() - t
            spent += dt
            best[i] = dt if best[i] is None else min(best[i], dt)
            results[i] = (r.returncode, r.stdout, r.stderr)
        n += 1
    return best, results


def _size(prog):
    return sum(1 for f in prog.get("functions", ()) for i in f.get("instrs", ()) if "op" in i)


def wall_times(files, opts):
    """--wall: traced / original whole-process time per engine and input."""
    import json
    import os
    brili, brilc = shlex.split(opts.brili), shlex.split(opts.brilc)
    engines = [e for e in opts.engines.split(",") if e]
    cols = [f"{e}:{inp}" for inp in ("train", "large") for e in engines]
    cols += [f"{e}:long" for e in engines if e in LONG_ENGINES]
    print("traced time / original time per engine, on the training and the larger input, "
          "and for native engines on a long input (LONG_INPUTS; - where none); "
          "dyn: -p count ratio (larger input); size: static instructions ratio; "
          "tracing: brili --trace / plain brili (training input)")
    print(f"{'program':34} {'orig s':>7} " + " ".join(f"{c:>12}" for c in cols)
          + f" {'dyn':>6} {'size':>6} {'tracing':>8}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env_fill = dict(os.environ, BRIL_CACHE_DIR=str(tmp / "cache"), BRIL_JIT_PRECOMPILE="wait")
        env_warm = dict(os.environ, BRIL_CACHE_DIR=str(tmp / "cache"), BRIL_JIT_PRECOMPILE="0")
        for name, path in selected(files, opts.only):
            train, large = _inputs(name, path)
            orig = interp_json(path)
            t_orig, r_orig = _best(brili + ["-p"] + large, orig, 1)
            if r_orig[0] != 0 or t_orig < opts.min_time:
                continue
            traced_path = tmp / "traced.json"
            (t_plain, t_trace), (r_plain, r_trace) = _best_pair(
                [(brili + ["-p"] + train, orig),
                 (brili + ["--trace", str(traced_path), "--hot", str(opts.hot), "-p"] + train,
                  orig)], opts.repeat)
            if r_trace != r_plain:
                print(f"{name:34} error: brili --trace printed something else")
                continue
            traced = traced_path.read_bytes()
            ratios, bad = [], None
            exes = {}
            if "native" in engines:
                for label, data in (("orig", orig), ("traced", traced)):
                    exe = tmp / f"{label}.exe"
                    r = subprocess.run(brilc + ["-o", str(exe)], input=data, capture_output=True)
                    if r.returncode != 0:
                        bad = f"brilc failed on the {label} program"
                    exes[label] = exe
            dyn = None
            cases = [(inp, e) for inp in (train, large) for e in engines]
            long = LONG_INPUTS.get(name)
            cases += [(long.split() if long else None, e) for e in engines if e in LONG_ENGINES]
            for inp, e in cases:
                if bad:
                    break
                if inp is None:
                    ratios.append(None)
                    continue
                labels = ("orig", "traced")
                if e == "brili":
                    runs = [(brili + ["-p"] + inp, data) for data in (orig, traced)]
                    env = None
                elif e == "jit":
                    for data in (orig, traced):
                        for hot in JIT_FILLS:
                            _best(brili + ["--jit"] + (["--hot", str(hot)] if hot else [])
                                  + ["-p"] + inp, data, 1, env_fill)
                    runs = [(brili + ["--jit", "-p"] + inp, data) for data in (orig, traced)]
                    env = env_warm
                else:
                    runs = [([str(exes[label])] + inp, b"") for label in labels]
                    env = None
                best, results = _best_pair(runs, opts.repeat, env)
                times, outs = dict(zip(labels, best)), dict(zip(labels, results))
                if outs["orig"][:2] != outs["traced"][:2]:
                    bad = f"the traced program printed something else ({e})"
                    break
                if e == "brili" and inp is large:
                    a, b = (dyn_count(outs[k][2].decode(errors="replace"))
                            for k in ("orig", "traced"))
                    dyn = b / a if a and b else None
                ratios.append(times["traced"] / times["orig"])
            if bad:
                print(f"{name:34} error: {bad}")
                continue
            size = _size(json.loads(traced)) / _size(json.loads(orig))
            tracing = t_trace / t_plain
            rows.append((name, ratios, dyn, size, tracing))
            print(f"{name:34} {t_orig:7.3f} " + " ".join(_cell(r) for r in ratios)
                  + f" {dyn or float('nan'):6.3f} {size:6.2f} {tracing:8.2f}", flush=True)
    if not rows:
        print(f"no program runs {opts.min_time} s or more under brili on its larger input")
        return

    def column(i):
        return [r[1][i] for r in rows if r[1][i] is not None]
    print(f"{'geomean (' + str(len(rows)) + ' programs)':42} "
          + " ".join(_cell(geomean(column(i)) if column(i) else None) for i in range(len(cols)))
          + f" {geomean([r[2] for r in rows if r[2]]):6.3f}"
          f" {geomean([r[3] for r in rows]):6.2f} {geomean([r[4] for r in rows]):8.2f}")
    print(f"{'worst':42} "
          + " ".join(_cell(max(column(i)) if column(i) else None) for i in range(len(cols)))
          + f" {max(r[2] or 0 for r in rows):6.3f} {max(r[3] for r in rows):6.2f}"
          f" {max(r[4] for r in rows):8.2f}")


def _cell(ratio):
    return f"{'-':>12}" if ratio is None else f"{ratio:12.3f}"


def interp_json(path):
    import json
    return json.dumps(parse_program(path.read_text())).encode()


if __name__ == "__main__":
    main()
