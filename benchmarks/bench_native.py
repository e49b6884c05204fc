"""Native code vs the interpreter: `brili`, `brili --jit`, and executables built
by `brilc`.

For each program: the text is converted to JSON once (not timed); the
executable is built from the JSON with the `brilc` command (compile time: the
wall time of that whole process, best of --compile-repeat); then `brili -p`,
`brili --jit -p` and the executable with `-p` are each run with the same
arguments, best wall time of --repeat runs (the JIT's time includes its
start-up, compilation and everything else: it is the whole process).
Printed per program: dynamic instruction count, interpreter seconds, JIT
seconds and speed-up (interpreter / JIT), AOT compile seconds, native seconds
and speed-up (interpreter / native).  Output and counts must agree; a `!`
marks a disagreement.

A last line measures the JIT's fixed cost on a typical loop program with a
tiny input: `brili --jit --hot 1` minus `brili` (importing llvmlite, loading
the runtime, compiling the loop), best of --repeat.

The default programs are long runs (larger arguments than their `# ARGS:`),
so that the interpreter takes about a second or more: the issue's target is a
native speed-up of at least 20x there.  Native times this short are dominated
by process start-up (about 1 ms), so the speed-up is a lower bound.

Programs are given as "PATH [ARGS...]": PATH relative to benchmarks/ or, with a
`corpus:` prefix, to the conformance corpus's benchmarks/ folder; without ARGS
the file's `# ARGS:` line is used.

Examples:
  python benchmarks/bench_native.py
  python benchmarks/bench_native.py --repeat 5 --program "recursion/fib-rec.bril 27"
  python benchmarks/bench_native.py --brilc "brilc -O3"

The machine may be busy: repeat and compare figures from the same run.
"""

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

# Interpreter runs of about 1 s or more on this machine (measured 2026-11-22,
# 0.9-1.8 s; leibniz has no arguments and stays shorter).  Recursive programs
# without loops (ackermann, fib-rec) show what the JIT does not touch.
DEFAULT_PROGRAMS = [
    "corpus:mem/mat-mul.bril 150 109658",
    "corpus:float/leibniz.bril",
    "corpus:core/sum-check.bril 14000000",
    "loops/prime-count.bril 300000",
    "corpus:core/ackermann.bril 3 9",
    "recursion/fib-rec.bril 32",
    "float/nbody.bril 33000",
    "memory/merge-sort.bril 120000 7",
    "memory/sieve.bril 2400000",
    "char/caesar.bril 480000 k e y 2718",
    "spec/speculate-guard.bril 1600000 850000 70 100",
]


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


