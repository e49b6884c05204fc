"""Speculation on programs whose types change during the run: each tier's
specialized code against its generic code, side by side.

    python benchmarks/bench_phases.py [--repeat N] [--program NAME]...

The programs (benchmarks/dynamic) change the kinds their `any` values hold at
a phase of the run: sum-check's loop values are ints, then floats; sieve's
cells bools, then ints; phases' polymorphic function is called with ints,
floats, then ints again.  Each tier guesses from the start of a run (or from a
training run) and meets the other phase later: its guess must fail cheaply.
Per tier, specialized vs generic:

  brili        `brili --no-jit` (the kinds the first tier saw, assumed by the
               generated code) vs the same with BRIL_SPECULATE_TYPES=0 (no
               assumption); generated code cached, on LONG-ARGS
  trace        `brili --no-jit` on the program `brili --trace` wrote on ARGS (its
               traces speculate on the first phase's types) vs on the original,
               on LONG-ARGS
  brilc+prof   the executable of `brilc --profile P` (P written by `brili
               --write-profile` on ARGS) vs that of `brilc`, on NATIVE-ARGS
  brilc+trace  the executable of the traced program vs the original's, on
               NATIVE-ARGS

A ratio printed `1.02=` compares an executable with itself (the profile gave no
variant): the machine's noise.  (A warm `brili` -- the JIT, its code cached --
runs the program's own executable, compiled without a profile: it speculates on
nothing, so it has no column.)

Each figure is the median of --repeat whole-process runs, the two sides taken
in turn, A B B A ... (a burst of load on a shared machine hits both alike); the
ratio is specialized / generic (above 1: speculation costs more than it gains).  Both
sides must print the same and, where both are interpreted, count the same
instructions (a traced program counts its own); `!` marks a disagreement.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
from bench_dynamic import long_args_of, native_args_of, geomean

PROGRAMS = ["sum-check", "sieve", "phases"]
TIERS = ["brili", "trace", "brilc+prof", "brilc+trace"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=8,
                    help="runs of each side, in turn; the median counts (default 8)")
    ap.add_argument("--program", action="append", metavar="NAME",
                    help=f"only this program (repeatable; default: {', '.join(PROGRAMS)})")
    ap.add_argument("--brili", default="brili", help="the brili command")
    ap.add_argument("--brilc", default="brilc", help="the brilc command")
    ap.add_argument("--bril2json", default="bril2json", help="the bril2json command")
    opts = ap.parse_args(argv)
    harness.compile_bytecode()      # (whole processes are timed: see harness)
    brili, brilc = shlex.split(opts.brili), shlex.split(opts.brilc)
    names = opts.program or PROGRAMS
    unknown = [n for n in names if not (harness.HERE / "dynamic" / f"{n}.bril").exists()]
    if unknown:
        raise SystemExit(f"error: no such program in benchmarks/dynamic: {', '.join(unknown)}")

    print(f"specialized / generic, medians of {opts.repeat} whole-process runs in turn "
          f"(brili, trace on LONG-ARGS; brilc on NATIVE-ARGS)")
    print(f"{'program':12}" + "".join(f"  {t + ' spec/gen s':>24} {'ratio':>6}" for t in TIERS))
    ratios = {t: [] for t in TIERS}
    problems = 0
    cache = tempfile.mkdtemp(prefix="bench-phases-cache-")
    base_env = dict(os.environ, BRIL_CACHE_DIR=cache)
    generic_env = dict(base_env, BRIL_SPECULATE_TYPES="0")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in names:
            path = harness.HERE / "dynamic" / f"{name}.bril"
            orig = harness.to_json(path, opts.bril2json)
            train = harness.args_of(path)
            long_ = long_args_of(path) or train
            native = native_args_of(path) or long_
            traced_path, profile = tmp / f"{name}.trace.json", tmp / f"{name}.profile"
            subprocess.run(brili + ["--no-jit", "--trace", str(traced_path)] + train,
                           input=orig, capture_output=True)
            subprocess.run(brili + ["--write-profile", str(profile)] + train, input=orig,
                           capture_output=True)
            traced = traced_path.read_bytes() if traced_path.exists() else None
            exes = {}
            for label, data, extra in (("orig", orig, []), ("traced", traced, []),
                                       ("prof", orig, ["--profile", str(profile)])):
                exe = tmp / f"{name}-{label}"
                if data is not None and subprocess.run(
                        brilc + extra + ["-o", str(exe)], input=data,
                        capture_output=True).returncode == 0:
                    exes[label] = str(exe)
            nojit = brili + ["--no-jit", "-p"] + long_
            sides = {
                "brili": [(nojit, orig, base_env), (nojit, orig, generic_env)],
                "trace": [(nojit, traced, base_env), (nojit, orig, base_env)],
                "brilc+prof": [([exes.get("prof"), "-p"] + native, b"", None),
                               ([exes.get("orig"), "-p"] + native, b"", None)],
                "brilc+trace": [([exes.get("traced"), "-p"] + native, b"", None),
                                ([exes.get("orig"), "-p"] + native, b"", None)],
            }
            for argv_, stdin, env in sides["brili"] + sides["trace"][:1]:
                if stdin is not None:       # (generated code into the cache: untimed)
                    subprocess.run(argv_, input=stdin, capture_output=True, env=env)
            line, marks = f"{name:12}", []
            for tier in TIERS:
                pair = sides[tier]
                if any(a[0] is None or s is None for a, s, _ in pair):
                    line += f"  {'(not built)':>31}"
                    marks.append(f"{tier}: the program was not built")
                    continue
                (spec, one), (gen, two) = harness.medians_in_turn(pair, opts.repeat)
                if one.returncode or two.returncode or one.stdout != two.stdout:
                    marks.append(f"{tier}: the outputs differ or a run failed")
                elif tier == "brili" and harness.dyn_count(one.stderr.decode()) != \
                        harness.dyn_count(two.stderr.decode()):
                    marks.append(f"{tier}: the -p counts differ")
                ratio = spec / gen
                ratios[tier].append(ratio)
                # (the same file on both sides -- a profile that gave no variant --
                # measures the machine's noise)
                same = tier.startswith("brilc") and \
                    Path(pair[0][0][0]).read_bytes() == Path(pair[1][0][0]).read_bytes()
                line += f"  {spec:>15.3f}/{gen:<8.3f} {ratio:>5.2f}{'=' if same else 'x'}"
            if marks:
                line += " ! " + "; ".join(marks)
                problems += 1
            print(line, flush=True)
    shutil.rmtree(cache, ignore_errors=True)
    for tier in TIERS:
        values = ratios[tier]
        if values:
            print(f"{tier}: specialized / generic max {max(values):.2f}x, geomean "
                  f"{geomean(values):.2f}x over {len(values)} programs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
