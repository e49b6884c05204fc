"""`bril-bench`: brench's configuration in, brench's CSV out, plus plots.

Most tests use shell pipelines (echo, cat, sleep) on tiny benchmark files so
that each status (a number, incorrect, timeout, missing) is produced on
purpose; one test runs real Bril pipelines and compares the counts with the
interpreter's own.  Parallelism is checked by a barrier that only concurrent
pipelines can pass, never by timing.
"""

import io
import os
import pty
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bril.tools import bench
from bril.ir.errors import BrilError
from bril.interpreter.interp import run_capture
from bril.ir.text import parse_program

from corpus import program_text

BIN = str(Path(sys.executable).parent)
# Pipelines call our console scripts: find the ones installed next to this Python.
ENV = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
BRIL_BENCH = [sys.executable, "-P", "-m", "bril.cli.bril_bench"]


def bril_bench(*args, cwd):
    """Run the command; stdout and stderr decoded with their line ends kept."""
    done = subprocess.run(BRIL_BENCH + [str(a) for a in args], cwd=cwd, env=ENV,
                          capture_output=True, timeout=120)
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    return done


def write(path, text):
    path.write_text(text)
    return path


def one_error_line(done):
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


# A config whose runs produce every result brench knows, in a fixed run order.
STATUS_CONFIG = """\
extract = 'count: (\\d+)'
benchmarks = 'b/*.txt'
timeout = 0.5

[runs.base]
pipeline = ["cat", "read first; echo \\"$first\\"; echo 'count: 10' >&2"]

[runs.same]
pipeline = ["head -n 1", "cat; echo 'count: {args}' >&2"]

[runs.wrong]
pipeline = ["cat > /dev/null; echo different; echo 'count: 5' >&2"]

[runs.nocount]
pipeline = ["head -n 1"]

[runs.slow]
pipeline = ["sleep 30; head -n 1; echo 'count: 1'"]
"""


@pytest.fixture
def status_dir(tmp_path):
    (tmp_path / "b").mkdir()
    # `# ALT-ARGS:` after `# ARGS:`: brench (and we) take the first `ARGS: `.
    write(tmp_path / "b" / "beta.txt", "# ARGS: 7 8\n# ALT-ARGS: 1\n")
    write(tmp_path / "b" / "alpha.txt", "# ARGS: 3\n")
    write(tmp_path / "status.toml", STATUS_CONFIG)
    return tmp_path


def test_every_status_and_brench_csv_layout(status_dir):
    done = bril_bench("status.toml", cwd=status_dir)
    assert done.returncode == 0, done.stderr
    # Not a terminal: nothing at all on stderr.
    assert done.stderr == ""
    # brench's csv.writer: header, then rows, \r\n line ends; files sorted,
    # runs in config order; `same` reports the number it printed ({args}'s first word).
    assert done.stdout == (
        "benchmark,run,result\r\n"
        "alpha,base,10\r\nalpha,same,3\r\nalpha,wrong,incorrect\r\n"
        "alpha,nocount,missing\r\nalpha,slow,timeout\r\n"
        "beta,base,10\r\nbeta,same,7\r\nbeta,wrong,incorrect\r\n"
        "beta,nocount,missing\r\nbeta,slow,timeout\r\n")


def test_files_on_the_command_line_replace_the_glob_in_their_order(status_dir):
    write(status_dir / "gamma.txt", "# ARGS: 42\n")
    done = bril_bench("status.toml", "gamma.txt", "b/alpha.txt", "-j", "1", cwd=status_dir)
    assert done.returncode == 0, done.stderr
    rows = [line.split(",") for line in done.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["gamma"] * 5 + ["alpha"] * 5
    assert rows[1] == ["gamma", "same", "42"]


def test_timed_out_pipeline_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "pid"
    out = bench.run_pipeline([f"sleep 30 & echo $! > {pidfile}; wait"], b"", timeout=0.5)
    assert out.timed_out
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), f"sleep (pid {pid}) survived the timeout"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"             # a zombie is dead, only not yet reaped


def test_pipeline_feeds_the_file_through_every_stage():
    out = bench.run_pipeline(["cat", "tr a-z A-Z", "rev"], b"abc\nxyz\n", timeout=10)
    assert (out.stdout, out.timed_out) == ("CBA\nZYX\n", False)
    # Only the last stage's stderr is kept, as in brench.
    out = bench.run_pipeline(["echo early >&2; cat", "echo late >&2; cat"], b"x", timeout=10)
    assert (out.stdout, out.stderr) == ("x", "late\n")