def compile_native(brilc, program_json, out, repeat):
    """(best wall seconds of `brilc -o out < json`, error text or None)."""
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(shlex.split(brilc) + ["-o", str(out)], input=program_json,
                              capture_output=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            return None, done.stderr.decode(errors="replace").strip() or "brilc failed"
        best = seconds if best is None else min(best, seconds)
    return best, None


def best_run(command, program_json, args, repeat):
    runs = [harness.run_interp(command, program_json, args) for _ in range(repeat)]
    for run in runs:
        if run.error:
            return run
    return min(runs, key=lambda r: r.seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interp", default="brili", metavar="CMD",
                        help="the interpreter (default: brili)")
    parser.add_argument("--jit", default="brili --jit", metavar="CMD",
                        help="the JIT command (default: brili --jit); '' to skip it")
    parser.add_argument("--brilc", default="brilc", metavar="CMD",
                        help="the compiler command, reading JSON on stdin (default: brilc)")
    parser.add_argument("--program", action="append", metavar='"PATH [ARGS]"',
                        help="a program to run instead of the default set (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per program and engine; the best counts (default 3)")
    parser.add_argument("--compile-repeat", type=int, default=1, metavar="N",
                        help="compilations per program; the best counts (default 1)")
    parser.add_argument("--bril2json", default="bril2json", metavar="CMD",
                        help="text-to-JSON command (default: bril2json)")
    opts = parser.parse_args(argv)

    programs = [resolve(s) for s in opts.program or DEFAULT_PROGRAMS]
    name_w = max(len(harness.display_name(p)) for p, _ in programs) + 2
    args_w = min(max(len(" ".join(a)) for _, a in programs), 24) + 2
    header = (f"{'program':<{name_w}}{'args':<{args_w}}{'dyn instr':>11}"
              f"  {'interp s':>9}  {'jit s':>8}  {'jit x':>6}"
              f"  {'compile s':>9}  {'native s':>9}  {'aot x':>7}")
    print(f"wall seconds, best of {opts.repeat}; jit x = interpreter / jit, "
          f"aot x = interpreter / native")
    print(f"interpreter: {opts.interp}   jit: {opts.jit or '-'}   compiler: {opts.brilc}")
    print(header)
    print("-" * len(header))
    problems = 0
    speedups = []
    jit_speedups = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (path, args) in enumerate(programs):
            program_json = harness.to_json(path, opts.bril2json)
            exe = Path(tmp) / f"prog{k}"
            arg_text = " ".join(args)
            if len(arg_text) > args_w - 2:
                arg_text = arg_text[:args_w - 5] + "..."
            line = f"{harness.display_name(path):<{name_w}}{arg_text:<{args_w}}"
            compile_s, error = compile_native(opts.brilc, program_json, exe, opts.compile_repeat)
            if error:
                print(line + f"{'':>11}  brilc failed: {error}")
                problems += 1
                continue
            interp = best_run(opts.interp, program_json, args, opts.repeat)
            native = best_run(str(exe), b"", args, opts.repeat)
            jit = best_run(opts.jit, program_json, args, opts.repeat) if opts.jit else None
            failed = interp.error or native.error or (jit.error if jit else None)
            if failed:
                print(line + f"{'':>11}  failed: {failed}")
                problems += 1
                continue
            speedup = interp.seconds / native.seconds
            speedups.append(speedup)
            jit_text = f"{'-':>8}  {'-':>6}"
            if jit is not None:
                jit_speedup = interp.seconds / jit.seconds
                jit_speedups.append(jit_speedup)
                jit_text = f"{jit.seconds:>8.3f}  {jit_speedup:>5.1f}x"
            line += (f"{interp.dyn or 0:>11}  {interp.seconds:>9.3f}  {jit_text}"
                     f"  {compile_s:>9.3f}  {native.seconds:>9.4f}  {speedup:>6.1f}x")
            if native.dyn != interp.dyn or native.stdout != interp.stdout or (
                    jit is not None and (jit.dyn != interp.dyn or jit.stdout != interp.stdout)):
                line += " !"
                problems += 1
            print(line)
    print("-" * len(header))
    for what, values in (("jit", jit_speedups), ("aot", speedups)):
        if values:
            geo = 1.0
            for v in values:
                geo *= v
            geo **= 1 / len(values)
            print(f"{what} speed-up: geometric mean {geo:.1f}x, min {min(values):.1f}x, "
                  f"max {max(values):.1f}x over {len(values)} programs")
    if opts.jit:
        fixed_cost(opts)
    return 1 if problems else 0


FIXED_COST_PROGRAM = "loops/prime-count.bril 300"


def fixed_cost(opts):
    """The JIT's fixed cost: a tiny run of a loop program with every loop compiled
    on its first visit, minus the same run interpreted."""
    path, args = resolve(FIXED_COST_PROGRAM)
    program_json = harness.to_json(path, opts.bril2json)
    plain = best_run(opts.interp, program_json, args, opts.repeat)
    jit = best_run(opts.jit + " --hot 1", program_json, args, opts.repeat)
    if plain.error or jit.error:
        print(f"jit fixed cost: failed: {plain.error or jit.error}")
        return
    print(f"jit fixed cost ({harness.display_name(path)} {' '.join(args)}, every loop "
          f"compiled): {jit.seconds - plain.seconds:.3f} s "
          f"(jit {jit.seconds:.3f} s, interpreter {plain.seconds:.3f} s)")


if __name__ == "__main__":
    sys.exit(main())
