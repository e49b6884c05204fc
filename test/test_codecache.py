"""The code cache: generated code kept across runs, never stale, never trusted blindly.

- invalidation is exact: editing a function, a callee, an inlined callee, a
  constant or a type changes the keys of exactly the functions compiled from
  it, and a run after the edit prints what a run without the cache prints;
- entries are whole or absent: concurrent writers, truncated and corrupt
  entries (a miss, removed), a directory we may not write (no cache, same
  output), a directory others may write (refused), a bound on the size (least
  recently used evicted);
- `brili` uses it (`--no-cache`, `--cache-info`, `--cache-clear`,
  `BRIL_CACHE_DIR`), with exact `-p` counts on cached code.
"""

import io
import json
import os
import subprocess
import sys

import pytest

from bril.cache.codecache import CodeCache, compiled_code
from bril.cache.codekeys import function_key
from bril.interpreter.interp import run
from bril.ir.linker import link
from bril.ir.text import parse_program

from corpus import program_text
from helpers import run_brili

PROGRAM = program_text("codecache/program")


def outcome(prog, argv, cache=None, **options):
    out = io.StringIO()
    count = run(prog, list(argv), out=out, cache=cache, promote_after=0, **options)
    return out.getvalue(), count


def keys(prog):
    linked = link(prog)
    return [function_key(linked, i, "normal", None, False) for i in range(len(linked.functions))]


def test_a_second_run_takes_its_code_from_the_cache(tmp_path):
    prog = parse_program(PROGRAM)
    first = CodeCache(str(tmp_path))
    expected = outcome(prog, ["300"], first)
    assert first.writes > 0 and first.hits == 0
    second = CodeCache(str(tmp_path))
    assert outcome(prog, ["300"], second) == expected
    assert second.hits > 0 and second.writes == 0
    assert expected == outcome(prog, ["300"]) == ("8955050\n", expected[1])


def test_cached_code_is_taken_at_the_warm_budget(tmp_path, monkeypatch):
    # Generating a function's code costs about as much as a hundred cold
    # instructions per instruction, loading it from the cache a few: a function
    # whose code is cached is promoted at the lower budget, one whose code is
    # not runs on in the cold tier to the full one.
    from bril.interpreter import cold
    from bril.interpreter.interp import CompiledProgram
    entered = []
    original = CompiledProgram.osr_entry

    def counting(self, cf, block):
        entered.append(cf.name)
        return original(self, cf, block)
    monkeypatch.setattr(CompiledProgram, "osr_entry", counting)
    prog = parse_program(PROGRAM)
    total = next(f for f in prog["functions"] if f["name"] == "total")
    size = len(total["instrs"])
    # 100 iterations of @total's loop (7 instructions) lie between the budgets.
    assert cold.WARM_PROMOTE_BASE + cold.WARM_PROMOTE_PER_INSTR * size < 700 < \
        cold.PROMOTE_BASE + cold.PROMOTE_PER_INSTR * size

    def run_total(n, cache):
        out = io.StringIO()
        count = run(prog, [n], out=out, cache=cache)
        return out.getvalue(), count, entered.count("total")

    expected = run_total("100", None)
    assert expected[0] == "328350\n" and expected[2] == 0     # (no cache: the full budget)
    assert run_total("100", CodeCache(str(tmp_path))) == expected    # (nothing cached yet)
    run_total("1000", CodeCache(str(tmp_path)))     # promoted at the full budget: cached
    entered.clear()
    warm = CodeCache(str(tmp_path))
    out, count, moves = run_total("100", warm)
    assert (out, count) == expected[:2] and moves == 1 and warm.hits > 0