def test_args_and_file_placeholders(tmp_path):
    path = write(tmp_path / "it's.bril", "# ARGS: -5 'a b'\n")
    config = bench.parse_config(
        "extract = '(x)'\n[runs.r]\npipeline = ['printf \"%s|\" {args}; echo; cat {file}']\n")
    out = bench.run_benchmark(config, "r", str(path))
    assert out.stdout == "-5|a b|\n# ARGS: -5 'a b'\n"


@pytest.mark.parametrize("text,args", [
    ("# ARGS: 1 2\n# ALT-ARGS: 3\n", "1 2"),
    ("# ALT-ARGS: 3\n# ARGS: 1 2\n", "3"),      # brench's regex: the first `ARGS: `
    ("@main {}\n", ""),
    ("# ARGS:\n", ""),                          # no space after the colon: no match
])
def test_benchmark_args_as_brench_reads_them(text, args):
    assert bench.benchmark_args(text) == args


def _one_pipeline(tmp_path, name, extract, pipeline, jobs):
    """bril-bench -j JOBS on NAME.toml, written with one run `r` of the one shell
    command `pipeline` on every *.txt: (its result rows, stderr)."""
    write(tmp_path / f"{name}.toml",
          f"extract = '{extract}'\nbenchmarks = '*.txt'\ntimeout = 20\n"
          f"[runs.r]\npipeline = [\"{pipeline}\"]\n")
    done = bril_bench(f"{name}.toml", "-j", str(jobs), cwd=tmp_path)
    return done.stdout.splitlines()[1:], done.stderr


def test_jobs_run_pipelines_concurrently(tmp_path):
    """Three pipelines that each wait until all three have started: with -j 3
    all pass; with -j 1 every pipeline sees itself alone."""
    running = tmp_path / "running"
    running.mkdir()
    for name in "abc":
        write(tmp_path / f"{name}.txt", "# ARGS: 1\n")
    barrier = (f"touch {running}/$$; "
               f"while [ $(ls {running} | wc -l) -lt 3 ]; do sleep 0.02; done; echo 'n: 3'")
    rows, stderr = _one_pipeline(tmp_path, "barrier", "n: (\\d+)", barrier, 3)
    assert rows == ["a,r,3", "b,r,3", "c,r,3"], stderr

    for f in running.iterdir():
        f.unlink()
    alone = (f"touch {running}/$$; sleep 0.1; echo \\\"n: $(ls {running} | wc -l)\\\"; "
             f"rm {running}/$$")
    rows, stderr = _one_pipeline(tmp_path, "alone", "n: *(\\d+)", alone, 1)
    assert rows == ["a,r,1", "b,r,1", "c,r,1"], stderr


PROGRAM = program_text("bench/triangles")


