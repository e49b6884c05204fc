"""A benchmark runner that reads brench's configuration and writes brench's CSV.

Configuration (TOML, as brench documents it):

    extract = 'total_dyn_inst: (\\d+)'      # regex; group 1 is the result
    benchmarks = 'benchmarks/*/*.bril'     # optional glob (or list of globs)
    timeout = 5                            # optional, seconds per run

    [runs.baseline]                        # the first run is the baseline
    pipeline = ["bril2json", "brili -p {args}"]

Each benchmark file is fed on standard input to the first shell command of a
run's pipeline, each command's stdout to the next one's stdin; `{args}` is the
text after the first `ARGS: ` in the file.  The result of a run is group 1 of
`extract` searched in the last command's stdout, then its stderr, or:

    timeout    the pipeline did not finish within `timeout` seconds;
    incorrect  its stdout differs from the baseline's;
    missing    `extract` found nothing (or an empty group).

These are brench's rules, kept exactly so that CSVs from both tools compare.
Beyond brench: `{file}` in a command is the benchmark's path (shell-quoted),
rows come in a fixed order (files as given, each glob's matches sorted, runs
in configuration order), and results can be plotted (`plot`).  A run may give
passes instead of a pipeline, by name or spec as `bril-opt` takes them (plug-ins
included, `bril.passes.registry`), checked when the configuration is read:

    [runs.mine]
    passes = ["O", "dse", "mypkg.passes:fold"]     # run through bril-opt, then brili -p
    load = [["examples/dead_stores.py", "dse"]]    # optional: bril-opt --load FILE NAME
"""

import csv
import glob
import math
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from ..ir.errors import BrilError

# brench's pattern: the first `ARGS: ` anywhere in the file, up to the line's end.
# (`# ALT-ARGS:` contains it too, so our benchmarks put ALT-ARGS after ARGS.)
ARGS_RE = re.compile(r"ARGS: (.*)")
DEFAULT_TIMEOUT = 5
STATUSES = ("incorrect", "timeout", "missing")
CSV_HEADER = ("benchmark", "run", "result")
PLOT_FORMATS = (".svg", ".png", ".pdf")


@dataclass
class Config:
    extract: re.Pattern
    benchmarks: list            # glob patterns, relative to the current directory
    timeout: float
    runs: dict                  # run name -> list of shell commands, baseline first


@dataclass
class Outcome:
    """What one pipeline produced (its last command's output)."""
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass
class Row:
    benchmark: str              # the file's name without folder and extension
    run: str
    result: str                 # the extracted figure, or one of STATUSES


# --- configuration ---------------------------------------------------------------------

def load_config(path):
    """Read and check a configuration file; BrilError on any problem."""
    from ..ir.program import read_bytes
    data = read_bytes(path, "config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BrilError(f"config {path}: not UTF-8 text")
    return parse_config(text, str(path))


def parse_config(text, source="config"):
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BrilError(f"config {source}: invalid TOML: {e}")

    def bad(msg):
        return BrilError(f"config {source}: {msg}")

    if "extract" not in raw:
        raise bad("missing key 'extract' (a regex whose group 1 is the result)")
    if not isinstance(raw["extract"], str):
        raise bad("'extract' must be a string")
    try:
        extract = re.compile(raw["extract"])
    except re.error as e:
        raise bad(f"'extract' is not a valid regex: {e}")
    if extract.groups < 1:
        raise bad("'extract' needs a group, e.g. 'total_dyn_inst: (\\d+)'")

    benchmarks = raw.get("benchmarks", [])
    if isinstance(benchmarks, str):
        benchmarks = [benchmarks]
    if not isinstance(benchmarks, list) or not all(isinstance(b, str) for b in benchmarks):
        raise bad("'benchmarks' must be a glob or a list of globs")

    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise bad("'timeout' must be a positive number of seconds")

    runs = raw.get("runs")
    if runs is None:
        raise bad("missing [runs.NAME] tables (the first run is the baseline)")
    if not isinstance(runs, dict) or not runs:
        raise bad("'runs' must hold at least one [runs.NAME] table")
    pipelines = {}
    for name, run in runs.items():
        if isinstance(run, dict) and "passes" in run and "pipeline" not in run:
            run = dict(run, pipeline=_passes_pipeline(name, run, bad))
        if not isinstance(run, dict) or "pipeline" not in run:
            raise bad(f"run '{name}' has no 'pipeline' (or 'passes')")
        pipe = run["pipeline"]
        if not isinstance(pipe, list) or not pipe or not all(isinstance(c, str) for c in pipe):
            raise bad(f"run '{name}': 'pipeline' must be a non-empty list of shell commands")
        for cmd in pipe:
            try:
                cmd.format(args="", file="")
            except (KeyError, IndexError, ValueError) as e:
                raise bad(f"run '{name}': command {cmd!r} is not a valid template "
                          f"(only {{args}} and {{file}} are replaced; write a literal "
                          f"brace as {{{{ or }}}}): {e}")
        pipelines[name] = pipe
    return Config(extract, benchmarks, float(timeout), pipelines)


def benchmark_files(config, files=()):
    """The files to run: those given, else the config's globs' matches (each
    glob's sorted, duplicates dropped).  BrilError if there are none."""
    if files:
        for f in files:
            if not os.path.isfile(f):
                raise BrilError(f"no such benchmark file: {f}")
        return list(files)
    found = []
    for pattern in config.benchmarks:
        found += sorted(glob.glob(pattern, recursive=True))
    found = [f for f in dict.fromkeys(found) if os.path.isfile(f)]
    if not found:
        if not config.benchmarks:
            raise BrilError("no benchmarks: give files, or a 'benchmarks' glob in the config")
        raise BrilError(f"no file matches {', '.join(config.benchmarks)} "
                        f"(globs are relative to the current directory, {os.getcwd()})")
    return found


def benchmark_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def benchmark_args(text):
    """The `{args}` of a benchmark: what follows the first `ARGS: `, as brench reads it."""
    m = ARGS_RE.search(text)
    return m.group(1) if m else ""


def _passes_pipeline(name, run, bad):
    """The pipeline of a run given as `passes` (and `load`): bril2json, bril-opt, brili."""
    passes, loads = run["passes"], run.get("load", [])
    if not isinstance(passes, list) or not all(isinstance(p, str) for p in passes):
        raise bad(f"run '{name}': 'passes' must be a list of pass names or specs")
    if not isinstance(loads, list) or not all(
            isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x)
            for x in loads):
        raise bad(f"run '{name}': 'load' must be a list of [FILE.py, NAME] pairs")
    from ..passes import registry
    try:
        for path, pname in loads:
            registry.load_file(path, pname)
        registry.resolve_all(passes)
    except BrilError as e:
        raise bad(f"run '{name}': {e.message}") from None
    opt = ["bril-opt"] + [w for pair in loads for w in ("--load", *pair)] + passes
    quoted = shlex.join(opt).replace("{", "{{").replace("}", "}}")
    return ["bril2json", quoted, "brili -p {args}"]


