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

`--ssa2` prints another table instead: our benchmarks converted to the ssa2 form
by `bril-opt to-ssa` (set/get/undef), as brilc executables, against the same
programs unconverted (larger inputs: native runs of 0.1-0.5 s).

Examples:
  python benchmarks/bench_native.py
  python benchmarks/bench_native.py --ssa2 --repeat 5
  python benchmarks/bench_native.py --repeat 5 --program "recursion/fib-rec.bril 27"
  python benchmarks/bench_native.py --brilc "brilc -O3"

The machine may be busy: repeat and compare figures from the same run.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

# Interpreter runs of about 1 s or more on this machine (measured 2026-11-22,
# 0.9-1.8 s; leibniz has no arguments and stays shorter).  Recursive programs
# without loops (ackermann, fib-rec) show what the JIT does not touch.
LONG_PROGRAMS = [
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


# Shorter runs, plain brili about 0.05-1 s on this machine: most Bril runs are
# short, and there the JIT must not lose.  (Measured 2026-11-24, a warm plain
# run: 0.07-0.63 s; the inputs grew as brili got faster: the earlier ones ran
# 0.015-0.13 s, mostly start-up.)
SHORT_PROGRAMS = [
    "corpus:mem/mat-mul.bril 80 109658",
    "corpus:float/mandelbrot.bril",
    "corpus:core/sum-check.bril 4000000",
    "loops/prime-count.bril 100000",
    "corpus:core/ackermann.bril 3 7",
    "recursion/fib-rec.bril 26",
    "float/nbody.bril 8000",
    "memory/merge-sort.bril 40000 7",
    "memory/sieve.bril 800000",
    "char/caesar.bril 160000 k e y 2718",
    "corpus:mem/eight-queens.bril 9",
    "corpus:core/fizz-buzz.bril 500000",
]

GROUPS = [("short", SHORT_PROGRAMS), ("long", LONG_PROGRAMS)]

# Our benchmarks converted to the ssa2 form (`bril-opt to-ssa`: set/get/undef) run
# natively, against the same programs unconverted (`--ssa2`).
# Larger inputs than LONG_PROGRAMS': native runs of about 0.1-0.5 s.
SSA2_PROGRAMS = [
    "loops/prime-count.bril 3000000",
    "memory/sieve.bril 30000000",
    "float/nbody.bril 600000",
    "char/caesar.bril 8000000 k e y 2718",
    "memory/merge-sort.bril 1500000 7",
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


def best_run(command, program_json, args, repeat, env=None):
    runs = [harness.run_interp(command, program_json, args, env=env) for _ in range(repeat)]
    for run in runs:
        if run.error:
            return run
    return min(runs, key=lambda r: r.seconds)


def paired_cold_runs(commands, program_json, args, repeat, cache_dir, env):
    """Best of `repeat` first runs (the program's cache entries cleared before each)
    of each command, taken in turn (A B A B ...):
    on a shared machine a burst of load then hits both sides alike, and the
    cold ratio (a difference of a few per cent) is not decided by which side
    happened to run during it."""
    runs = [[] for _ in commands]
    for _ in range(repeat):
        for command, mine in zip(commands, runs):
            clear_program_entries(cache_dir)
            mine.append(harness.run_interp(command, program_json, args, env=env))
    return [next((r for r in mine if r.error), None) or min(mine, key=lambda r: r.seconds)
            for mine in runs]


def clear_program_entries(cache_dir):
    """Empty a code cache of everything but the run-time library builds: what a
    program leaves there (generated code, native units, profiles) is gone, so the
    next run is a cold one."""
    for kind in ("py", "cold", "unit", "unitdata", "profile", "program", "locks"):
        shutil.rmtree(Path(cache_dir) / kind, ignore_errors=True)


def geomean(values):
    geo = 1.0
    for v in values:
        geo *= v
    return geo ** (1 / len(values)) if values else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interp", default="brili", metavar="CMD",
                        help="the interpreter (default: brili)")
    parser.add_argument("--jit", default="brili --jit", metavar="CMD",
                        help="the JIT command (default: brili --jit); '' to skip it")
    parser.add_argument("--brilc", default="brilc", metavar="CMD",
                        help="the compiler command, reading JSON on stdin (default: brilc)")
    parser.add_argument("--group", choices=("short", "long", "both"), default="both",
                        help="the programs: short runs (plain brili 0.05-1 s), long runs "
                             "(plain brili 0.3-2.5 s), or both (default)")
    parser.add_argument("--program", action="append", metavar='"PATH [ARGS]"',
                        help="a program to run instead of a group (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per program and engine; the best counts (default 3)")
    parser.add_argument("--compile-repeat", type=int, default=1, metavar="N",
                        help="compilations per program; the best counts (default 1)")
    parser.add_argument("--cold-repeat", type=int, default=5, metavar="N",
                        help="first runs of brili and brili --jit per program, taken in "
                             "turn; the best of each counts (default 5, at least --repeat)")
    parser.add_argument("--bril2json", default="bril2json", metavar="CMD",
                        help="text-to-JSON command (default: bril2json)")
    parser.add_argument("--ssa2", action="store_true",
                        help="only the ssa2 table: our benchmarks converted by `bril-opt "
                             "to-ssa`, as brilc executables, against the same programs "
                             "unconverted (--program to choose them)")
    parser.add_argument("--to-ssa", default="bril-opt to-ssa", metavar="CMD",
                        help="the ssa2 conversion, JSON to JSON (default: bril-opt to-ssa)")
    opts = parser.parse_args(argv)
    harness.compile_bytecode()      # (whole processes are timed: see harness)
    if opts.ssa2:
        return ssa2_table(opts)

    if opts.program:
        groups = [("programs", [resolve(s) for s in opts.program])]
    else:
        groups = [(name, [resolve(s) for s in specs]) for name, specs in GROUPS
                  if opts.group in (name, "both")]
    all_programs = [p for _, progs in groups for p in progs]
    name_w = max(len(harness.display_name(p)) for p, _ in all_programs) + 2
    args_w = min(max(len(" ".join(a)) for _, a in all_programs), 24) + 2
    header = (f"{'program':<{name_w}}{'args':<{args_w}}{'dyn instr':>11}"
              f"  {'brili s':>8}  {'cold':>8}  {'cold jit':>8}  {'x':>5}  {'warm jit':>8}  {'x':>6}"
              f"  {'compile s':>9}  {'native s':>9}  {'x':>7}")
    print(f"wall seconds, best of {opts.repeat}.  brili s: a later run (its generated code "
          f"cached); cold: a first run of brili; cold jit: a first run of the JIT (the two "
          f"cold columns: best of {max(opts.repeat, opts.cold_repeat)}, taken in turn), x = "
          f"cold / cold jit; warm jit: a later run (cache filled), x = brili s / warm jit")
    print(f"interpreter: {opts.interp}   jit: {opts.jit or '-'}   compiler: {opts.brilc}")
    problems = 0
    cache_dir = tempfile.mkdtemp(prefix="bench-native-cache-")
    cold_env = dict(os.environ, BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="0")
    fill_env = dict(os.environ, BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="wait")
    warm_env = dict(os.environ, BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="0")
    with tempfile.TemporaryDirectory() as tmp:
        for group, programs in groups:
            print(f"\n{group}:")
            print(header)
            print("-" * len(header))
            ratios = {"cold": [], "warm": [], "aot": [], "cold/brili": []}
            for k, (path, args) in enumerate(programs):
                program_json = harness.to_json(path, opts.bril2json)
                exe = Path(tmp) / f"{group}{k}"
                arg_text = " ".join(args)
                if len(arg_text) > args_w - 2:
                    arg_text = arg_text[:args_w - 5] + "..."
                line = f"{harness.display_name(path):<{name_w}}{arg_text:<{args_w}}"
                compile_s, error = compile_native(opts.brilc, program_json, exe,
                                                  opts.compile_repeat)
                if error:
                    print(line + f"{'':>11}  brilc failed: {error}")
                    problems += 1
                    continue
                # Cold against cold: a first run of plain brili also generates its
                # Python code (a later one finds it in the cache).
                cold = warm = None
                interp_cold, *jit_cold = paired_cold_runs(
                    [opts.interp] + ([opts.jit] if opts.jit else []), program_json, args,
                    max(opts.repeat, opts.cold_repeat), cache_dir, cold_env)
                if jit_cold:
                    cold = jit_cold[0]
                interp = best_run(opts.interp, program_json, args, opts.repeat, warm_env)
                native = best_run(str(exe), b"", args, opts.repeat)
                if opts.jit:
                    harness.run_interp(opts.jit, program_json, args, env=fill_env)
                    harness.run_interp(opts.jit, program_json, args, env=fill_env)
                    warm = best_run(opts.jit, program_json, args, opts.repeat, warm_env)
                failed = (interp.error or interp_cold.error or native.error
                          or (cold.error if cold else None) or (warm.error if warm else None))
                if failed:
                    print(line + f"{'':>11}  failed: {failed}")
                    problems += 1
                    continue
                aot = interp.seconds / native.seconds
                ratios["aot"].append(aot)
                jit_text = f"{'-':>8}  {'-':>5}  {'-':>8}  {'-':>6}"
                if cold is not None:
                    ratios["cold"].append(interp_cold.seconds / cold.seconds)
                    ratios["cold/brili"].append(cold.seconds / interp_cold.seconds)
                    ratios["warm"].append(interp.seconds / warm.seconds)
                    jit_text = (f"{cold.seconds:>8.3f}  {interp_cold.seconds / cold.seconds:>4.2f}x"
                                f"  {warm.seconds:>8.3f}  {interp.seconds / warm.seconds:>5.1f}x")
                line += (f"{interp.dyn or 0:>11}  {interp.seconds:>8.3f}  {interp_cold.seconds:>8.3f}"
                         f"  {jit_text}"
                         f"  {compile_s:>9.3f}  {native.seconds:>9.4f}  {aot:>6.1f}x")
                if any(r is not None and (r.dyn != interp.dyn or r.stdout != interp.stdout)
                       for r in (native, cold, warm)):
                    line += " !"
                    problems += 1
                print(line, flush=True)
            print("-" * len(header))
            for what, label in (("cold", "cold jit speed-up"), ("warm", "warm jit speed-up"),
                                ("aot", "brilc executable speed-up")):
                values = ratios[what]
                if values:
                    print(f"{label}: geometric mean {geomean(values):.2f}x, min "
                          f"{min(values):.2f}x, max {max(values):.2f}x over {len(values)} "
                          f"programs")
            if ratios["cold/brili"]:
                print(f"cold jit / cold brili: worst {max(ratios['cold/brili']):.3f}")
    shutil.rmtree(cache_dir, ignore_errors=True)
    if opts.jit:
        fixed_cost(opts)
    return 1 if problems else 0


def ssa2_table(opts):
    """Per program: the brilc executable of the program and of its ssa2 conversion,
    best wall time of --repeat runs each; ssa2 / original."""
    programs = [resolve(s) for s in (opts.program or SSA2_PROGRAMS)]
    header = f"{'program':<24}{'args':<24}{'native s':>9}  {'ssa2 s':>9}  {'ratio':>6}"
    print(f"brilc executables: ssa2 (`{opts.to_ssa}`) vs the original program, wall "
          f"seconds, best of {opts.repeat}; ratio = ssa2 / original")
    print(header)
    print("-" * len(header))
    problems = 0
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (path, args) in enumerate(programs):
            original = harness.to_json(path, opts.bril2json)
            done = subprocess.run(shlex.split(opts.to_ssa), input=original, capture_output=True)
            line = f"{harness.display_name(path):<24}{' '.join(args)[:22]:<24}"
            if done.returncode != 0:
                print(line + f"conversion failed: {done.stderr.decode(errors='replace').strip()}")
                problems += 1
                continue
            runs = []
            for which, program_json in (("original", original), ("ssa2", done.stdout)):
                exe = Path(tmp) / f"{which}{k}"
                _, error = compile_native(opts.brilc, program_json, exe, 1)
                run = None if error else best_run(str(exe), b"", args, opts.repeat)
                error = error or run.error
                if error:
                    print(line + f"{which}: failed: {error}")
                    break
                runs.append(run)
            if len(runs) < 2:
                problems += 1
                continue
            a, b = runs
            ratios.append(b.seconds / a.seconds)
            line += f"{a.seconds:>9.3f}  {b.seconds:>9.3f}  {b.seconds / a.seconds:>5.2f}x"
            if a.stdout != b.stdout:
                line += " !"
                problems += 1
            print(line, flush=True)
    print("-" * len(header))
    if ratios:
        print(f"ssa2 / original: geometric mean {geomean(ratios):.2f}x, max "
              f"{max(ratios):.2f}x over {len(ratios)} programs")
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
