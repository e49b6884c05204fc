"""How the tools scale with the size of a program: `benchmarks/shapes.py`'s
shapes (long block chains, straight lines, loop nests, many variables, call
chains, many functions) at growing sizes, each tool run as a whole process.

For every shape and size (a multiple of the shape's table size) the program
is generated once (JSON and text, not timed), then each tool runs on it,
best wall time of --repeat runs (the tools taking turns: A B, then B A), and
its result is checked exactly against `shapes.expected` (stdout and the `-p`
count):

  bril2json     text -> JSON; the JSON must be the generated program
  bril2txt      JSON -> text; the text must parse back to the program
  brili         brili -p (the default engine: tiers and the JIT)
  interp        brili --no-jit -p (the interpreter alone)
  opt           bril-opt -O (timed alone); its output run by brili must print
                the expected output
  trace         brili --trace OUT.json -p (output and count of the original)
  brilc         brilc -o EXE (compile time), then
  native        EXE -p (the compiled program's run time)
  ref           the --reference command (e.g. path/to/brili-ref), -p

Printed per shape and tool: the time at each size, the time per instruction
(per static instruction of the program for the translators and compilers,
per dynamic instruction for the engines), and the growth factor per
doubling of the size, t(2n)/t(n) (1.0 for constant time, 2.0 for linear,
4.0 for quadratic; with sizes that are not doublings, the factor is
(t(b)/t(a)) ** (1 / log2(b/a))).  The last column is the largest factor.
With both brili and interp, a line `brili/int` gives the default engine's time
over the interpreter's alone at each size.  Whole-process times include Python's start-up (~0.1 s), which flattens the
factors at small sizes; compare large sizes.  A `!` marks a wrong result,
`T` a time-out (--timeout seconds), `E` an error exit.

Examples:
  python benchmarks/bench_scale.py                                  # every shape, 1x 2x 4x 8x, every tool
  python benchmarks/bench_scale.py --shapes jmp-chain,call-chain --sizes 1,10 --tools opt,brilc,native
  python benchmarks/bench_scale.py --tools brili,ref --reference path/to/brili-ref
  python benchmarks/bench_scale.py --json results.json              # also every figure as JSON

The machine may be busy: compare figures from the same run, or best of several.
The JIT's building after a run (for the next run) is off while timing
(BRIL_JIT_PRECOMPILE=0 unless set), and the tools use a fresh code cache
(BRIL_CACHE_DIR): a tool's first run of a program generates its code, later
repeats find it (best of --repeat: a user's repeated runs).
"""

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import shapes  # noqa: E402

TOOLS = ["bril2json", "bril2txt", "brili", "interp", "opt", "trace", "brilc", "native", "ref"]
# Tools that translate or compile: time per static instruction.  The others run
# the program: time per dynamic instruction.
STATIC = {"bril2json", "bril2txt", "opt", "brilc"}


class Failure(Exception):
    def __init__(self, mark, message):
        super().__init__(message)
        self.mark = mark


def static_count(prog):
    return sum(1 for f in prog["functions"] for i in f["instrs"] if "op" in i)


def dyn_count(stderr):
    for line in stderr.splitlines():
        if line.startswith("total_dyn_inst:"):
            return int(line.split(":")[1])
    return None


CLOCK = "wall"          # or "cpu": see --clock


def _cpu_of_children():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, stdin=b"", timeout=None, env=None):
    """(seconds, CompletedProcess) of one whole-process run; Failure on time-out or error exit.
    Seconds of wall time, or with CLOCK "cpu" the CPU time (user + system) of the
    process and the children it waited for."""
    t, c = time.perf_counter(), _cpu_of_children()
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Failure("T", f"{shlex.join(cmd)}: timed out after {timeout} s")
    dt = time.perf_counter() - t if CLOCK == "wall" else _cpu_of_children() - c
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        raise Failure("E", f"{shlex.join(cmd)}: exit {r.returncode}: {err[-1] if err else ''}")
    return dt, r


def check_run(name, r, shape, size, count=True):
    out, dyn = shapes.expected(shape, size)
    got = r.stdout.decode(errors="replace")
    if got != out:
        raise Failure("!", f"{name}: stdout {got[:60]!r}, expected {out!r}")
    if count:
        n = dyn_count(r.stderr.decode(errors="replace"))
        if n != dyn:
            raise Failure("!", f"{name}: total_dyn_inst {n}, expected {dyn}")


class Case:
    """One program (shape at size) on disk: JSON, text, and a scratch folder."""

    def __init__(self, shape, size, folder):
        self.shape, self.size = shape, size
        self.prog = shapes.program(shape, size)
        self.static = static_count(self.prog)
        self.dyn = shapes.expected(shape, size)[1]
        self.folder = Path(folder)
        self.json = json.dumps(self.prog).encode()
        from bril.ir.printer import format_program
        self.text = format_program(self.prog).encode()
        self.json_path = self.folder / "prog.json"
        self.json_path.write_bytes(self.json)


