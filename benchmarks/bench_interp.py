"""Interpreter speed, end to end: how fast `brili -p` runs long Bril programs.

For each program the text is converted to JSON once (not timed); then each
interpreter command is started as a process with the JSON on stdin and `-p`
plus the arguments on its command line, and the wall time of that whole
process (start-up, loading, running, exiting) is measured, best of --repeat
runs.  Printed per program: dynamic instruction count, best seconds and
millions of dynamic instructions per second for every interpreter, and each
compared interpreter's time divided by the first one's (>1: the first is
faster).  Counts and stdout are checked to agree between interpreters; a `!`
marks a disagreement.  A start-up line times a ten-instruction program.

Programs are given as "PATH [ARGS...]": PATH relative to benchmarks/ or, with
a `corpus:` prefix, to the conformance corpus's benchmarks/ folder; without
ARGS the file's `# ARGS:` line is used.

Examples:
  python benchmarks/bench_interp.py
  python benchmarks/bench_interp.py --compare /tmp/ref/brili-ref
  python benchmarks/bench_interp.py --repeat 5 --program "recursion/fib-rec.bril 25"

The machine may be busy: repeat and compare figures from the same run.
"""

import argparse
import shlex
import statistics
import sys
from pathlib import Path

import harness

# Long-running programs (5-16 M dynamic instructions each), mixing our own
# benchmarks and the conformance corpus's.
DEFAULT_PROGRAMS = [
    "corpus:core/sum-check.bril 2000000",
    "corpus:float/leibniz.bril",
    "corpus:mem/mat-mul.bril 80 109658",
    "corpus:core/ackermann.bril 3 7",
    "loops/prime-count.bril 110000",
    "recursion/fib-rec.bril 27",
    "float/nbody.bril 10000",
    "memory/merge-sort.bril 30000 7",
    "char/caesar.bril 60000 k e y 2718",
    "spec/phase-branch.bril 1000000 400000",
    "spec/speculate-guard.bril 400000 250000 70 100",
]

# Ten instructions: what start-up costs when there is almost nothing to run.
STARTUP_PROGRAM = """@main {
  a: int = const 1;
  b: int = const 2;
  c: int = add a b;
  d: int = mul c c;
  e: int = sub d a;
  f: bool = lt a e;
  g: int = id e;
  h: int = add g b;
  print h f;
}
"""


def resolve(spec):
    """(path, args) for a program spec "PATH [ARGS...]"."""
    words = shlex.split(spec)
    name, args = words[0], words[1:]
    if name.startswith("corpus:"):
        path = harness.CORPUS_BENCHMARKS / name[len("corpus:"):]
    else:
        path = Path(name)
        if not path.is_absolute() and not path.exists():
            path = harness.HERE / name
    if not path.exists():
        raise SystemExit(f"error: no such program: {name}")
    return path, (args if args else harness.args_of(path))


def label_of(command):
    """A short column label for an interpreter command."""
    words = shlex.split(command)
    return Path(words[0]).name if words else command


