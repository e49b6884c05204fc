"""How long the per-function analysis (`bril.analysis.typecheck.infer`) takes.

Two measurements, each the best of --repeat runs, in this process, as CPU time
of the process (other load on the machine counts less; blocks are built once,
outside the timer):

  shapes   every shape of `shapes.py` at multiples of its table size (and the
           nested-loops shape at --nest loops), with the growth factor per
           doubling, t(2n)/t(n) (1.0 constant time, 2.0 linear, 4.0 quadratic),
           and the time per static instruction;
  corpus   the total time over every function of the conformance corpus's
           benchmarks and of ours, and the time per instruction.

`--baseline REV` also times the analysis as it is at git revision REV (loaded
beside the current one; bril/analysis/typecheck.py, or bril/typecheck.py in
revisions before the stage folders), for before/after figures from the same run.

Examples:
  python benchmarks/bench_infer.py
  python benchmarks/bench_infer.py --baseline HEAD~3 --sizes 1,2,4 --shapes nested-loops
  python benchmarks/bench_infer.py --no-shapes --repeat 5
"""

import argparse
import importlib.util
import math
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import shapes  # noqa: E402

from bril.analysis import typecheck  # noqa: E402
from bril.analysis.blocks import build_blocks  # noqa: E402

CORPUS = ROOT.parent / "shared" / "conformance" / "benchmarks"


def load_revision(rev):
    """The analysis at git revision `rev`, as module bril.analysis._typecheck_<rev>."""
    for path in ("bril/analysis/typecheck.py", "bril/typecheck.py"):
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                               capture_output=True, text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"error: no typecheck.py at revision {rev}")
    text = shown.stdout
    if path == "bril/typecheck.py":
        # (its relative imports name modules of the flat layout: import them from
        # where they live now)
        text = re.sub(r"^(\s*from )\.(\w+)( import )", _now_at, text, flags=re.M)
    name = "bril.analysis._typecheck_" + "".join(c if c.isalnum() else "_" for c in rev)
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "bril.analysis"
    sys.modules[name] = mod
    exec(compile(text, f"{rev}:{path}", "exec"), mod.__dict__)
    return mod


def _now_at(m):
    """A flat-layout `from .X import` as the absolute import of X's module now."""
    import bril
    for sub in sorted(Path(bril.__file__).parent.iterdir()):
        if (sub / f"{m.group(2)}.py").exists() and (sub / "__init__.py").exists():
            return f"{m.group(1)}bril.{sub.name}.{m.group(2)}{m.group(3)}"
    raise SystemExit(f"error: module {m.group(2)} of an old typecheck.py not found")


def functions_of(prog):
    return [(f, build_blocks(f)) for f in prog["functions"]]


def best_time(mod, funcs, repeat):
    """Best CPU time of this process (the machine may be shared) over `repeat` runs."""
    best = math.inf
    for _ in range(repeat):
        t = time.process_time()
        for f, blocks in funcs:
            mod.infer(f, blocks)
        best = min(best, time.process_time() - t)
    return best


def static_count(funcs):
    return sum(len(b.instrs) for _, blocks in funcs for b in blocks)


def corpus_programs():
    from bril.ir.text import parse_program
    files = sorted(CORPUS.rglob("*.bril")) + sorted(HERE.rglob("*.bril"))
    out = []
    for path in files:
        try:
            out.append((path, parse_program(path.read_text())))
        except Exception as err:     # (a file the parser rejects: not ours to time)
            print(f"skipped {path}: {err}", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=",".join(shapes.SHAPES))
    ap.add_argument("--sizes", default="1,2,4,8", help="multiples of the table size")
    ap.add_argument("--nest", default="1000", help="extra nested-loops sizes (comma list, '' none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="git revision to time as well (before/after)")
    ap.add_argument("--no-shapes", action="store_true")
    ap.add_argument("--no-corpus", action="store_true")
    args = ap.parse_args()
    mods = [("now", typecheck)]
    if args.baseline:
        mods.insert(0, (args.baseline, load_revision(args.baseline)))
    sys.setrecursionlimit(100000)

    if not args.no_shapes:
        mults = [float(s) for s in args.sizes.split(",")]
        for shape in args.shapes.split(","):
            gen, table, _ = shapes.SHAPES[shape]
            sizes = [max(1, int(table * m)) for m in mults]
            if shape == "nested-loops" and args.nest:
                sizes += [int(s) for s in args.nest.split(",")]
            for label, mod in mods:
                row, prev = [], None
                worst = 0.0
                for size in sizes:
                    funcs = functions_of(gen(size))
                    t = best_time(mod, funcs, args.repeat)
                    per = t / max(1, static_count(funcs)) * 1e6
                    cell = f"{size}: {t:.3f}s ({per:.1f}us/i)"
                    if prev is not None and prev[1] > 0 and size > prev[0]:
                        factor = (t / prev[1]) ** (1 / math.log2(size / prev[0]))
                        worst = max(worst, factor)
                        cell += f" x{factor:.2f}"
                    row.append(cell)
                    prev = (size, t)
                print(f"{shape:15} {label:8} " + "  ".join(row) + f"  | max x{worst:.2f}",
                      flush=True)

    if not args.no_corpus:
        progs = corpus_programs()
        funcs = [fb for _, prog in progs for fb in functions_of(prog)]
        n = static_count(funcs)
        for label, mod in mods:
            t = best_time(mod, funcs, args.repeat)
            print(f"corpus {label:8} {len(funcs)} functions, {n} instructions: "
                  f"{t * 1e3:.1f} ms ({t / n * 1e6:.2f} us/instruction)", flush=True)


if __name__ == "__main__":
    main()