def tool_runner(tool, case, cmds, timeout):
    """A function running the tool once: returns (seconds, check) where check()
    verifies the result (not timed)."""
    shape, size = case.shape, case.size
    folder = case.folder

    def bril2json():
        dt, r = run(cmds["bril2json"], case.text, timeout)
        def check():
            if json.loads(r.stdout) != case.prog:
                raise Failure("!", "bril2json: the JSON is not the generated program")
        return dt, check

    def bril2txt():
        dt, r = run(cmds["bril2txt"], case.json, timeout)
        def check():
            from bril.ir.text import parse_program
            if parse_program(r.stdout.decode()) != case.prog:
                raise Failure("!", "bril2txt: the text does not parse back to the program")
        return dt, check

    def engine(cmd, name):
        def go():
            dt, r = run(cmd + ["-p"], case.json, timeout)
            return dt, lambda: check_run(name, r, shape, size)
        return go

    def opt():
        dt, r = run(cmds["opt"], case.json, timeout)
        def check():
            _, r2 = run(cmds["brili"], r.stdout, timeout)
            check_run("bril-opt -O | brili", r2, shape, size, count=False)
        return dt, check

    def trace():
        out = folder / "traced.json"
        dt, r = run(cmds["trace"] + [str(out), "-p"], case.json, timeout)
        def check():
            check_run("brili --trace", r, shape, size)
            _, r2 = run(cmds["brili"], out.read_bytes(), timeout)
            check_run("the traced program", r2, shape, size, count=False)
        return dt, check

    exe = folder / "prog.exe"

    def brilc():
        dt, r = run(cmds["brilc"] + ["-o", str(exe)], case.json, timeout)
        return dt, lambda: None

    def native():
        if not exe.exists():
            run(cmds["brilc"] + ["-o", str(exe)], case.json, timeout)
        dt, r = run([str(exe), "-p"], b"", timeout)
        return dt, lambda: check_run("brilc's executable", r, shape, size)

    return {"bril2json": bril2json, "bril2txt": bril2txt,
            "brili": engine(cmds["brili"], "brili"),
            "interp": engine(cmds["interp"], "brili --no-jit"),
            "opt": opt, "trace": trace, "brilc": brilc, "native": native,
            "ref": engine(cmds["ref"], "reference") if cmds.get("ref") else None}[tool]


def growth(sizes, times):
    """Growth factor per doubling between consecutive sizes (None where a time is missing)."""
    out = []
    for (a, ta), (b, tb) in zip(zip(sizes, times), zip(sizes[1:], times[1:])):
        if ta is None or tb is None or ta <= 0:
            out.append(None)
        else:
            out.append((tb / ta) ** (1 / math.log2(b / a)))
    return out


def fmt_time(t):
    if t is None:
        return "-"
    return f"{t:.3f}" if t < 100 else f"{t:.0f}"


def main(argv=None):
    # `brili` (its JIT) may leave a compile server building for the next run
    # (bril.backend.jit_server); while timing, it would steal the CPU from the
    # measurements that follow, so it is off unless asked for.
    os.environ.setdefault("BRIL_JIT_PRECOMPILE", "0")
    # A code cache of this run's own: what earlier runs of these programs left
    # (generated code, native units, profiles) must not decide its figures.
    cache_dir = tempfile.mkdtemp(prefix="bench-scale-cache-")
    os.environ["BRIL_CACHE_DIR"] = cache_dir
    try:
        return _main(argv)
    finally:
        import shutil
        shutil.rmtree(cache_dir, ignore_errors=True)


