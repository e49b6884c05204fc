"""`bril-bench`: run benchmarks under several pipelines; brench's config in, brench's CSV out."""

import sys

import click

from bril.cli import PLUGIN_HELP
from bril.ir.errors import run_click


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               epilog="A run may list passes instead of a pipeline: `passes = [\"O\", \"mypkg.passes:fold\"]`, with `load = [[\"FILE.py\", \"NAME\"]]` for passes in files; they run through bril-opt, then brili -p.  "
               + PLUGIN_HELP)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Pipelines to run at once (default: the number of cores).")
@click.option("--plot", "plot_path", metavar="FILE",
              help="Also draw each run's results relative to the first run "
                   "(.svg, .png or .pdf), with their geometric mean.")
@click.argument("config_path", metavar="CONFIG")
@click.argument("files", nargs=-1)
def bril_bench(config_path, files, jobs, plot_path):
    """Run every benchmark under every run of CONFIG (brench's TOML format) and
    write `benchmark,run,result` CSV on stdout.

    FILES replace the config's `benchmarks` glob.  A result is the number that
    `extract` finds in the last command's output, or `incorrect` (stdout differs
    from the first run's), `timeout` or `missing` (no match).
    """
    from bril.tools import bench

    config = bench.load_config(config_path)
    paths = bench.benchmark_files(config, files)
    if plot_path is not None:
        bench.check_plot_path(plot_path, config)
    total = len(paths) * len(config.runs)
    if sys.stderr.isatty():
        with click.progressbar(length=total, file=sys.stderr, label="benchmarking",
                               show_pos=True) as bar:
            rows = bench.run_all(config, paths, jobs, progress=bar.update)
    else:
        rows = bench.run_all(config, paths, jobs)
    bench.write_csv(rows, sys.stdout)
    sys.stdout.flush()
    if plot_path is not None:
        bench.plot(rows, plot_path, title=f"bril-bench {config_path}")
    return 0


def main():
    run_click(bril_bench)


if __name__ == "__main__":
    main()
