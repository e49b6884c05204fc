"""Dynamic instruction counts: original vs `bril-opt -O` vs traced, per program.

    python benchmarks/bench_trace.py [--train alt] [--only SUBSTRING] [--hot N]

For every program of the conformance benchmarks and of our `benchmarks/`, it
prints the `-p` count of the original, of `-O` alone, of the traced program
(traces recorded on the original) and of `-O` then traced, as ratios to the
original, with geometric means over all programs and over the loop-heavy
ones (a loop header visited at least 1000 times in the training run).

`--train alt`: for programs with an `# ALT-ARGS:` line, record the traces on
those arguments and measure on the `# ARGS:` ones (traces judged on an input
they were not built from).  Counts, not seconds: the figure of merit Bril
users compare optimizations by.
"""

import argparse
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))

from corpus import BENCHMARKS, CONFORMANCE, args_of, bril_files  # noqa: E402

from bril import interp  # noqa: E402
from bril.errors import BrilError  # noqa: E402
from bril.passes.registry import optimize  # noqa: E402
from bril.text import parse_program  # noqa: E402
from bril.tracer import trace_program  # noqa: E402

_ALT = re.compile(r"^\s*#\s*ALT-ARGS:(.*)$", re.M)


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", choices=["args", "alt"], default="args",
                    help="record traces on ARGS (default) or on ALT-ARGS where present")
    ap.add_argument("--only", default="", help="only programs whose path contains this")
    ap.add_argument("--hot", type=int, default=56, help="loop hotness threshold")
    opts = ap.parse_args()

    files = [(p, CONFORMANCE) for p in bril_files("benchmarks")]
    files += [(p, BENCHMARKS) for p in bril_files(root=BENCHMARKS)]
    rows = []
    print(f"{'program':40} {'original':>11} {'-O':>7} {'traced':>7} {'-O+tr':>7}  loop")
    for path, root in files:
        name = str(path.relative_to(root).with_suffix(""))
        if root == BENCHMARKS:
            name = "ours/" + name
        if opts.only not in name:
            continue
        prog = parse_program(path.read_text())
        args = args_of(path)
        m = _ALT.search(path.read_text())
        train = m.group(1).split() if (opts.train == "alt" and m) else args
        try:
            _, base = interp.run_capture(prog, args)
            opt = optimize(prog)
            _, c_opt = interp.run_capture(opt, args)
            tr = trace_program(prog, train, hot=opts.hot)
            _, c_tr = interp.run_capture(tr.program, args)
            tr_opt = trace_program(opt, train, hot=opts.hot)
            _, c_tropt = interp.run_capture(tr_opt.program, args)
        except BrilError as e:
            print(f"{name:40} error: {e}")
            continue
        loopy = tr.max_header_visits >= 1000
        rows.append((name, base, c_opt / base, c_tr / base, c_tropt / base, loopy))
        print(f"{name:40} {base:11d} {c_opt / base:7.3f} {c_tr / base:7.3f} "
              f"{c_tropt / base:7.3f}  {'yes' if loopy else ''}", flush=True)

    for label, sel in (("all", rows), ("loop-heavy", [r for r in rows if r[5]])):
        if not sel:
            continue
        print(f"geomean {label} ({len(sel)} programs): -O {geomean([r[2] for r in sel]):.3f}  "
              f"traced {geomean([r[3] for r in sel]):.3f}  "
              f"-O+traced {geomean([r[4] for r in sel]):.3f}  "
              f"worst traced {max(r[3] for r in sel):.3f}  "
              f"worst -O+traced {max(r[4] for r in sel):.3f}")


if __name__ == "__main__":
    main()