EDITS = {
    # name: (old text, new text, functions whose code must change): the function,
    # its callers (they know what it can return) and the ones it is inlined into.
    "function body": ("  s: int = add s q;", "  s: int = sub s q;", {"total", "main"}),
    "inlined callee": ("  y: int = mul x x;", "  y: int = add x x;", {"square", "total"}),
    "constant": ("  one: int = const 1;", "  one: int = const 2;", {"total", "main"}),
    "type": ("@square(x: int): int {", "@square(x: int): float {", {"square", "total"}),
    "callee of main": ("  t: int = call @total n;", "  t: int = call @square n;", {"main"}),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edit_changes_exactly_the_keys_of_what_compiled_it_in(edit):
    old, new, changed = EDITS[edit]
    before = parse_program(PROGRAM)
    after = parse_program(PROGRAM.replace(old, new))
    names = [f["name"] for f in before["functions"]]
    differ = {n for n, a, b in zip(names, keys(before), keys(after)) if a != b}
    assert differ == changed


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_no_stale_code_runs_after_an_edit(edit, tmp_path):
    old, new, _ = EDITS[edit]
    before = parse_program(PROGRAM)
    after = parse_program(PROGRAM.replace(old, new))
    outcome(before, ["200"], CodeCache(str(tmp_path)))
    try:
        expected = outcome(after, ["200"])
    except Exception as e:          # the edited program may fail: it must fail alike
        expected = repr(e)
    try:
        got = outcome(after, ["200"], CodeCache(str(tmp_path)))
    except Exception as e:
        got = repr(e)
    assert got == expected


def test_keys_depend_on_the_function_number_and_call_resolution():
    prog = parse_program(PROGRAM)
    swapped = {"functions": [prog["functions"][1], prog["functions"][0]] + prog["functions"][2:]}
    k1, k2 = keys(prog), keys(swapped)
    assert k1[0] != k2[1] and k1[1] != k2[0]


# --- the store ---------------------------------------------------------------------------

def test_corrupt_and_truncated_entries_are_misses_and_removed(tmp_path):
    cache = CodeCache(str(tmp_path))
    assert cache.put("py", "ab" * 32, b"payload" * 100)
    path = tmp_path / "py" / "ab" / ("ab" * 32)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    assert cache.get("py", "ab" * 32) is None and not path.exists()
    cache.put("py", "ab" * 32, b"payload" * 100)
    flipped = bytearray(data)
    flipped[-1] ^= 1
    path.write_bytes(bytes(flipped))
    assert cache.get("py", "ab" * 32) is None and not path.exists()
    cache.put("py", "ab" * 32, b"payload" * 100)
    assert cache.get("py", "ab" * 32) == b"payload" * 100


def test_marshalled_entries_and_compiled_code(tmp_path):
    cache = CodeCache(str(tmp_path))
    assert cache.put_marshalled("py", "ab" * 32, (1, "two", [3.0]))
    assert cache.get_marshalled("py", "ab" * 32) == (1, "two", [3.0])
    assert not cache.put_marshalled("py", "cd" * 32, object())     # marshal cannot: no entry
    assert cache.get_marshalled("py", "cd" * 32) is None
    cache.put("py", "ef" * 32, b"not marshal data")                 # (another version's format)
    assert cache.get_marshalled("py", "ef" * 32) is None
    code = compiled_code(cache, "cold", "x = 6 * 7\n", "<test>")
    again = compiled_code(cache, "cold", "x = 6 * 7\n", "<test>")
    assert again == code and cache.hits >= 2
    ns = {}
    exec(compiled_code(None, "cold", "x = 6 * 7\n", "<test>"), ns)
    assert ns["x"] == 42


def test_a_corrupt_code_entry_is_regenerated(tmp_path):
    prog = parse_program(PROGRAM)
    expected = outcome(prog, ["100"], CodeCache(str(tmp_path)))
    for folder, _, files in os.walk(tmp_path):
        for name in files:
            if name.startswith("."):
                continue                    # (not an entry: the `.evicted` stamp)
            with open(os.path.join(folder, name), "r+b") as fh:
                fh.seek(-3, 2)
                fh.write(b"\xff\xfe\xfd")
    cache = CodeCache(str(tmp_path))
    assert outcome(prog, ["100"], cache) == expected
    assert cache.hits == 0 and cache.writes > 0


def test_a_directory_others_can_write_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    cache = CodeCache(str(shared))
    assert not cache.put("py", "cd" * 32, b"x")
    assert cache.get("py", "cd" * 32) is None
    assert outcome(parse_program(PROGRAM), ["10"], cache) == outcome(parse_program(PROGRAM), ["10"])


def test_a_full_disk_means_no_cache(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    cache = CodeCache(str(tmp_path))
    prog = parse_program(PROGRAM)
    assert outcome(prog, ["10"], cache) == outcome(prog, ["10"])
    assert cache.writes == 0 and not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_an_unusable_location_means_no_cache(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CodeCache(str(blocker / "cache"))
    prog = parse_program(PROGRAM)
    assert outcome(prog, ["10"], cache) == outcome(prog, ["10"])
    assert cache.writes == 0


def test_least_recently_used_entries_are_evicted(tmp_path):
    cache = CodeCache(str(tmp_path), limit=10_000)
    for i in range(30):
        key = f"{i:02d}" * 32
        assert cache.put("py", key, bytes(1000))
        path = tmp_path / "py" / key[:2] / key
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    cache.evict()
    left = sorted(p.name[:2] for p in (tmp_path / "py").rglob("*") if p.is_file())
    assert sum(os.path.getsize(p) for p in (tmp_path / "py").rglob("*") if p.is_file()) <= 8000
    assert left == [f"{i:02d}" for i in range(30 - len(left), 30)]      # the newest stay


_WRITER = """
import sys
from bril.cache.codecache import CodeCache, compiled_code
cache = CodeCache(sys.argv[1])
payload = sys.argv[2].encode() * 50000
for _ in range(40):
    cache.put("py", "ef" * 32, payload)
    got = cache.get("py", "ef" * 32)
    assert got is None or got in (b"a" * 50000, b"b" * 50000), "a mixed or partial entry"
"""


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-P", "-c", _WRITER, str(tmp_path), tag])
             for tag in "abab"]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert CodeCache(str(tmp_path)).get("py", "ef" * 32) in (b"a" * 50000, b"b" * 50000)
    assert not [p for p in (tmp_path / "py").rglob(".tmp-*")]


# --- the command ---------------------------------------------------------------------------

def brili(args, stdin, cache_dir, **env):
    return run_brili(args, stdin, BRIL_CACHE_DIR=cache_dir, **env)


def test_brili_fills_and_uses_the_cache(tmp_path):
    text = json.dumps(parse_program(PROGRAM))
    cold = brili(["-p", "3000"], text, tmp_path)
    info = brili(["--cache-info"], "", tmp_path)
    assert "entries: 0" not in info.stdout and str(tmp_path) in info.stdout
    warm = brili(["-p", "3000"], text, tmp_path)
    assert (warm.stdout, warm.stderr) == (cold.stdout, cold.stderr)
    assert cold.stderr.startswith("total_dyn_inst: ")
    cleared = brili(["--cache-clear"], "", tmp_path)
    assert cleared.returncode == 0 and "removed" in cleared.stdout
    assert "entries: 0" in brili(["--cache-info"], "", tmp_path).stdout


@pytest.mark.parametrize("off", [["--no-cache"], []], ids=["flag", "environment"])
def test_brili_without_the_cache(tmp_path, off):
    text = json.dumps(parse_program(PROGRAM))
    env = {} if off else {"BRIL_CACHE": "0"}
    proc = brili(off + ["-p", "3000"], text, tmp_path, **env)
    assert proc.returncode == 0
    assert not (tmp_path / "py").exists()


@pytest.mark.parametrize("cache", ["on", "off"])
def test_building_the_run_time_library_leaves_no_temporary_files(tmp_path, cache):
    """The run-time library is built in a temporary folder: removed once the build
    is in the cache, or when the process ends if there is no cache."""
    text = json.dumps(parse_program(PROGRAM))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"TMPDIR": str(scratch)} | ({} if cache == "on" else {"BRIL_CACHE": "0"})
    plain = brili(["-p", "3000"], text, tmp_path / "cache", **env)
    jit = brili(["--jit", "--hot", "1", "-p", "3000"], text, tmp_path / "cache", **env)
    assert jit.returncode == 0, jit.stderr
    assert (jit.stdout, jit.stderr) == (plain.stdout, plain.stderr)
    assert list(scratch.iterdir()) == []


def test_the_store_is_measured_at_a_first_write_only_if_none_was_lately(tmp_path, monkeypatch):
    # (measuring walks every entry: a thousand of them cost a short run 20 ms)
    walks = []
    real = CodeCache.entries
    monkeypatch.setattr(CodeCache, "entries", lambda self: walks.append(1) or real(self))
    CodeCache(str(tmp_path)).put("py", "ab" * 32, b"x")
    assert len(walks) == 1                  # the first process measures ...
    CodeCache(str(tmp_path)).put("py", "cd" * 32, b"x")
    assert len(walks) == 1                  # ... the next, within the minute, does not
    old = 1_000_000
    os.utime(tmp_path / ".evicted", (old, old))
    cache = CodeCache(str(tmp_path))
    for i in range(65):
        cache.put("py", f"{i:064x}", b"x")
    assert len(walks) == 3                  # a minute later it does; and after 64 writes
    assert CodeCache(str(tmp_path)).info()["entries"] == 67     # (the stamp is no entry)
