"""Native speed, as a user meets it: per program, the interpreter alone, a first
run of `brili` (the tiered engine: its JIT compiles in a compile server while the
program runs), a run started right after it, a warm run, the `brilc` executable,
and reference commands given on the command line -- side by side, whole
processes, wall seconds.

  interp   `brili --no-jit` (its generated Python cached: a later run)
  interp1  `brili --no-jit` on an empty code cache: the interpreter's own first
           run, which generates its Python code as `first` does
  first    `brili` on an empty code cache (but for the run-time library, built
           once): nothing of the program compiled or profiled
  rerun    `brili` started as soon as the first run exits (whatever the first
           run's compile server is still building)
  warm     `brili` once every build has finished
  brilc    the executable `brilc` builds (compile time not counted)
  REF      each `--reference NAME=CMD` (e.g. the TypeScript reference brili, brilirs)

Each figure is the best of --repeat runs (first and rerun: best of --repeat
pairs, the program's cache entries cleared before each pair).  The table then
gives each column's speed as a multiple of the baseline (the first --reference,
else interp): baseline seconds / column seconds, per program and as a geometric
mean.  Output and -p counts must agree everywhere; a `!` marks a disagreement.

Two input sizes of one program set (`--set`): "eval", where the reference
interpreter runs about 0.2-2 s, and "long", where it runs about 4-11 s.
Programs are "PATH [ARGS...]": PATH relative to benchmarks/ or, with a `corpus:`
prefix, to the conformance corpus's benchmarks/ folder.

Examples:
  python benchmarks/bench_native.py --set eval --reference ref="deno run -A brili.ts"
  python benchmarks/bench_native.py --set long --repeat 3 \\
      --reference ref="deno run -A brili.ts" --reference brilirs=/path/to/brilirs
  python benchmarks/bench_native.py --program "memory/sieve.bril 2400000"
  python benchmarks/bench_native.py --ssa2 --repeat 5

The machine may be busy: repeat, and compare figures from the same run.
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

# The loop- and call-heavy programs native code is measured on, at two sizes (see
# the docstring); programs without arguments have one size, in the set it fits.
EVAL_PROGRAMS = [
    "corpus:core/primes-between.bril 1 1000",
    "corpus:core/pythagorean_triple.bril 300",
    "corpus:core/sum-check.bril 4000000",
    "corpus:float/harmonic-sum.bril 730000",
    "corpus:float/mandelbrot.bril",
    "corpus:mem/mat-mul.bril 50 109658",
    "corpus:mem/fnv1-hash.bril",
    "corpus:core/fizz-buzz.bril 20000",
    "corpus:core/ackermann.bril 3 6",
    "corpus:mem/eight-queens.bril 8",
    "corpus:core/check-primes.bril 2000",
    "corpus:core/loopfact.bril 600000",
    "memory/sieve.bril 200000",
    "memory/vector-scale.bril 100000 20",
]
LONG_PROGRAMS = [
    "corpus:core/primes-between.bril 1 6000",
    "corpus:core/pythagorean_triple.bril 1200",
    "corpus:core/sum-check.bril 40000000",
    "corpus:float/harmonic-sum.bril 2800000",
    "corpus:float/leibniz.bril",
    "corpus:mem/mat-mul.bril 120 109658",
    "corpus:core/fizz-buzz.bril 250000",
    "corpus:core/check-primes.bril 12000",
    "corpus:core/loopfact.bril 8000000",
    "memory/sieve.bril 3000000",
    "memory/vector-scale.bril 1000000 30",
]
SETS = {"eval": EVAL_PROGRAMS, "long": LONG_PROGRAMS}

# Our benchmarks converted to the ssa2 form (`bril-opt to-ssa`: set/get/undef) run
# natively, against the same programs unconverted (`--ssa2`).
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


def compile_native(brilc, program_json, out, repeat=1):
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


def clear_program_entries(cache_dir):
    """Empty a code cache of everything but the run-time library builds: what a
    program leaves there (generated code, native units, profiles) is gone, so the
    next run is a first one."""
    for kind in ("py", "cold", "marshal", "unit", "unitdata", "exe", "exestamp", "profile", "program", "locks"):
        shutil.rmtree(Path(cache_dir) / kind, ignore_errors=True)


def wait_for_builds(command, cache_dir, env):
    """Until no compile server is building for the cache (a tiny run of the JIT with
    BRIL_JIT_PRECOMPILE=wait waits for every build in flight)."""
    harness.run_interp(command, harness.to_json_text("@main { }"), [],
                       env=dict(env, BRIL_JIT_PRECOMPILE="wait"))
    from bril.cache.buildlocks import wait_for_builds as wait
    from bril.cache.codecache import CodeCache
    wait(CodeCache(cache_dir))


def first_and_rerun(command, program_json, args, repeat, cache_dir, env):
    """Best of `repeat` (first run, immediate rerun) pairs, the cache cleared of
    the program before each pair (and every build of the pair before finished)."""
    firsts, reruns = [], []
    for _ in range(repeat):
        wait_for_builds(command, cache_dir, env)
        clear_program_entries(cache_dir)
        firsts.append(harness.run_interp(command, program_json, args, env=env))
        reruns.append(harness.run_interp(command, program_json, args, env=env))
    return harness.best(firsts), harness.best(reruns)


def first_run(command, program_json, args, repeat, cache_dir, env):
    """Best of `repeat` runs, the cache cleared of the program before each."""
    runs = []
    for _ in range(repeat):
        clear_program_entries(cache_dir)
        runs.append(harness.run_interp(command, program_json, args, env=env))
    return harness.best(runs)


def geomean(values):
    geo = 1.0
    for v in values:
        geo *= v
    return geo ** (1 / len(values)) if values else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brili", default="brili", metavar="CMD",
                        help="our brili (default: brili); interp runs it with --no-jit")
    parser.add_argument("--brilc", default="brilc", metavar="CMD",
                        help="the compiler command, reading JSON on stdin (default: brilc)")
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=CMD",
                        help="a command to compare with, reading JSON on stdin and taking "
                             "-p and the arguments (repeatable); the first is the baseline")
    parser.add_argument("--set", choices=sorted(SETS), default="eval",
                        help="the program set's input size (default eval)")
    parser.add_argument("--program", action="append", metavar='"PATH [ARGS]"',
                        help="a program to run instead of a set (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs (pairs) per program and column; the best counts "
                             "(default 3)")
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
    refs = []
    for spec in opts.reference:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command:
            raise SystemExit(f"error: --reference wants NAME=CMD; got {spec!r}")
        refs.append((name, command))
    programs = [resolve(s) for s in (opts.program or SETS[opts.set])]
    columns = [name for name, _ in refs] + ["interp", "interp1", "first", "rerun", "warm",
                                            "brilc"]
    baseline = refs[0][0] if refs else "interp"
    name_w = max(len(harness.display_name(p)) for p, _ in programs) + 2
    args_w = min(max(len(" ".join(a)) for _, a in programs), 18) + 2
    print(f"wall seconds, best of {opts.repeat} (first, rerun: of {opts.repeat} pairs); "
          f"speed = {baseline} seconds / column seconds")
    for name, command in refs:
        print(f"  {name}: {command}")
    print(f"  ours: {opts.brili}   compiler: {opts.brilc}")
    header = f"{'program':<{name_w}}{'args':<{args_w}}" + "".join(
        f"{c:>9}" for c in columns) + "   speed: " + " ".join(f"{c:>7}" for c in columns
                                                           if c != baseline)
    print(header)
    print("-" * len(header))
    problems = 0
    speeds = {c: [] for c in columns}
    cache_dir = tempfile.mkdtemp(prefix="bench-native-cache-")
    env = dict(os.environ, BRIL_CACHE_DIR=cache_dir)
    env.pop("BRIL_JIT_PRECOMPILE", None)
    env.pop("BRIL_JIT", None)
    # The run-time library, built once (a user's first run of a program finds it).
    harness.run_interp(opts.brili + " --jit --hot 1", harness.to_json_text(
        "@main { i: int = const 0; n: int = const 3; one: int = const 1;\n"
        ".l: c: bool = lt i n; br c .b .e;\n.b: i: int = add i one; jmp .l;\n.e: }"),
        [], env=env)
    with tempfile.TemporaryDirectory() as tmp:
        for k, (path, args) in enumerate(programs):
            program_json = harness.to_json(path, opts.bril2json)
            arg_text = " ".join(args)
            if len(arg_text) > args_w - 2:
                arg_text = arg_text[:args_w - 5] + "..."
            line = f"{harness.display_name(path):<{name_w}}{arg_text:<{args_w}}"
            runs = {}
            for name, command in refs:
                runs[name] = harness.best_run(command, program_json, args, opts.repeat)
            runs["interp"] = harness.best_run(opts.brili + " --no-jit", program_json, args,
                                              opts.repeat, env)
            runs["interp1"] = first_run(opts.brili + " --no-jit", program_json, args,
                                        opts.repeat, cache_dir, env)
            runs["first"], runs["rerun"] = first_and_rerun(
                opts.brili, program_json, args, opts.repeat, cache_dir, env)
            wait_for_builds(opts.brili, cache_dir, env)
            runs["warm"] = harness.best_run(opts.brili, program_json, args, opts.repeat, env)
            exe = Path(tmp) / f"prog{k}"
            _, error = compile_native(opts.brilc, program_json, exe)
            runs["brilc"] = harness.Run(1, "", error, None, 0.0) if error else \
                harness.best_run(str(exe), b"", args, opts.repeat)
            failed = [(c, r.error) for c, r in runs.items() if r.error]
            if failed:
                print(line + "failed: " + "; ".join(f"{c}: {e}" for c, e in failed), flush=True)
                problems += 1
                continue
            base = runs[baseline].seconds
            line += "".join(f"{runs[c].seconds:>9.3f}" for c in columns) + "   speed: "
            line += " ".join(f"{base / runs[c].seconds:>6.1f}x" for c in columns
                             if c != baseline)
            for c in columns:
                speeds[c].append(base / runs[c].seconds)
            want = runs["interp"]
            if any(r.stdout != want.stdout or (r.dyn is not None and want.dyn is not None
                                                and r.dyn != want.dyn)
                   for r in runs.values()):
                line += " !"
                problems += 1
            print(line, flush=True)
    print("-" * len(header))
    print(f"geometric mean speed over {len(speeds[baseline])} programs ("
          f"{baseline} seconds / column seconds): " + ", ".join(
              f"{c} {geomean(speeds[c]):.1f}x" for c in columns if c != baseline))
    if "interp" != baseline and speeds["interp"]:
        firsts = [f / i for i, f in zip(speeds["interp"], speeds["first"])]
        print(f"first run vs interp: geometric mean {geomean(firsts):.2f}x the interpreter's "
              f"speed, slowest {min(firsts):.2f}x")
    if speeds["interp1"]:
        firsts = [f / i for i, f in zip(speeds["interp1"], speeds["first"])]
        print(f"first run vs interp1 (the interpreter's own first run): geometric mean "
              f"{geomean(firsts):.2f}x its speed, slowest {min(firsts):.2f}x")
    shutil.rmtree(cache_dir, ignore_errors=True)
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
                run = None if error else harness.best_run(str(exe), b"", args, opts.repeat)
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


if __name__ == "__main__":
    sys.exit(main())
