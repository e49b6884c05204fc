"""Start-up and short runs: `brili` on every benchmark at its own `# ARGS:`.

Most Bril runs are short (turnt over a folder of benchmarks, tests, bril-bench),
so what a user waits for is mostly start-up.  For every conformance benchmark
(and ours with --ours) the program is converted to JSON once (not timed); then
our `brili` and, when given, a reference interpreter (`--reference CMD`, e.g.
the TypeScript brili under deno) run it as whole processes with `-p` and its
arguments, alternating, best of --repeat runs each.  Outputs and counts are
checked to agree.  Printed: per program both times and the ratio ours /
reference, then the totals, the geometric mean of the ratios, how many
programs we run faster, and the slowest programs relative to the reference.
A first line times a ten-instruction program.

Our runs use the code cache as a user's would: the first run of each program
fills it (cold) and --repeat more runs use it (warm); `--cold` runs every time
with `--no-cache` instead, `--cold-and-warm` prints both.

`--pipeline` times what a user types instead: `bril2json < p.bril | brili -p ARGS`
as one shell pipeline, the text on standard input, with our bril2json on both
sides unless `--reference-bril2json CMD` gives the reference's converter.

Examples:
  python benchmarks/bench_startup.py --reference /path/to/brili-ref
  python benchmarks/bench_startup.py --brili "/venv/bin/brili" --ours --repeat 3
  python benchmarks/bench_startup.py --pipeline --reference /path/to/brili-ref
"""

import argparse
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

import harness

from bench_interp import STARTUP_PROGRAM as TEN_INSTRUCTIONS  # noqa: E402


def timed(command, stdin, args, env=None):
    if isinstance(command, tuple):      # (bril2json, brili): a pipeline on Bril text
        converter, brili = command
        argv = ["sh", "-c", f"{converter} | {brili} -p {shlex.join(args)}"]
    else:
        argv = shlex.split(command) + ["-p"] + list(args)
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=600)
    return time.perf_counter() - start, done


def best(command, stdin, args, repeat, env=None):
    """(best seconds, stdout, stderr's count) over `repeat` runs."""
    times = []
    done = None
    for _ in range(repeat):
        seconds, done = timed(command, stdin, args, env)
        times.append(seconds)
    return min(times), done.stdout, harness.dyn_count(done.stderr.decode(errors="replace"))


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brili", default="brili", help="our interpreter command (default: brili)")
    ap.add_argument("--reference", help="a reference interpreter command to compare with")
    ap.add_argument("--repeat", type=int, default=2, help="runs per program and command (best)")
    ap.add_argument("--ours", action="store_true", help="also our benchmarks/")
    ap.add_argument("--cold", action="store_true", help="run ours with --no-cache")
    ap.add_argument("--cold-and-warm", action="store_true",
                    help="time ours both without and with the cache")
    ap.add_argument("--bril2json", default="bril2json")
    ap.add_argument("--pipeline", action="store_true",
                    help="time `bril2json < p.bril | brili -p ARGS` pipelines on the text")
    ap.add_argument("--reference-bril2json",
                    help="the reference's converter for its pipelines (default: --bril2json)")
    ap.add_argument("--match", help="only programs whose name contains this")
    ap.add_argument("--worst", type=int, default=10, help="how many slowest programs to list")
    opts = ap.parse_args()
    harness.compile_bytecode()      # (start-up is timed: see harness)
    # A private cache for this run, so that "cold" and "warm" mean what they say.
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as cache_dir:
        return report(opts, cache_dir)


def report(opts, cache_dir):
    env = dict(os.environ, BRIL_CACHE_DIR=cache_dir)
    modes = ["cold", "warm"] if opts.cold_and_warm else ["cold"] if opts.cold else ["warm"]
    commands = {"cold": opts.brili + " --no-cache", "warm": opts.brili}
    reference = opts.reference
    if opts.pipeline:
        # (the program's text on stdin, converted inside the timed pipeline)
        commands = {m: (opts.bril2json, c) for m, c in commands.items()}
        if reference:
            reference = (opts.reference_bril2json or opts.bril2json, reference)

    def program_input(path):
        return path.read_bytes() if opts.pipeline else harness.to_json(path, opts.bril2json)

    tiny = TEN_INSTRUCTIONS.encode() if opts.pipeline else \
        harness.to_json_text(TEN_INSTRUCTIONS, opts.bril2json)
    line = []
    for mode in modes:
        line.append(f"ours ({mode}) {best(commands[mode], tiny, [], max(5, opts.repeat), env)[0] * 1000:.1f} ms")
    if reference:
        line.append(f"reference {best(reference, tiny, [], max(5, opts.repeat))[0] * 1000:.1f} ms")
    print(("ten instructions, pipeline: " if opts.pipeline else "ten instructions: ")
          + ", ".join(line))

    paths = harness.corpus_programs() if hasattr(harness, "corpus_programs") else sorted(
        harness.CORPUS_BENCHMARKS.rglob("*.bril"))
    if opts.ours:
        paths += harness.our_programs()
    if opts.match:
        paths = [p for p in paths if opts.match in str(p)]
    header = f"{'program':40}" + "".join(f" {'ours ' + m:>11}" for m in modes)
    if opts.reference:
        header += f" {'reference':>11}" + "".join(f" {'ratio ' + m:>11}" for m in modes)
    print(header)
    rows = []
    for path in paths:
        name = harness.display_name(path)
        args = harness.args_of(path)
        try:
            program = program_input(path)
        except RuntimeError as e:
            print(f"{name:40} skipped: {e}")
            continue
        if "warm" in modes:
            timed(commands["warm"], program, args, env)        # fills the cache
        ours = {m: best(commands[m], program, args, opts.repeat, env) for m in modes}
        row = {"name": name, "ours": {m: ours[m][0] for m in modes}}
        text = f"{name:40}" + "".join(f" {ours[m][0]:11.3f}" for m in modes)
        if opts.reference:
            ref = best(reference, program, args, opts.repeat)
            row["reference"] = ref[0]
            text += f" {ref[0]:11.3f}" + "".join(f" {ours[m][0] / ref[0]:11.2f}" for m in modes)
            for m in modes:
                if (ours[m][1], ours[m][2]) != (ref[1], ref[2]):
                    text += f"  ! {m} output or count differs"
        print(text, flush=True)
        rows.append(row)
    print()
    for m in modes:
        total = sum(r["ours"][m] for r in rows)
        summary = f"ours ({m}): {len(rows)} programs, total {total:.2f} s"
        if opts.reference:
            ref_total = sum(r["reference"] for r in rows)
            ratios = [r["ours"][m] / r["reference"] for r in rows]
            faster = sum(1 for x in ratios if x < 1)
            summary += (f"; reference total {ref_total:.2f} s; total ratio {total / ref_total:.3f}; "
                        f"geomean ratio {geomean(ratios):.3f}; faster on {faster} of {len(rows)} "
                        f"({100 * faster / len(rows):.0f}%)")
        print(summary)
        if opts.reference:
            worst = sorted(rows, key=lambda r: -r["ours"][m] / r["reference"])[:opts.worst]
            print(f"  slowest relative to the reference ({m}): " + ", ".join(
                f"{r['name']} {r['ours'][m] / r['reference']:.2f}" for r in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
