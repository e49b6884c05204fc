"""`bril2dot`: a Bril JSON program on stdin, its control-flow graphs as Graphviz DOT."""

import json
import shutil
import subprocess
import sys

import click

from bril.cli import PLUGIN_HELP, stdin_bytes
from bril.ir.errors import run_click
from bril.ir.errors import BrilError

RENDER_TIMEOUT = 300        # seconds; Graphviz can be slow on very large graphs


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               epilog=PLUGIN_HELP)
@click.option("--report", "report_path", metavar="REPORT.json",
              help="A trace report (brili --trace-report): draw its hot paths.")
@click.option("--svg", "svg_path", metavar="FILE",
              help="Render with Graphviz `dot` to an SVG file instead of printing DOT.")
@click.option("--png", "png_path", metavar="FILE",
              help="Render with Graphviz `dot` to a PNG file instead of printing DOT.")
@click.option("--max-lines", type=click.IntRange(min=0), default=0,
              help="Show at most this many instructions per block (0: all).")
@click.argument("func", required=False)
def bril2dot(report_path, svg_path, png_path, max_lines, func):
    """Read a Bril JSON program on stdin; write the control-flow graph of every
    function (or only of FUNC) as Graphviz DOT on stdout.

    Blocks are boxes listing their instructions.  Traces spliced in by
    `brili --trace` are filled blue (resume points yellow, the original header
    code grey) and guard failures are dashed red edges.
    """
    from bril.tools.dot import program_to_dot
    from bril.ir.program import load_program

    report = _read_report(report_path) if report_path else None
    renders = [(fmt, path) for fmt, path in (("svg", svg_path), ("png", png_path)) if path]
    if renders and shutil.which("dot") is None:
        raise BrilError("Graphviz `dot` is not installed (apt-get install graphviz); "
                        "or print DOT and render it elsewhere")
    prog = load_program(stdin_bytes())
    text = program_to_dot(prog, func, report, max_lines or None)
    # Lone surrogates (possible in JSON chars) cannot be UTF-8: escape them.
    data = text.encode("utf-8", "backslashreplace")
    if not renders:
        sys.stdout.buffer.write(data)
        return 0
    for fmt, path in renders:
        _render(data, fmt, path)
    return 0


def _read_report(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except OSError as e:
        raise BrilError(f"cannot read report {path}: {e.strerror}")
    except (ValueError, RecursionError) as e:
        raise BrilError(f"report {path} is not JSON: {e}")


def _render(data, fmt, path):
    try:
        done = subprocess.run(["dot", f"-T{fmt}", "-o", path], input=data,
                              capture_output=True, timeout=RENDER_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise BrilError(f"Graphviz `dot` took over {RENDER_TIMEOUT} s; try --max-lines or FUNC")
    if done.returncode != 0:
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BrilError(f"Graphviz `dot` failed: {msg[0] if msg else f'exit {done.returncode}'}")


def main():
    from bril.cli import no_cycle_collection
    with no_cycle_collection():
        run_click(bril2dot)


if __name__ == "__main__":
    main()
