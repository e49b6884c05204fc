"""Differential check of Bril interpreters on our benchmark programs.

Runs every program (or the ones given) under one or more interpreter commands
with `-p` and its `# ARGS:`, and compares each run's stdout and
`total_dyn_inst` with the program's `.out` / `.prof` snapshots and with the
other interpreters.  With --alt it also runs the `# ALT-ARGS:` input, where
there are no snapshots, and compares the interpreters with each other.
With --save it (re)writes the snapshots from the first interpreter's runs,
refusing programs on which the interpreters disagree.

Examples:
  python benchmarks/crosscheck.py                       # our brili vs the snapshots
  python benchmarks/crosscheck.py --interp brili --interp /tmp/ref/brili-ref --alt
  python benchmarks/crosscheck.py --interp /tmp/ref/brili-ref --save benchmarks/loops

Exit code 0 if everything agreed, 1 otherwise.
"""

import argparse
import sys
from pathlib import Path

import harness


def snapshot(path):
    """The expected (stdout, count) of a program, or None where a file is missing."""
    out, prof = path.with_suffix(".out"), path.with_suffix(".prof")
    count = harness.dyn_count(prof.read_text()) if prof.exists() else None
    return (out.read_text() if out.exists() else None), count


def describe(run):
    return run.error if run.error else f"{run.dyn}"


def check_program(path, args, interps, bril2json, compare_snapshot):
    """Run all interpreters on one input; return (runs, list of problems)."""
    program_json = harness.to_json(path, bril2json)
    runs = [harness.run_interp(cmd, program_json, args) for cmd in interps]
    problems = []
    for cmd, run in zip(interps, runs):
        if run.error:
            problems.append(f"{cmd}: {run.error}")
    first = runs[0]
    for cmd, run in zip(interps[1:], runs[1:]):
        if run.error or first.error:
            continue
        if run.stdout != first.stdout:
            problems.append(f"stdout differs: {interps[0]} vs {cmd}")
        if run.dyn != first.dyn:
            problems.append(f"count differs: {interps[0]} {first.dyn} vs {cmd} {run.dyn}")
    if compare_snapshot:
        want_out, want_dyn = snapshot(path)
        for cmd, run in zip(interps, runs):
            if run.error:
                continue
            if want_out is None or want_dyn is None:
                problems.append("missing .out or .prof snapshot")
                break
            if run.stdout != want_out:
                problems.append(f"{cmd}: stdout differs from {path.with_suffix('.out').name}")
            if run.dyn != want_dyn:
                problems.append(f"{cmd}: count {run.dyn} != snapshot {want_dyn}")
    return runs, problems


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path,
                        help="programs or folders (default: all of benchmarks/)")
    parser.add_argument("--interp", action="append", metavar="CMD",
                        help="interpreter command reading JSON on stdin, args appended "
                             "(repeatable; default: brili)")
    parser.add_argument("--bril2json", default="bril2json", metavar="CMD",
                        help="text-to-JSON command (default: bril2json)")
    parser.add_argument("--alt", action="store_true",
                        help="also run the ALT-ARGS inputs (compared between interpreters)")
    parser.add_argument("--save", action="store_true",
                        help="write .out/.prof from the first interpreter where all agree")
    opts = parser.parse_args(argv)
    interps = opts.interp or ["brili"]

    programs = []
    for p in opts.paths or [harness.HERE]:
        programs += harness.our_programs(p) if p.is_dir() else [p]

    failures = 0
    width = max((len(harness.display_name(p)) for p in programs), default=10) + 4
    print(f"{'program':<{width}} {'input':<5} " + "  ".join(f"{c[-24:]:>24}" for c in interps))
    for path in programs:
        inputs = [("ARGS", harness.args_of(path))]
        alt = harness.alt_args_of(path)
        if opts.alt and alt is not None:
            inputs.append(("ALT", alt))
        for label, args in inputs:
            runs, problems = check_program(path, args, interps, opts.bril2json,
                                           compare_snapshot=(label == "ARGS" and not opts.save))
            cells = "  ".join(f"{describe(r):>24}" for r in runs)
            print(f"{harness.display_name(path):<{width}} {label:<5} {cells}")
            for problem in problems:
                print(f"    !! {problem}")
            failures += bool(problems)
            if opts.save and label == "ARGS":
                if problems:
                    print("    not saved")
                else:
                    path.with_suffix(".out").write_text(runs[0].stdout)
                    path.with_suffix(".prof").write_text(f"total_dyn_inst: {runs[0].dyn}\n")
    print(f"{failures} input(s) with problems" if failures else "all agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