# --- running -------------------------------------------------------------------------

def run_pipeline(commands, data, timeout, running=None):
    """Run shell commands as a pipeline with `data` (bytes) on the first one's stdin.

    Returns the last command's output.  Earlier commands' stderr is discarded,
    as in brench.  Every command runs in its own process group, so a timeout
    kills whatever a shell command started as well.  `running` (a Running)
    lets another thread stop the pipeline.
    """
    running = running or Running()
    procs = []
    timed_out = False
    out = err = b""
    with tempfile.TemporaryFile() as stdin:
        stdin.write(data)
        stdin.seek(0)
        try:
            for i, cmd in enumerate(commands):
                last = i == len(commands) - 1
                procs.append(running.start(
                    cmd, shell=True, start_new_session=True,
                    stdin=procs[-1].stdout if procs else stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE if last else subprocess.DEVNULL))
                if len(procs) > 1:
                    procs[-2].stdout.close()    # the next command owns it now
            try:
                out, err = procs[-1].communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                out, err = b"", b""
        finally:
            for p in procs:
                running.finish(p, kill=timed_out or p.poll() is None)
                p.wait()
                for stream in (p.stdout, p.stderr):
                    if stream is not None:
                        stream.close()
    decode = lambda b: b.decode("utf-8", "surrogateescape")
    return Outcome(decode(out), decode(err), timed_out)


class Running:
    """The processes of the pipelines now running, so that all can be stopped
    at once (on Ctrl-C: they run in their own sessions and do not see it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._procs = set()
        self._stopped = False

    def start(self, *args, **kwargs):
        with self._lock:
            if self._stopped:
                raise BrilError("stopped")
            proc = subprocess.Popen(*args, **kwargs)
            self._procs.add(proc)
            return proc

    def finish(self, proc, kill):
        """Forget a process (killing its group first if asked) before it is reaped,
        so that no group id is signalled after it may have been reused."""
        with self._lock:
            if kill:
                _kill_group(proc)
            self._procs.discard(proc)

    def stop(self):
        with self._lock:
            self._stopped = True
            for proc in self._procs:
                _kill_group(proc)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_benchmark(config, run_name, path, running=None):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BrilError(f"cannot read benchmark {path}: {e.strerror}")
    args = benchmark_args(data.decode("utf-8", "surrogateescape"))
    cmds = [c.format(args=args, file=shlex.quote(path)) for c in config.runs[run_name]]
    return run_pipeline(cmds, data, config.timeout, running)


def extract_result(config, outcome):
    """Group 1 of `extract` in stdout, else in stderr; None if neither has it."""
    for text in (outcome.stdout, outcome.stderr):
        m = config.extract.search(text)
        if m:
            return m.group(1)
    return None


def judge(config, name, outcomes):
    """CSV rows for one benchmark from its outcomes (run name -> Outcome), by brench's rules."""
    rows = []
    golden = None
    for run in config.runs:
        out = outcomes[run]
        status = "timeout" if out.timed_out else None
        stdout = "" if out.timed_out else out.stdout
        # brench: a timed-out baseline leaves "" as the golden output.
        if golden is None:
            golden = stdout
        elif stdout != golden and status is None:
            status = "incorrect"
        result = extract_result(config, out) if not out.timed_out else None
        if not result and status is None:
            status = "missing"
        rows.append(Row(name, run, status or result))
    return rows


