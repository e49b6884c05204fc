"""How much `bril-opt -O` saves: dynamic instruction counts before and after.

For every conformance benchmark (and, with --ours, our own benchmarks) the
program is run with its `# ARGS:` before and after the optimization pipeline;
printed per program: the `-p` count before, after, their ratio, and the time
the passes took.  Each program's output after optimization is checked against
the output before (a `!` marks a difference, which would be a bug).  The last
lines give the geometric mean of the after/before ratios per program group.

By default the runs are in process with our interpreter (`bril.interpreter.interp`);
--interp CMD runs every program (original and optimized JSON) through an
interpreter command instead, e.g. the reference one:

  python benchmarks/bench_opt.py
  python benchmarks/bench_opt.py --ours
  python benchmarks/bench_opt.py --pipeline "lvn tdce"
  python benchmarks/bench_opt.py --interp /tmp/ref/brili-ref

Dynamic counts do not depend on machine load; the pass timings do.
"""

import argparse
import io
import json
import math
import sys
import time
from pathlib import Path

import harness


def _in_process(prog, args):
    from bril.ir.errors import BrilError
    from bril.interpreter.interp import run
    out = io.StringIO()
    try:
        count = run(prog, args, out=out)
    except BrilError as err:
        return out.getvalue(), f"error: {err}", None
    return out.getvalue(), None, count


def _external(command):
    def run(prog, args):
        r = harness.run_interp(command, json.dumps(prog).encode(), args)
        return r.stdout, r.error, r.dyn
    return run


def geomean(ratios):
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", metavar='"PASS ..."',
                        help="passes to run instead of the -O pipeline")
    parser.add_argument("--ours", action="store_true",
                        help="also measure our own benchmarks (benchmarks/*/*.bril)")
    parser.add_argument("--interp", metavar="CMD",
                        help="run programs with this interpreter command (default: in process)")
    parser.add_argument("programs", nargs="*", type=Path,
                        help="only these .bril files (default: the conformance benchmarks)")
    opts = parser.parse_args(argv)

    from bril.passes import registry
    from bril.ir.text import parse_program

    names = opts.pipeline.split() if opts.pipeline else registry.O_PIPELINE
    bad = registry.unknown(names)
    if bad:
        parser.error(f"unknown pass '{bad[0]}'")
    groups = {}
    if opts.programs:
        groups["given"] = opts.programs
    else:
        groups["conformance"] = sorted(harness.CORPUS_BENCHMARKS.rglob("*.bril"))
        if opts.ours:
            groups["ours"] = harness.our_programs()
    run = _external(opts.interp) if opts.interp else _in_process

    print(f"pipeline: {' '.join(names)}")
    print(f"interpreter: {opts.interp or 'bril.interpreter.interp (in process)'}")
    header = f"{'program':<40} {'before':>11} {'after':>11} {'ratio':>7} {'pass ms':>8}"
    summary = []
    wrong = 0
    for group, paths in groups.items():
        print()
        print(header)
        print("-" * len(header))
        ratios = []
        for path in paths:
            prog = parse_program(path.read_text(encoding="utf-8"))
            args = harness.args_of(path)
            start = time.perf_counter()
            opt = registry.run_pipeline(prog, names)
            ms = (time.perf_counter() - start) * 1000
            before, after = run(prog, args), run(opt, args)
            same = before[:2] == after[:2]
            wrong += not same
            mark = "" if same else "  ! output differs"
            name = harness.display_name(path)
            if before[2] and after[2]:
                ratio = after[2] / before[2]
                ratios.append(ratio)
                print(f"{name:<40} {before[2]:>11} {after[2]:>11} {ratio:>7.3f} {ms:>8.1f}{mark}")
            else:
                print(f"{name:<40} {'-':>11} {'-':>11} {'-':>7} {ms:>8.1f}{mark}"
                      f"  ({before[1] or after[1]})")
        summary.append((group, len(ratios), geomean(ratios)))
    print()
    for group, n, g in summary:
        print(f"{group}: geometric mean of after/before over {n} programs = {g:.4f} "
              f"({(1 - g) * 100:.1f}% fewer dynamic instructions)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
