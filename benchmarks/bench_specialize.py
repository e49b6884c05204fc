"""Value specialization under native code: `brili --trace --trace-specialize` vs
`brili --trace`, `brilc --profile` vs `brilc`, and a warm `brili` vs `brilc`.

    python benchmarks/bench_specialize.py [--repeat N] [--brili CMD] [--brilc CMD]

Per program, on a training input: traces are recorded by `brili --trace`, with
and without `--trace-specialize`, and a type profile is written by `brili
--write-profile` (the values nearly every call of a function passes).  The
original and both traced programs are compiled with `brilc`, the original once
more with `brilc --profile`, and each executable runs as a whole process (the
median of `--repeat` runs, the executables in turn, A B B A ...) on a larger
input whose specialized value is the one the training run saw, and on an unseen
input where it differs (the check at the loop's or the function's entry fails
and the generic code runs).  Beside them, `brili` warm: the program run twice
on the training input as a user runs it (no flag, a fresh code cache, the second
run waiting for every build), then on the larger inputs: it executes the
program's executable, compiled for what those runs saw (start-up included).
Printed: seconds of each, specialized / traced, profiled / original and warm /
original (below 1: the specialization pays; the unseen input shows what a
failing check costs).  Every output is compared with the original's.
"""

import os
import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parent.parent

# (program, training input, larger input with the value seen, input with another value)
PROGRAMS = [
    ("benchmarks/loops/lcg-period.bril", "100000 2147483647 16807 0 1",
     "100000000 2147483647 16807 0 1", "100000000 2147483629 16807 0 1"),
    ("benchmarks/loops/modpow-sum.bril", "20000 65537 1000003",
     "2000000 65537 1000003", "2000000 65537 999983"),
    ("benchmarks/spec/speculate-guard.bril", "120000 80000 70 100",
     "12000000 8000000 70 100", "12000000 8000000 70 33"),
    ("benchmarks/loops/digit-sums.bril", "30000 7", "20000000 7", "20000000 10"),
    # (functions called with one value throughout: for the profile)
    ("benchmarks/recursion/ackermann-loop.bril", "3 6", "3 10", "2 300"),
    ("benchmarks/spec/state-machine.bril", "50000 25000 5", "30000000 15000000 5",
     "30000000 15000000 11"),
    # (every call passes one dimension: a short trip count)
    ("benchmarks/spec/closest.bril", "200 100 3 7", "200 200000 3 7", "200 200000 4 7"),
    ("benchmarks/dynamic/typed/tree-grow.bril", "3500 42", "600000 42", "600000 9"),
    ("benchmarks/float/nbody.bril", "3000", "300000", "200000"),
]


def medians(cmds, repeat):
    """{label: (median wall seconds, (exit status, stdout))} of whole processes, the
    commands -- argv, or (argv, stdin, environment) -- run in turn
    (`harness.medians_in_turn`)."""
    found = harness.medians_in_turn([cmd if isinstance(cmd, tuple) else (cmd, None, None)
                                     for cmd in cmds.values()], repeat)
    return {label: (t, (done.returncode, done.stdout)) for label, (t, done) in zip(cmds, found)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs of each, in turn; the median counts")
    ap.add_argument("--brili", default="brili", help="the brili command")
    ap.add_argument("--brilc", default="brilc", help="the brilc command")
    ap.add_argument("--bril2json", default="bril2json", help="the bril2json command")
    opts = ap.parse_args()
    brili, brilc = shlex.split(opts.brili), shlex.split(opts.brilc)
    print(f"{'program':34} {'input':10} {'orig s':>8} {'traced s':>9} {'spec s':>8} "
          f"{'prof s':>8} {'warm s':>8} {'spec/traced':>11} {'prof/orig':>9} {'warm/orig':>9}")
    ratios, prof_ratios, warm_ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, train, seen, unseen in PROGRAMS:
            text = (ROOT / name).read_text()
            orig = subprocess.run(shlex.split(opts.bril2json), input=text.encode(),
                                  capture_output=True, check=True).stdout
            progs = {"orig": orig}
            for label, extra in (("traced", []), ("spec", ["--trace-specialize"])):
                out = tmp / f"{label}.json"
                subprocess.run(brili + ["--trace", str(out)] + extra + train.split(),
                               input=orig, capture_output=True, check=True)
                progs[label] = out.read_bytes()
            profile = tmp / "profile.json"
            subprocess.run(brili + ["--write-profile", str(profile)] + train.split(),
                           input=orig, capture_output=True)
            exes = {}
            for label, data in list(progs.items()) + [("prof", orig)]:
                exe = tmp / label
                extra = ["--profile", str(profile)] if label == "prof" else []
                subprocess.run(brilc + extra + ["-o", str(exe)], input=data,
                               capture_output=True, check=True)
                exes[label] = exe
            warm_env = dict(os.environ, BRIL_CACHE_DIR=str(tmp / f"cache-{Path(name).stem}"))
            for mode in ("1", "wait"):
                subprocess.run(brili + train.split(), input=orig, capture_output=True,
                               env=dict(warm_env, BRIL_JIT_PRECOMPILE=mode))
            short = Path(name).stem
            # (a profile that gives no variant compiles to the same file: its ratio
            # is the machine's noise, and says so)
            same = exes["prof"].read_bytes() == exes["orig"].read_bytes()
            for kind, args in (("seen", seen), ("unseen", unseen)):
                cmds = {label: [str(exe)] + args.split() for label, exe in exes.items()}
                cmds["warm"] = (brili + args.split(), orig, warm_env)
                res = medians(cmds, opts.repeat)
                if len({res[label][1] for label in res}) != 1:
                    print(f"{short:34} {kind:10} error: the outputs differ")
                    continue
                ratio = res["spec"][0] / res["traced"][0]
                prof_ratio = res["prof"][0] / res["orig"][0]
                warm_ratio = res["warm"][0] / res["orig"][0]
                if kind == "seen":
                    ratios.append(ratio)
                    warm_ratios.append(warm_ratio)
                    if not same:
                        prof_ratios.append(prof_ratio)
                print(f"{short:34} {kind:10} {res['orig'][0]:8.3f} {res['traced'][0]:9.3f} "
                      f"{res['spec'][0]:8.3f} {res['prof'][0]:8.3f} {res['warm'][0]:8.3f} "
                      f"{ratio:11.3f} {prof_ratio:9.3f} {warm_ratio:9.3f}"
                      f"{' (prof: the same file, noise)' if same else ''}", flush=True)
    if ratios:
        print(f"specialized / traced on the inputs with the value seen: "
              f"{sum(r <= 0.8 for r in ratios)} of {len(ratios)} at or below 0.80")
        print(f"profiled / original on the inputs with the value seen (where the profile "
              f"made another executable): {sum(r <= 0.8 for r in prof_ratios)} of "
              f"{len(prof_ratios)} at or below 0.80, {sum(r > 1.03 for r in prof_ratios)} "
              f"above 1.03")
        print(f"warm brili / original on the inputs with the value seen: "
              f"{sum(r <= 0.8 for r in warm_ratios)} of {len(warm_ratios)} at or below 0.80, "
              f"{sum(r > 1.03 for r in warm_ratios)} above 1.03 (start-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
