"""Value specialization under native code: `brili --trace --trace-specialize` vs `brili --trace`.

    python benchmarks/bench_specialize.py [--repeat N] [--brili CMD] [--brilc CMD]

Per program, traces are recorded by `brili --trace` on a training input, with
and without `--trace-specialize`; the original and both traced programs are
compiled with `brilc`, and each executable runs as a whole process (best of
`--repeat`) on a larger input whose specialized value is the one the training
run saw, and on an unseen input where it differs (the check at the loop's entry
fails and the original loop runs).  Printed: seconds of each, and specialized /
traced (below 1: the specialization pays; the unseen input shows what a failing
check costs).  Every executable's output is compared with the original's.
"""

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
]


def best(cmd, repeat):
    """(best wall seconds, stdout) of a whole process."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True)
        times.append(time.perf_counter() - t)
        out = (done.returncode, done.stdout)
    return min(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each, best counts")
    ap.add_argument("--brili", default="brili", help="the brili command")
    ap.add_argument("--brilc", default="brilc", help="the brilc command")
    ap.add_argument("--bril2json", default="bril2json", help="the bril2json command")
    opts = ap.parse_args()
    brili, brilc = shlex.split(opts.brili), shlex.split(opts.brilc)
    print(f"{'program':34} {'input':10} {'orig s':>8} {'traced s':>9} {'spec s':>8} "
          f"{'spec/traced':>11}")
    ratios = []
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
            exes = {}
            for label, data in progs.items():
                exe = tmp / label
                subprocess.run(brilc + ["-o", str(exe)], input=data, capture_output=True,
                               check=True)
                exes[label] = exe
            short = Path(name).stem
            for kind, args in (("seen", seen), ("unseen", unseen)):
                res = {label: best([str(exe)] + args.split(), opts.repeat)
                       for label, exe in exes.items()}
                if not res["orig"][1] == res["traced"][1] == res["spec"][1]:
                    print(f"{short:34} {kind:10} error: the outputs differ")
                    continue
                ratio = res["spec"][0] / res["traced"][0]
                if kind == "seen":
                    ratios.append(ratio)
                print(f"{short:34} {kind:10} {res['orig'][0]:8.3f} {res['traced'][0]:9.3f} "
                      f"{res['spec'][0]:8.3f} {ratio:11.3f}", flush=True)
    if ratios:
        print(f"specialized / traced on the inputs with the value seen: "
              f"{sum(r <= 0.8 for r in ratios)} of {len(ratios)} at or below 0.80")
    return 0


if __name__ == "__main__":
    sys.exit(main())