def test_bril_pipelines_report_the_interpreters_counts(tmp_path):
    write(tmp_path / "tri.bril", PROGRAM)
    write(tmp_path / "opt.toml", """\
extract = 'total_dyn_inst: (\\d+)'
benchmarks = '*.bril'

[runs.baseline]
pipeline = ["bril2json", "brili -p {args}"]

[runs.opt]
pipeline = ["bril2json", "bril-opt -O", "brili -p {args}"]

[runs.badargs]
pipeline = ["bril2json", "brili -p 3"]
""")
    done = bril_bench("opt.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    prog = parse_program(PROGRAM)
    _, count = run_capture(prog, ["12"])
    from bril.passes import registry
    _, opt_count = run_capture(registry.run_pipeline(prog, registry.O_PIPELINE), ["12"])
    assert done.stdout.splitlines() == [
        "benchmark,run,result", f"tri,baseline,{count}", f"tri,opt,{opt_count}",
        "tri,badargs,incorrect"]


@pytest.mark.parametrize("text,message", [
    ("extract = [", "invalid TOML"),
    ("[runs.a]\npipeline = ['cat']\n", "missing key 'extract'"),
    ("extract = 'n: \\d+'\n[runs.a]\npipeline = ['cat']\n", "needs a group"),
    ("extract = '(('\n[runs.a]\npipeline = ['cat']\n", "not a valid regex"),
    ("extract = '(x)'\n", "missing [runs.NAME]"),
    ("extract = '(x)'\n[runs.a]\ncommand = 'cat'\n", "run 'a' has no 'pipeline'"),
    ("extract = '(x)'\n[runs.a]\npipeline = 'cat'\n", "non-empty list"),
    ("extract = '(x)'\n[runs.a]\npipeline = []\n", "non-empty list"),
    ("extract = '(x)'\n[runs.a]\npipeline = ['cat {input}']\n", "not a valid template"),
    ("extract = '(x)'\ntimeout = -1\n[runs.a]\npipeline = ['cat']\n", "'timeout'"),
    ("extract = '(x)'\ntimeout = true\n[runs.a]\npipeline = ['cat']\n", "'timeout'"),
    ("extract = '(x)'\nbenchmarks = 3\n[runs.a]\npipeline = ['cat']\n", "'benchmarks'"),
])
def test_bad_config_is_rejected(text, message):
    with pytest.raises(BrilError, match=message.replace("[", r"\[").replace("]", r"\]")):
        bench.parse_config(text, "c.toml")


@pytest.mark.parametrize("case", ["no config", "bad toml", "missing key", "no benchmarks",
                                  "missing file", "bad jobs", "bad plot name", "no option"])
def test_command_line_errors_are_one_line(tmp_path, case):
    write(tmp_path / "bad.toml", "extract = \n")
    write(tmp_path / "nokey.toml", "[runs.a]\npipeline = ['cat']\n")
    write(tmp_path / "ok.toml", "extract = '(x)'\nbenchmarks = 'none/*.bril'\n"
                                "[runs.a]\npipeline = ['cat']\n[runs.b]\npipeline = ['cat']\n")
    args = {"no config": ["missing.toml"], "bad toml": ["bad.toml"],
            "missing key": ["nokey.toml"], "no benchmarks": ["ok.toml"],
            "missing file": ["ok.toml", "nope.bril"], "bad jobs": ["-j", "0", "ok.toml"],
            "bad plot name": ["--plot", "x.jpeg", "ok.toml", "ok.toml"],
            "no option": ["--no-such-option", "ok.toml"]}[case]
    line = one_error_line(bril_bench(*args, cwd=tmp_path))
    assert "Traceback" not in line


def test_ratios_and_geometric_mean():
    rows = [bench.Row("a", "base", "100"), bench.Row("a", "opt", "50"),
            bench.Row("a", "bad", "incorrect"),
            bench.Row("b", "base", "10"), bench.Row("b", "opt", "20"),
            bench.Row("b", "bad", "30"),
            bench.Row("c", "base", "timeout"), bench.Row("c", "opt", "5"),
            bench.Row("c", "bad", "missing")]
    table, geo = bench.ratios(rows)
    assert table == {"opt": {"a": 0.5, "b": 2.0, "c": "n/a"},
                     "bad": {"a": "incorrect", "b": 3.0, "c": "missing"}}
    assert geo["opt"] == pytest.approx(1.0)
    assert geo["bad"] == pytest.approx(3.0)


def test_write_csv_matches_brench_bytes():
    buf = io.StringIO(newline="")
    bench.write_csv([bench.Row("a,b", "run", "12")], buf)
    assert buf.getvalue() == 'benchmark,run,result\r\n"a,b",run,12\r\n'


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_plot_is_written(status_dir, suffix):
    plot = status_dir / f"plot{suffix}"
    done = bril_bench("status.toml", "--plot", plot.name, cwd=status_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("benchmark,run,result\r\n")
    data = plot.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        # Run names, benchmark names and the geometric mean are drawn as text.
        assert b"geometric mean" in data and b"alpha" in data and b"same" in data


def test_plot_needs_two_runs(tmp_path):
    write(tmp_path / "a.txt", "")
    write(tmp_path / "one.toml", "extract = '(x)'\n[runs.a]\npipeline = ['cat']\n")
    line = one_error_line(bril_bench("one.toml", "a.txt", "--plot", "p.svg", cwd=tmp_path))
    assert "two runs" in line
    assert not (tmp_path / "p.svg").exists()


def test_progress_bar_on_a_terminal(status_dir):
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(BRIL_BENCH + ["status.toml"], cwd=status_dir, env=ENV,
                              stdout=subprocess.PIPE, stderr=follower, timeout=120)
        os.close(follower)
        follower = None
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:             # EIO: nothing more to read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    assert b"benchmarking" in shown and b"10/10" in shown
    assert done.stdout.count(b"\r\n") == 11         # the CSV is untouched


def test_example_configs_load(tmp_path):
    configs = sorted((Path(__file__).resolve().parent.parent / "benchmarks" / "configs")
                     .glob("*.toml"))
    assert configs
    for path in configs:
        config = bench.load_config(path)
        assert len(config.runs) >= 2, path