def startup_ms(command, program_json, repeat):
    """Best and median wall milliseconds for the start-up program."""
    times = []
    for _ in range(repeat):
        run = harness.run_interp(command, program_json, [])
        if run.error:
            return None, run.error
        times.append(run.seconds * 1000)
    return min(times), statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interp", default="brili", metavar="CMD",
                        help="the interpreter measured (default: brili)")
    parser.add_argument("--compare", action="append", default=[], metavar="CMD",
                        help="another interpreter command timed side by side "
                             "(repeatable), e.g. /tmp/ref/brili-ref")
    parser.add_argument("--program", action="append", metavar='"PATH [ARGS]"',
                        help="a program to run instead of the default set (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per program and interpreter; the best counts (default 3)")
    parser.add_argument("--startup-repeat", type=int, default=10, metavar="N",
                        help="runs of the start-up program (default 10)")
    parser.add_argument("--bril2json", default="bril2json", metavar="CMD",
                        help="text-to-JSON command (default: bril2json)")
    opts = parser.parse_args(argv)
    harness.compile_bytecode()      # (whole processes are timed: see harness)

    interps = [opts.interp] + opts.compare
    labels = [label_of(c) for c in interps]
    if len(set(labels)) < len(labels):
        labels = interps
    specs = opts.program or DEFAULT_PROGRAMS
    programs = [resolve(s) for s in specs]

    name_w = max(len(harness.display_name(p)) for p, _ in programs) + 2
    args_w = min(max(len(" ".join(a)) for _, a in programs), 24) + 2
    col_w = [max(len(label), 8) for label in labels]
    header = f"{'program':<{name_w}}{'args':<{args_w}}{'dyn instr':>12}"
    for i, label in enumerate(labels):
        header += f"  {label:>{col_w[i]}} {'M/s':>6}"
        if i:
            header += f" {'ratio':>6}"
    print(f"wall seconds, best of {opts.repeat}; ratio = that column's time / "
          f"{labels[0]}'s time")
    print(header)
    print("-" * len(header))

    totals = [0.0] * len(interps)
    total_dyn = 0
    problems = 0
    for path, args in programs:
        program_json = harness.to_json(path, opts.bril2json)
        runs = [harness.best_run(cmd, program_json, args, opts.repeat) for cmd in interps]
        base = runs[0]
        dyn = base.dyn if base.dyn is not None else next((r.dyn for r in runs if r.dyn), None)
        arg_text = " ".join(args)
        if len(arg_text) > args_w - 2:
            arg_text = arg_text[:args_w - 5] + "..."
        line = f"{harness.display_name(path):<{name_w}}{arg_text:<{args_w}}{dyn or 0:>12}"
        notes = []
        for i, run in enumerate(runs):
            if run.error:
                line += f"  {'failed':>{col_w[i]}} {'':>6}" + (f" {'':>6}" if i else "")
                notes.append(f"{labels[i]}: {run.error}")
                problems += 1
                continue
            rate = run.dyn / run.seconds / 1e6 if run.dyn else 0.0
            line += f"  {run.seconds:>{col_w[i]}.3f} {rate:>6.1f}"
            if i:
                ratio = run.seconds / base.seconds if not base.error else float("nan")
                line += f" {ratio:>6.2f}"
                if not base.error and (run.dyn != base.dyn or run.stdout != base.stdout):
                    line += " !"
                    notes.append(f"{labels[i]} disagrees with {labels[0]}: count "
                                 f"{run.dyn} vs {base.dyn}, stdout "
                                 f"{'same' if run.stdout == base.stdout else 'differs'}")
                    problems += 1
        if all(not r.error for r in runs) and not notes:
            for i, run in enumerate(runs):
                totals[i] += run.seconds
            total_dyn += dyn or 0
        print(line)
        for note in notes:
            print(f"    {note}")

    print("-" * len(header))
    line = f"{'total (all ran, agreed)':<{name_w + args_w}}{total_dyn:>12}"
    for i, seconds in enumerate(totals):
        rate = total_dyn / seconds / 1e6 if seconds else 0.0
        line += f"  {seconds:>{col_w[i]}.3f} {rate:>6.1f}"
        if i:
            line += f" {seconds / totals[0] if totals[0] else float('nan'):>6.2f}"
    print(line)

    startup_json = harness.to_json_text(STARTUP_PROGRAM, opts.bril2json)
    print()
    print(f"start-up: a 10-instruction program, wall ms over {opts.startup_repeat} runs")
    for label, cmd in zip(labels, interps):
        best, median = startup_ms(cmd, startup_json, opts.startup_repeat)
        if best is None:
            print(f"  {label:<{max(col_w)}} failed: {median}")
        else:
            print(f"  {label:<{max(col_w)}} best {best:7.1f} ms   median {median:7.1f} ms")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
