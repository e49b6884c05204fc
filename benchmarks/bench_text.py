"""Speed of the text format, side by side with baselines.

    python benchmarks/bench_text.py [--reference-bin DIR] [--repeat N]

1. `parse_program` on a generated ~300-line program, against a grammar-per-call
   baseline: the same grammar, lexer and callbacks, but a new lark parser
   constructed from the grammar on every call, as tools that build their
   parser inside the parse function do.  Target: ours at most 40% of it.
2. A generated 100,000-instruction program in both directions, in process and
   as whole commands (`bril2json < x.bril`, `bril2txt < x.json`, process start
   included).  Target: each command under 5 s.
3. Whole-command times on the small program (mostly start-up).

With --reference-bin DIR, the commands DIR/bril2json-ref and DIR/bril2txt-ref
are timed on the same inputs for comparison (once only on the big program:
the reference bril2json takes minutes there).

Each cell is `wall median [wall min] cpu median`: the wall-clock time, and the
CPU time of the work itself (this process, or the command's process), which
other load on a shared machine disturbs less.
"""

import argparse
import json
from pathlib import Path
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bril.ir.parse import build_parser
from bril.ir.program import load_program
from bril.ir.printer import format_program
from bril.ir.text import parse_program


def generate(n_instrs, seed=1):
    """Bril text with about n_instrs instructions: functions with loops, branches,
    calls, memory, comments and every literal kind."""
    rng = random.Random(seed)
    lines = []
    count = 0
    f = 0
    while count < n_instrs:
        lines.append(f"@f{f}(n: int, p: ptr<int>, x: float): int {{")
        body = min(400, n_instrs - count)
        lines += ["  one: int = const 1;", "  i: int = const 0;", "  acc: int = const -42;",
                  "  c: char = const '\\n';", "  y: float = const 1.5e3;",
                  "  t: bool = const true;", ".loop:"]
        count += 6
        for k in range(max(body - 12, 0)):
            kind = rng.randrange(8)
            if kind == 0:
                lines.append(f"  v{k}: int = const {rng.randrange(-2**63, 2**63)};")
            elif kind == 1:
                lines.append(f"  acc: int = add acc i;  # running sum {k}")
            elif kind == 2:
                lines.append(f"  b{k}: bool = lt acc n;")
            elif kind == 3:
                lines.append("  y: float = fmul y x;")
            elif kind == 4:
                lines.append("  q: ptr<int> = ptradd p i;")
            elif kind == 5:
                lines.append("  store p acc;")
            elif kind == 6:
                lines.append(f"  br t .next{k} .next{k};")
                lines.append(f".next{k}:")
            else:
                lines.append(f"  r{k}: int = call @f{f} n p x;")
            count += 1
        lines += ["  i: int = add i one;", "  done: bool = ge i n;", "  br done .exit .loop;",
                  ".exit:", "  print acc y c;", "  ret acc;", "}"]
        count += 5
        f += 1
    return "\n".join(lines) + "\n"


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(fn, repeat, cpu_clock=time.process_time):
    """(wall median, wall min, cpu median) of `repeat` calls of fn."""
    walls, cpus = [], []
    for _ in range(repeat):
        cpu0, wall0 = cpu_clock(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - wall0)
        cpus.append(cpu_clock() - cpu0)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def run_cmd(cmd, stdin_path, stdout_path):
    with open(stdin_path, "rb") as src, open(stdout_path, "wb") as dst:
        proc = subprocess.run(cmd, stdin=src, stdout=dst, stderr=subprocess.PIPE)
    if proc.returncode:
        sys.exit(f"{cmd[0]} failed: {proc.stderr.decode()}")


def fmt(t):
    def one(s):
        return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"
    wall, lo, cpu = t
    return f"{one(wall)} [{one(lo)}] cpu {one(cpu)}"


def row(label, *cells):
    print(f"  {label:<44}" + "".join(f"{c:>34}" for c in cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference-bin", type=Path,
                    help="folder with bril2json-ref and bril2txt-ref to compare against")
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()

    small = generate(300)
    big = generate(100_000)
    n_small = sum(1 for line in small.splitlines() if line.startswith("  "))
    n_big = sum(1 for line in big.splitlines() if line.startswith("  "))

    def grammar_per_call(src):
        # The same grammar, lexer and callbacks, but lark builds the parser
        # from the grammar text on every call (and keeps no cache).
        return build_parser(cache=False).parse(src)

    assert grammar_per_call(small) == parse_program(small)

    reps = opts.repeat * 4
    print(f"1. parse_program, {len(small.splitlines())}-line program ({n_small} instructions),"
          f" in process, {reps} runs")
    ours = timed(lambda: parse_program(small), reps)
    base = timed(lambda: grammar_per_call(small), reps)
    row("", "ours (parser built once)", "grammar per call")
    row("text -> JSON dict", fmt(ours), fmt(base))
    print(f"  ours / baseline = {ours[0] / base[0]:.0%} wall, {ours[2] / base[2]:.0%} cpu"
          "   (target: at most 40%)")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = {}
        for name, src in (("small", small), ("big", big)):
            files[name, "bril"] = tmp / f"{name}.bril"
            files[name, "bril"].write_text(src)
            files[name, "json"] = tmp / f"{name}.json"
            files[name, "json"].write_text(json.dumps(parse_program(src), indent=2,
                                                      sort_keys=True) + "\n")
        out = tmp / "out"

        print(f"\n2. {n_big:,} instructions ({len(big) / 1e6:.1f} MB of text), "
              f"{opts.repeat} runs")
        prog = parse_program(big)
        json_text = files["big", "json"].read_text()
        row("in process: text -> dict (parse_program)",
            fmt(timed(lambda: parse_program(big), opts.repeat)))
        row("in process: dict -> JSON text (json.dumps)",
            fmt(timed(lambda: json.dumps(prog, indent=2, sort_keys=True), opts.repeat)))
        row("in process: JSON text -> dict (load_program)",
            fmt(timed(lambda: load_program(json_text), opts.repeat)))
        row("in process: dict -> text (format_program)",
            fmt(timed(lambda: format_program(prog), opts.repeat)))
        commands(files, "big", out, opts, format_program(prog), target=5.0)

        print("\n3. whole commands on the small program (process start-up included)")
        commands(files, "small", out, opts)


def commands(files, name, out, opts, expected_text=None, target=None):
    bindir = Path(sys.executable).parent
    ref = opts.reference_bin
    row("", "ours", *(["reference"] if ref else []))
    for cmd, src in (("bril2json", files[name, "bril"]), ("bril2txt", files[name, "json"])):
        ours = timed(lambda: run_cmd([str(bindir / cmd)], src, out), opts.repeat,
                     cpu_clock=_children_cpu)
        if cmd == "bril2txt" and expected_text is not None:
            assert out.read_text() == expected_text
        cells = [fmt(ours)]
        if ref:
            # The reference takes minutes on the big program: run it once there.
            cells.append(fmt(timed(lambda: run_cmd([str(ref / f"{cmd}-ref")], src, out),
                                   1 if name == "big" else opts.repeat,
                                   cpu_clock=_children_cpu)))
        row(f"{cmd} < {src.name}", *cells)
        if target is not None:
            verdict = "under" if ours[0] < target else "OVER"
            print(f"  {'':<44}  -> ours {verdict} the {target:g} s target (wall median)")


if __name__ == "__main__":
    main()