def _main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__[__doc__.index("\n\n") + 2:])
    p.add_argument("--shapes", default=",".join(shapes.SHAPES),
                   help="comma-separated shapes (default: all: %(default)s)")
    p.add_argument("--sizes", default="1,2,4,8",
                   help="comma-separated multiples of each shape's table size (default: %(default)s)")
    p.add_argument("--tools", default=",".join(t for t in TOOLS if t != "ref"),
                   help=f"comma-separated tools among {','.join(TOOLS)} (default: %(default)s; "
                        "ref is added by --reference)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time (default), or the CPU time of each process (user + "
                        "system, its waited-for children included): steadier growth factors "
                        "on a busy machine, where wall time also counts waiting for a core")
    p.add_argument("--repeat", type=int, default=3, help="runs per tool and size; the best counts (default 3)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    p.add_argument("--reference", metavar="CMD", help="a reference interpreter (JSON on stdin, -p)")
    p.add_argument("--bril2json", default="bril2json", metavar="CMD")
    p.add_argument("--bril2txt", default="bril2txt", metavar="CMD")
    p.add_argument("--brili", default="brili", metavar="CMD")
    p.add_argument("--interp", default="brili --no-jit", metavar="CMD")
    p.add_argument("--opt", default="bril-opt -O", metavar="CMD")
    p.add_argument("--trace", default="brili --trace", metavar="CMD",
                   help="tracing command, followed by the output file (default: %(default)s)")
    p.add_argument("--brilc", default="brilc", metavar="CMD")
    p.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    p.add_argument("--no-check", action="store_true", help="do not check results (faster)")
    opts = p.parse_args(argv)

    shape_names = [s for s in opts.shapes.split(",") if s]
    for s in shape_names:
        if s not in shapes.SHAPES:
            p.error(f"unknown shape {s!r} (known: {', '.join(shapes.SHAPES)})")
    mults = [float(m) if "." in m else int(m) for m in opts.sizes.split(",") if m]
    tools = [t for t in opts.tools.split(",") if t]
    if opts.reference and "ref" not in tools:
        tools.append("ref")
    for t in tools:
        if t not in TOOLS:
            p.error(f"unknown tool {t!r} (known: {', '.join(TOOLS)})")
    if "ref" in tools and not opts.reference:
        p.error("tool ref needs --reference CMD")
    cmds = {"bril2json": shlex.split(opts.bril2json), "bril2txt": shlex.split(opts.bril2txt),
            "brili": shlex.split(opts.brili), "interp": shlex.split(opts.interp),
            "opt": shlex.split(opts.opt), "trace": shlex.split(opts.trace),
            "brilc": shlex.split(opts.brilc),
            "ref": shlex.split(opts.reference) if opts.reference else None}

    global CLOCK
    CLOCK = opts.clock
    results = []
    print(f"# sizes: {', '.join(f'{m}x' for m in mults)} the table size; best of {opts.repeat}; "
          f"seconds ({'whole process' if CLOCK == 'wall' else 'CPU time of the whole process'})",
          flush=True)
    for shape in shape_names:
        table = shapes.SHAPES[shape][1]
        sizes = [max(1, int(round(table * m))) for m in mults]
        times = {t: [None] * len(sizes) for t in tools}
        marks = {t: [""] * len(sizes) for t in tools}
        per = {t: [None] * len(sizes) for t in tools}
        for k, size in enumerate(sizes):
            with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
                case = Case(shape, size, folder)
                # The tools take turns, in the given order and then the other way
                # round (A B B A ...): the machine's speed drifts, and tools timed
                # one after the other in blocks compare the drift as much as them.
                best = {}
                for r in range(opts.repeat):
                    for tool in (tools if r % 2 == 0 else tools[::-1]):
                        if marks[tool][k]:
                            continue
                        try:
                            dt, check = tool_runner(tool, case, cmds, opts.timeout)()
                            if tool not in best and not opts.no_check:
                                check()
                            best[tool] = min(best.get(tool, dt), dt)
                        except Failure as e:
                            marks[tool][k] = e.mark
                            best.pop(tool, None)
                            print(f"  {shape} {size} {tool}: {e}", file=sys.stderr, flush=True)
                for tool in tools:
                    times[tool][k] = best.get(tool)
                    if tool in best:
                        per[tool][k] = best[tool] / (case.static if tool in STATIC else case.dyn)
                    results.append({"shape": shape, "size": size, "tool": tool,
                                    "seconds": best.get(tool), "static": case.static,
                                    "dyn": case.dyn, "status": marks[tool][k] or "ok"})
        print(f"\n{shape} (sizes {', '.join(map(str, sizes))})")
        head = f"  {'tool':10}" + "".join(f"{f'{m}x':>10}" for m in mults) + \
            f"{'us/instr':>10}" + "".join(f"{'x' + str(i + 1):>7}" for i in range(len(sizes) - 1)) + \
            f"{'max':>7}"
        print(head)
        for tool in tools:
            g = growth(sizes, times[tool])
            cells = "".join(f"{fmt_time(t) + marks[tool][k]:>10}" for k, t in enumerate(times[tool]))
            last = next((x for x in reversed(per[tool]) if x is not None), None)
            us = f"{last * 1e6:.2f}" if last is not None else "-"
            gs = "".join(f"{x:7.2f}" if x is not None else f"{'-':>7}" for x in g)
            known = [x for x in g if x is not None]
            mx = f"{max(known):7.2f}" if known else f"{'-':>7}"
            print(f"  {tool:10}{cells}{us:>10}{gs}{mx}", flush=True)
        if "brili" in tools and "interp" in tools:
            # (what the default engine costs or saves against the interpreter alone)
            ratios = "".join(f"{a / b:>10.2f}" if a and b else f"{'-':>10}"
                             for a, b in zip(times["brili"], times["interp"]))
            print(f"  {'brili/int':10}{ratios}", flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1) + "\n")
    bad = [r for r in results if r["status"] != "ok"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
