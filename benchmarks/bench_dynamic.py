"""What dynamic typing costs: each program of benchmarks/dynamic/ (every value
`any`, arrays `ptr<any>`) against its typed twin in benchmarks/dynamic/typed/
(the same algorithm with static types, the same output), under each tier.

For each program both forms are converted to JSON once (not timed), then timed
as whole processes (JSON on stdin, `-p` and the arguments on the command line;
best wall time of --repeat runs, the typed and the dynamic form taken in turn,
A B B A ..., so that a burst of load on a shared machine hits both alike):

- brili: `brili -p` with its generated code in the cache (a first run of each
  form, untimed, fills a fresh code cache);
- jit: `brili --jit -p` warm: a fresh code cache (BRIL_CACHE_DIR) filled by two
  untimed runs of each form with BRIL_JIT_PRECOMPILE=wait (the native code the
  first run found worth building is built before it exits), then timed runs
  that find it there;
- jit-native (with --jit-native): warm runs on NATIVE-ARGS, which the
  program's executable (compiled whole by the jit tier's runs, for the kinds
  they saw) runs;
- brilc: the executable `brilc` builds, on the NATIVE-ARGS inputs (natively,
  even LONG-ARGS runs take milliseconds, mostly process start-up; NATIVE-ARGS
  take a few tenths of a second; LONG-ARGS where a program has none);
- brilc+prof: the dynamic form's executable built by `brilc --profile P`, P
  written by `brili --write-profile P` on the ARGS input (a smaller one), against
  the same typed executable;
- ref (only with --reference CMD): another interpreter command that reads
  JSON on stdin and takes -p, e.g. the reference brili.ts under deno.

Printed per program and tier: the typed and the dynamic form's seconds and the
ratio dynamic / typed (>1: the dynamic form is slower), then the geometric mean
of the ratios per tier.  The dyn/typed instruction ratio (from brili -p) is
printed too: the dynamic forms sometimes execute a few more instructions (type
dispatch) or fewer (no separate int and float copies).  Every run must exit 0,
the two forms must print the same stdout, and every tier the same stdout and
`-p` count as brili; a `!` marks a disagreement (exit status 1).

With --long, brili, jit and ref run on the LONG-ARGS inputs too (the
reference then takes seconds per run).  Even there warm jit runs for
milliseconds, much of it process start-up, so its ratios are coarse; a program
that stays slow natively stands out all the same.  On NATIVE-ARGS (too long for
the interpreters) the executables' output is checked against each other: the
typed and the dynamic form print the same, and the profiled executable prints
and counts what the plain one does.

Examples:
  python benchmarks/bench_dynamic.py
  python benchmarks/bench_dynamic.py --repeat 5 --program sum-check --program loopfact
  python benchmarks/bench_dynamic.py --reference 'deno run brili.ts'
  python benchmarks/bench_dynamic.py --long --jit '' --brilc ''

The machine may be busy: compare figures from the same run.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

DYNAMIC = harness.HERE / "dynamic"
TYPED = DYNAMIC / "typed"
_LONG_RE = re.compile(r"^\s*#\s*LONG-ARGS:(.*)$", re.M)
_NATIVE_RE = re.compile(r"^\s*#\s*NATIVE-ARGS:(.*)$", re.M)


def long_args_of(path):
    """The `# LONG-ARGS:` arguments (an input for speed measurement), or None."""
    m = _LONG_RE.search(Path(path).read_text())
    return m.group(1).split() if m else None


def native_args_of(path):
    """The `# NATIVE-ARGS:` arguments (an input long enough to time native code),
    or None."""
    m = _NATIVE_RE.search(Path(path).read_text())
    return m.group(1).split() if m else None


def pairs(names=None):
    """(name, dynamic path, typed path) of every program with a typed twin."""
    found = [(p.stem, p, TYPED / p.name) for p in sorted(DYNAMIC.glob("*.bril"))
             if (TYPED / p.name).exists()]
    if names:
        missing = set(names) - {n for n, _, _ in found}
        if missing:
            raise SystemExit(f"error: no such program (with a typed twin): "
                             f"{', '.join(sorted(missing))}")
        found = [f for f in found if f[0] in names]
    return found


def paired_best(commands, inputs, args, repeat, env=None):
    """Best of `repeat` runs of each (command, stdin) in turn, in the other order
    every other round (A B B A ...: the first of two identical runs here can be
    up to 15% slower or faster); a failed run stands for its side."""
    runs = [[] for _ in commands]
    for r in range(repeat):
        sides = list(zip(commands, inputs, runs))
        for command, program_json, mine in (sides if r % 2 == 0 else sides[::-1]):
            mine.append(harness.run_interp(command, program_json, args, env=env))
    return [next((r for r in mine if r.error), None) or min(mine, key=lambda r: r.seconds)
            for mine in runs]


def build(brilc, program_json, out):
    done = subprocess.run(shlex.split(brilc) + ["-o", str(out)], input=program_json,
                          capture_output=True)
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip() or "brilc failed"
    return None


def geomean(values):
    product = 1.0
    for v in values:
        product *= v
    return product ** (1 / len(values)) if values else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interp", default="brili", metavar="CMD",
                        help="the interpreter (default: brili); always run: every other "
                             "tier's output and -p count are checked against it")
    parser.add_argument("--jit", default="brili --jit", metavar="CMD",
                        help="the JIT command (default: brili --jit); '' to skip it")
    parser.add_argument("--brilc", default="brilc", metavar="CMD",
                        help="the compiler, JSON on stdin, -o OUT (default: brilc); "
                             "'' to skip it")
    parser.add_argument("--reference", default="", metavar="CMD",
                        help="another interpreter command to time side by side (reads "
                             "JSON on stdin, takes -p), e.g. the reference brili.ts")
    parser.add_argument("--program", action="append", metavar="NAME",
                        help="only this program of benchmarks/dynamic (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="timed runs per form and tier; the best counts (default 3)")
    parser.add_argument("--jit-native", action="store_true",
                        help="also time warm JIT runs on NATIVE-ARGS (the program's "
                             "executable, built after a run on ARGS, runs them)")
    parser.add_argument("--long", action="store_true",
                        help="run every tier on the LONG-ARGS inputs (brilc always does)")
    parser.add_argument("--bril2json", default="bril2json", metavar="CMD",
                        help="text-to-JSON command (default: bril2json)")
    opts = parser.parse_args(argv)
    if not opts.interp.strip():
        parser.error("--interp cannot be empty: every tier is checked against it")
    harness.compile_bytecode()      # (whole processes are timed: see harness)

    tiers = [("brili", opts.interp)]
    if opts.jit:
        tiers.append(("jit", opts.jit))
        if opts.jit_native:
            tiers.append(("jit-native", opts.jit))
    if opts.brilc:
        tiers.append(("brilc", opts.brilc))
        tiers.append(("brilc+prof", opts.brilc))
    if opts.reference:
        tiers.append(("ref", opts.reference))
    programs = pairs(opts.program)
    if not programs:
        raise SystemExit(f"error: no programs in {DYNAMIC}")

    name_w = max(len(n) for n, _, _ in programs) + 2
    cell_w = 22
    inputs = "LONG-ARGS" if opts.long else "ARGS"
    print(f"dynamic (benchmarks/dynamic) vs typed twin (benchmarks/dynamic/typed): wall "
          f"seconds of whole processes, best of {opts.repeat}, the two forms in turn; "
          f"ratio = dynamic / typed")
    for label, command in tiers:
        on = "NATIVE-ARGS" if label.startswith("brilc") or label == "jit-native" else inputs
        extra = (" warm (cache filled by two runs, BRIL_JIT_PRECOMPILE=wait)"
                 if label.startswith("jit") else " (generated code cached)" if label == "brili" else
                 f" --profile (written by {opts.interp} --write-profile on ARGS)"
                 if label == "brilc+prof" else "")
        print(f"  {label}: {command}{extra}, on {on}")
    header = f"{'program':<{name_w}}{'instr d/t':>10}" + "".join(
        f"  {label + ' typed/dyn s':>{cell_w - 8}} {'ratio':>6}" for label, _ in tiers)
    print(header)
    print("-" * len(header))

    ratios = {label: [] for label, _ in tiers}
    instr_ratios = []
    problems = 0
    cache_dir = tempfile.mkdtemp(prefix="bench-dynamic-cache-")
    warm_env = dict(os.environ, BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="0")
    fill_env = dict(os.environ, BRIL_CACHE_DIR=cache_dir, BRIL_JIT_PRECOMPILE="wait")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, dyn_path, typed_path in programs:
                forms = [typed_path, dyn_path]
                jsons = [harness.to_json(p, opts.bril2json) for p in forms]
                short = harness.args_of(dyn_path)
                long_ = long_args_of(dyn_path) or short
                native_ = native_args_of(dyn_path) or long_
                if harness.args_of(typed_path) != short or (long_args_of(typed_path) or short) \
                        != long_ or (native_args_of(typed_path) or long_) != native_:
                    print(f"{name:<{name_w}}  the typed twin's ARGS, LONG-ARGS or "
                          f"NATIVE-ARGS differ")
                    problems += 1
                    continue
                line = f"{name:<{name_w}}"
                marks = []
                # brili on the inputs of this run: the baseline every tier must match.
                args = long_ if opts.long else short
                for program_json in jsons:      # (fill the generated-code cache)
                    harness.run_interp(opts.interp, program_json, args, env=warm_env)
                base = paired_best([opts.interp] * 2, jsons, args, opts.repeat, warm_env)
                long_base = base
                if opts.brilc and native_ == long_ and not opts.long:
                    long_base = [harness.run_interp(opts.interp, j, long_, env=warm_env)
                                 for j in jsons]
                errors = [r.error for r in base + long_base if r.error]
                if errors:
                    print(line + f"  brili failed: {errors[0]}")
                    problems += 1
                    continue
                if base[0].stdout != base[1].stdout or long_base[0].stdout != long_base[1].stdout:
                    marks.append("typed and dynamic print different output")
                instr = base[1].dyn / base[0].dyn
                instr_ratios.append(instr)
                line += f"{instr:>10.2f}"
                for label, command in tiers:
                    against = base
                    if label == "brili":
                        runs = base
                    elif label == "jit":
                        for program_json in jsons:
                            for _ in range(2):
                                harness.run_interp(command, program_json, args, env=fill_env)
                        runs = paired_best([command] * 2, jsons, args, opts.repeat, warm_env)
                    elif label == "jit-native":
                        # (the cache the jit tier filled: warm runs of the program's
                        # executable; checked against the typed form's)
                        runs = paired_best([command] * 2, jsons, native_, opts.repeat,
                                           warm_env)
                        against = runs
                        if runs[0].stdout != runs[1].stdout:
                            marks.append("jit-native: the typed and dynamic forms differ")
                    elif label.startswith("brilc"):
                        exes = [Path(tmp) / f"{name}-typed", Path(tmp) / f"{name}-{label}"]
                        commands = [command, command]
                        if label == "brilc+prof":
                            prof = Path(tmp) / f"{name}.profile"
                            harness.run_interp(f"{opts.interp} --write-profile "
                                               f"{shlex.quote(str(prof))}", jsons[1], short)
                            commands[1] += f" --profile {shlex.quote(str(prof))}"
                        error = next((e for e in (build(c, j, x) for c, j, x in
                                                  zip(commands, jsons, exes)) if e), None)
                        if error:
                            line += f"  {'brilc failed':>{cell_w}}"
                            marks.append(f"{label}: {error.splitlines()[0]}")
                            continue
                        runs = paired_best([str(x) for x in exes], [b"", b""], native_,
                                           opts.repeat)
                        if native_ == long_:
                            against = long_base
                        elif label == "brilc":
                            # (no interpreter run on NATIVE-ARGS: the forms agree, and
                            # the profiled executable agrees with this one)
                            plain = against = runs
                            if runs[0].stdout != runs[1].stdout:
                                marks.append("the typed and dynamic executables differ")
                        else:
                            against = plain
                    else:
                        runs = paired_best([command] * 2, jsons, args, opts.repeat)
                    failed = next((r.error for r in runs if r.error), None)
                    if failed:
                        line += f"  {'failed':>{cell_w}}"
                        marks.append(f"{label}: {failed}")
                        continue
                    for run, expected in zip(runs, against):
                        if run.stdout != expected.stdout or run.dyn != expected.dyn:
                            marks.append(f"{label} differs from brili")
                    ratio = runs[1].seconds / runs[0].seconds
                    ratios[label].append(ratio)
                    line += (f"  {runs[0].seconds:>{cell_w - 16}.3f}/{runs[1].seconds:<7.3f}"
                             f" {ratio:>5.2f}x")
                if marks:
                    line += " ! " + "; ".join(dict.fromkeys(marks))
                    problems += 1
                print(line, flush=True)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    print("-" * len(header))
    line = f"{'geomean':<{name_w}}{geomean(instr_ratios):>10.2f}"
    for label, _ in tiers:
        values = ratios[label]
        line += f"  {'':>{cell_w - 8}} {geomean(values):>5.2f}x" if values else f"  {'-':>{cell_w}}"
    print(line)
    for label, _ in tiers:
        values = ratios[label]
        if values:
            print(f"{label}: dynamic / typed geometric mean {geomean(values):.2f}x, min "
                  f"{min(values):.2f}x, max {max(values):.2f}x over {len(values)} programs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
