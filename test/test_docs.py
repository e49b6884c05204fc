"""The documentation's commands run as written, and what it names exists.

Every line of the ```sh blocks of README.md and docs/*.md runs in `bash -o
pipefail`, the lines of a page in order (the pages side by side), from a scratch
folder of the page's own holding the project's benchmarks/, examples/ and
turnt.toml (symbolic links: the commands read them and write only into the
scratch folder), with a fresh code cache, and must exit with status 0.  Two
markers in a line's trailing comment:

    (exit status N)                  the line must exit with status N instead
    (not run by the tests: REASON)   the line is skipped, for that reason

Paths of this repository and `bril.` modules named in backquotes, and the
targets of relative links (anchors included), must exist.
"""

import importlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = ("benchmarks", "examples", "turnt.toml")
TIMEOUT = 120                      # seconds per line: only a hang comes near it

SKIP = re.compile(r"\(not run by the tests: ([^)]+)\)")
STATUS = re.compile(r"\(exit status (\d+)\)")


def _name(path):
    return str(path.relative_to(ROOT))


def sh_lines(path):
    """(line number, command) for every command line of the file's ```sh blocks."""
    found, fence = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if text.startswith("```"):
            fence = text[3:].strip() if fence is None else None
            continue
        if fence == "sh" and text and not text.startswith("#"):
            assert not text.endswith("\\"), f"{_name(path)}:{number}: one command per line"
            found.append((number, text))
    assert fence is None, f"{_name(path)}: a code block is not closed"
    return found


def _environment(tmp, pycache):
    """The user's environment, without settings of the test session (conftest's
    growth price, ...), with a fresh cache and this Python's commands first."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("BRIL_") and k != "BRIL_CONFORMANCE")
           and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        BRIL_CACHE_DIR=str(tmp / "cache"),
        # no precompiling process may outlive its line (it would write into a
        # folder about to be removed)
        BRIL_JIT_PRECOMPILE="0",
        # bytecode, kept out of the checkout: compiled once, not at every start
        PYTHONPYCACHEPREFIX=str(pycache),
        MPLCONFIGDIR=str(tmp / "matplotlib"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    return env


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if "__pycache__" not in p.parts)


def _run_page(page, tmp, pycache):
    """Run the page's command lines in order; the failures, as messages."""
    work = tmp / "work"
    work.mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    env = _environment(tmp, pycache)
    for number, command in sh_lines(page):
        if SKIP.search(command):
            continue
        where = f"{_name(page)}:{number}: {command}"
        status = STATUS.search(command)
        expected = int(status.group(1)) if status else 0
        try:
            r = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return [f"{where}\ntook more than {TIMEOUT} s"]
        if r.returncode != expected:
            # (later lines may read what this one should have written)
            return [f"{where}\nexit status {r.returncode}, expected {expected}\n"
                    f"stderr: {r.stderr.decode(errors='replace')[-2000:]}"]
    return []


@pytest.mark.slow
def test_shell_commands_run(tmp_path):
    # The pages run side by side (each in its own folder, with its own cache),
    # the lines of one page in order.
    before = {name: _tree(ROOT / name) for name in ("benchmarks", "examples")}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        results = pool.map(lambda page: _run_page(page, tmp_path / page.stem,
                                                  tmp_path / "pycache"), PAGES)
        failures = [failure for result in results for failure in result]
    assert not failures, "\n\n".join(failures)
    # the commands wrote nothing into the checkout
    assert {name: _tree(ROOT / name) for name in before} == before


def test_skipped_lines_say_why():
    for page in PAGES:
        for number, command in sh_lines(page):
            reason = SKIP.search(command)
            assert reason is None or reason.group(1).strip(), f"{_name(page)}:{number}"


def test_every_page_has_commands_and_the_readme_is_short():
    assert all(sh_lines(page) for page in PAGES if page.name != "architecture.md")
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350
    # the set-up commands are the ones CI runs (.ci/run)
    setup = [c for _, c in sh_lines(ROOT / "README.md")][:2]
    assert setup[0].startswith("pip install -e '.[test]' --config-settings editable_mode=strict ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert all(command.split("  #")[0].strip() in ci for command in setup)
    assert setup[1].startswith("python -m pytest ")


_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(bril|cli|passes|examples|benchmarks|test|docs)(/[\w.-]*)*")
_MODULE = re.compile(r"bril(\.\w+)+")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page):
    """The anchors of a page's headings (outside code blocks)."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def _resolves(dotted):
    """A module, or an attribute of one, by its dotted name."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_named_paths_modules_and_links_exist(page):
    text = page.read_text()
    missing = []
    for span in _SPAN.findall(text):
        if _PATH.fullmatch(span) and "*" not in span and "NAME" not in span:  # (patterns)
            if not (ROOT / span).exists():
                missing.append(span)
        elif _MODULE.fullmatch(span) and not _resolves(span):
            missing.append(span)
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            missing.append(target)
        elif anchor and anchor not in _anchors(path):
            missing.append(target)
    assert not missing, f"{_name(page)} names what does not exist: {missing}"