def run_all(config, files, jobs=None, progress=None):
    """Run every file under every run, `jobs` at a time; rows in file, then run order.

    `progress(n)` is called after each finished pipeline (from this thread)."""
    jobs = jobs or os.cpu_count() or 1
    running = Running()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_benchmark, config, run, path, running): (path, run)
                   for path in files for run in config.runs}
        outcomes = {}
        try:
            for fut in as_completed(futures):
                outcomes[futures[fut]] = fut.result()
                if progress is not None:
                    progress(1)
        except BaseException:
            # Interrupted (or a file vanished): stop everything before leaving.
            pool.shutdown(wait=False, cancel_futures=True)
            running.stop()
            raise
    rows = []
    for path in files:
        rows += judge(config, benchmark_name(path),
                      {run: outcomes[(path, run)] for run in config.runs})
    return rows


def write_csv(rows, stream):
    # The default (excel) dialect, as brench's csv.writer: \r\n line ends.
    writer = csv.writer(stream)
    writer.writerow(CSV_HEADER)
    for r in rows:
        writer.writerow([r.benchmark, r.run, r.result])


# --- ratios and plots ----------------------------------------------------------------

def _number(text):
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def ratios(rows):
    """Per run after the baseline: {run: {benchmark: ratio or status}}, plus
    {run: geometric mean over the benchmarks with a ratio (None if none)}.

    A ratio is the run's result over the baseline's (both numbers, baseline
    not zero); otherwise the entry is the run's status, or 'n/a'."""
    runs = list(dict.fromkeys(r.run for r in rows))
    base = runs[0] if runs else None
    table = {run: {} for run in runs[1:]}
    base_value = {r.benchmark: _number(r.result) for r in rows if r.run == base}
    for r in rows:
        if r.run == base:
            continue
        b, x = base_value.get(r.benchmark), _number(r.result)
        if x is not None and b:
            table[r.run][r.benchmark] = x / b
        else:
            table[r.run][r.benchmark] = r.result if r.result in STATUSES else "n/a"
    geo = {}
    for run, per in table.items():
        vals = [v for v in per.values() if isinstance(v, float) and v > 0]
        geo[run] = math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None
    return table, geo


def check_plot_path(path, config):
    """Fail early (before any benchmark runs) on a plot we cannot draw."""
    if len(config.runs) < 2:
        raise BrilError("--plot needs at least two runs (the first is the baseline)")
    ext = os.path.splitext(path)[1].lower()
    if ext not in PLOT_FORMATS:
        raise BrilError(f"--plot {path}: the name must end in {', '.join(PLOT_FORMATS)}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BrilError(f"--plot {path}: no such directory {parent}")
    _pyplot()


def _pyplot():
    # Imported only to plot: matplotlib takes a while to load.
    try:
        import matplotlib
    except ImportError:
        raise BrilError("--plot needs matplotlib: pip install 'bril-speculate[plot]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot(rows, path, title=None):
    """Draw each run's ratio to the baseline per benchmark, and their geometric
    mean, as horizontal bars (one group per benchmark) into `path`."""
    plt = _pyplot()
    table, geo = ratios(rows)
    if not table:
        raise BrilError("--plot needs at least two runs (the first is the baseline)")
    runs = list(table)
    base = rows[0].run
    benches = list(dict.fromkeys(r.benchmark for r in rows))
    labels = benches + ["geometric mean"]
    n, k = len(labels), len(runs)
    bar = 0.8 / k
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.22 * n * max(1, k * 0.8)))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    finite = [v for per in table.values() for v in per.values() if isinstance(v, float)]
    xmax = max(finite + [1.0]) * 1.15
    for j, run in enumerate(runs):
        ys = [i + (j - (k - 1) / 2) * bar for i in range(n)]
        values = [table[run].get(b) for b in benches] + [geo[run]]
        widths = [v if isinstance(v, float) else 0 for v in values]
        ax.barh(ys, widths, height=bar * 0.9, color=colors[j % len(colors)], label=run)
        for y, v in zip(ys, values):
            if isinstance(v, float):
                ax.text(v, y, f" {v:.3f}", va="center", fontsize=7)
            else:                       # no ratio: say why where the bar would be
                ax.text(0, y, f" {v or 'n/a'}", va="center", fontsize=7, color="#c92a2a")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axhline(n - 1.5, color="#999999", linewidth=0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=8)
    ax.get_yticklabels()[-1].set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, xmax)
    ax.set_xlabel(f"result relative to '{base}' (1 = same)")
    ax.set_title(title or f"each run against '{base}'", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    try:
        # No date in the metadata: the same results give the same file.
        meta = {"Date": None} if path.lower().endswith(".svg") else {}
        with plt.rc_context({"svg.hashsalt": "bril-bench"}):
            fig.savefig(path, metadata=meta)
    except OSError as e:
        raise BrilError(f"cannot write {path}: {e.strerror or e}")
    finally:
        plt.close(fig)
