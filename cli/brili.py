"""`brili`: run a Bril program (a drop-in replacement for the reference interpreter).

    brili [-p] [-f FILE | --text] [-L DIR]... [ARGS...]

Arguments are parsed by hand (no click; `bril.cli.brili_start.parse_args`): start-up
time matters for a command run once per test, and every argument that is not
one of our flags must reach @main unchanged, including negative numbers
(`brili -5`).  As in the reference, `-p` may appear anywhere.
"""

import os
import sys

from bril.cli import no_cycle_collection
# (the command line and the first steps: a warm run's, without this module)
from bril.cli.brili_start import start, try_start, wait_if_asked

USAGE = """\
usage: brili [-p] [-f FILE | --text] [-L DIR]... [--tier T] [--no-cache]
             [--trace OUT.json [--hot N] [--trace-report FILE] [--trace-no-opt]
                               [--trace-counts] [--trace-specialize]
                               [--trace-pass SPEC]... [--load FILE.py NAME]...]
             [--no-jit | --jit [--hot N] [--jit-background] [--jit-report FILE]]
             [--write-profile FILE] [ARGS...]
       brili --cache-info | --cache-clear

Run the Bril program read as JSON from standard input; ARGS are the
arguments of @main, parsed by their declared types.

options:
  -p           print `total_dyn_inst: N` (dynamic instruction count) on stderr
  -f FILE      read the program from FILE (.bril text, or .json)
  --text       read Bril text (not JSON) from standard input
  -L DIR       also look for imported files in DIR (repeatable); imports are
               first resolved relative to the importing file's directory
  --dump-py    print the generated Python code on stderr (debugging; implies
               --tier fast unless --tier is given)
  --tier T     how functions run: auto (default) starts each function in a
               cold tier that needs no preparation and moves functions that
               turn hot to generated Python, also in the middle of a loop;
               cold never leaves the cold tier; fast generates Python for every
               function before the first instruction
  --no-cache   neither use nor fill the code cache (also: BRIL_CACHE=0); the
               cache keeps generated code across runs, keyed by the content it
               was made from, in $BRIL_CACHE_DIR, else
               $XDG_CACHE_HOME/bril-speculate, else ~/.cache/bril-speculate
               (about $BRIL_CACHE_SIZE bytes, default 256 MB, measured at
               most once a minute)
  --cache-info print where the code cache is, its entries and size; then exit
  --cache-clear
               empty the code cache; then exit
  --trace OUT.json
               run as usual (same output and -p count), recording the hot
               loops, and write to OUT.json the program with speculative traces
               of them spliced in (ordinary Bril that any Bril tool runs);
               traces are also recorded on the -O program (bril-opt -O), and
               OUT.json is whichever of original + traces, -O alone and -O +
               traces runs the fewest instructions on these ARGS; when no loop
               got hot, the original program (or -O alone, for programs of at
               most 500 instructions, if it runs fewer)
  --trace-no-opt
               with --trace: only trace the program as it is (no -O)
  --trace-counts
               with --trace: choose traces for the instructions they save
               alone.  By default each instruction a trace adds must save a
               few hundred on these ARGS (preparing code costs every run its
               time; $BRIL_TRACE_GROWTH_PRICE sets the number): no trace for a
               short run, shorter unrollings for a longer one
  --trace-specialize
               with --trace: also version each hot loop on the values the run
               showed invariant (an integer divisor the loop never writes),
               and each function whose loops run long on the int and bool
               values nearly every call passed (where a constant pays: not a
               long trip count): a copy with the values as constants,
               entered when a check at the loop's or function's entry finds
               them (else the original code).  For native code (brilc: a
               division by a constant becomes a multiplication, a short loop
               is unrolled); the check costs 3 instructions per entry
  --trace-pass SPEC
               with --trace: run the plug-in pass SPEC on each trace's
               straight-line code before it is spliced (repeatable; commas
               separate passes).  SPEC: a name given to --load, a pass an
               installed package declares in the entry-point group
               `bril.passes`, module:function, file.py:function, or a built-in
               pass (bril-opt --list).  The result is checked like the tracer's
               own traces: a pass that breaks the program is dropped with a
               warning; one that raises or returns malformed JSON is an error
  --load FILE.py NAME
               make the function NAME of FILE.py a pass called NAME (for
               --trace-pass)
  --hot N      a loop header is hot after N visits (default 56 for --trace,
               1000 for --jit); with --jit, hot code is compiled as soon as
               it is hot, in this process, by arrival counts (deterministic;
               without --hot, hot code is found by sampling, see --jit)
  --trace-report FILE
               per trace: function, header, blocks and instructions covered,
               guards, entries, aborts, instructions saved; JSON if FILE ends in
               .json, text otherwise ("-" for stderr)
  --jit        (the default) hot loops and functions become native code
               (LLVM) while the program runs; same output, errors and -p count
               as without it.  A sampler looks at the running program every
               5 ms; a loop or function it sees hot for a few looks is compiled
               by a compile server, a process of its own on another core, while
               the program runs on, and entered at its next arrival.  On a
               single core, a unit is compiled only once it has run for 12 times
               its predicted compile cost.  Compiled code and what was hot are
               kept in the code cache: the next run of the same program starts
               native code at once, without LLVM, and what a run found hot but
               did not get compiled is built after it, for the next.  Without
               a usable code cache or a C compiler, brili runs interpreted
  --no-jit     the interpreter alone (also: BRIL_JIT=0)
  --jit-background
               with --jit: compile on a second thread while the program goes
               on interpreted (by default the interpreter waits for the
               compiler; output and -p are the same either way)
  --jit-report FILE
               with --jit: per loop region and function, what was compiled,
               compile time, native entries and exits; JSON if FILE ends in
               .json, text otherwise ("-" for stderr)
  --write-profile FILE
               after the run (also one that fails), write to FILE the types
               the `any` parameters of each function held, the int and bool
               parameters nearly every call passed one value, and the types
               the `any` variables held at loop headers (JSON: a type
               profile); `brilc --profile FILE` compiles each function
               for them, with its generic code as the fallback.  The run
               stays in the first tier (--tier cold, no JIT), which sees
               every call: slower, so write profiles on small inputs
  -h, --help   show this help
  --           treat every later argument as an argument of @main

Errors are reported as one line `error: MESSAGE` on stderr, exit status 2.
"""


def _read_program(opts, read):
    from bril.ir.program import read_program
    return read_program(opts.file, opts.text, load_json=_load_json, read=read)


def _load_json(data):
    """Parse and check a JSON program.  An unknown opcode is not rejected here: as
    in the reference, it is an error only when it runs."""
    from bril.ir.errors import BrilError
    from bril.ir.program import load_program
    try:
        return load_program(data)
    except BrilError as e:
        if "unknown opcode" not in e.message:
            raise
    import json
    return json.loads(data)


def _body(argv, started=None):
    if isinstance(started, Exception):
        raise started           # (met by `try_start` once the input was read)
    opts, read = started or start(argv)
    if opts.help:
        sys.stdout.write(USAGE)
        return 0
    if opts.cache_command is not None:
        return _cache_command(opts.cache_command)
    with no_cycle_collection():
        prog, filename = _read_program(opts, read)
    # The program's objects live to the end: keep the collector off them.  And
    # collect rarely: a run makes few reference cycles, but a deep Bril call
    # stack keeps many objects alive, which each collection would walk again
    # (a 24,000-deep call chain: half its time in the collector).
    import gc
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        return _run_program(prog, filename, opts)
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _run_program(prog, filename, opts):
    if opts.dump:
        os.environ["BRIL_DUMP_PY"] = "1"
        if opts.tier is None:
            opts.tier = "fast"
    from bril.interpreter.interp import run
    from bril.ir.program import may_run_long
    base_dir = os.path.dirname(os.path.abspath(filename)) if filename else None
    out = _program_output()
    if opts.trace is not None and not prog.get("imports"):
        count = _trace(prog, opts, out)
    elif opts.jit and (opts.jit_report is not None or opts.hot or may_run_long(prog)) \
            and (jit_cache := _jit_cache(opts)) is not False:
        count = _jit(prog, opts, out, base_dir, filename, jit_cache)
    else:
        if opts.trace is not None and opts.trace_report is None:
            sys.stderr.write("note: programs with imports are not traced\n")
        count = run(prog, opts.args, out=out, base_dir=base_dir,
                    lib_dirs=opts.lib_dirs, filename=filename, tier=opts.tier or "auto",
                    cache=_code_cache(opts), observe=_observer(opts))
        if opts.trace is not None:
            _write_atomically(opts.trace, _json_text(prog))
    if opts.jit:
        # (also after a run the JIT attached to, which waited for its own server: a
        # run it never came into did not)
        wait_if_asked(_code_cache(opts))
    if opts.profile:
        sys.stderr.write(f"total_dyn_inst: {count}\n")
    return 0


def _observer(opts):
    """With --write-profile, what writes the type profile when the run ends."""
    if opts.write_profile is None:
        return None
    from bril.interpreter import type_profile

    def observe(compiled):
        type_profile.write(opts.write_profile, type_profile.observed(compiled))
    return observe


def _code_cache(opts):
    from bril.cache.codecache import CodeCache, enabled_by_environment
    if not opts.cache or not enabled_by_environment():
        return None
    return CodeCache()


def _cache_command(command):
    from bril.cache.codecache import CodeCache
    cache = CodeCache()
    if command == "--cache-clear":
        removed = cache.clear()
        sys.stdout.write(f"removed {removed} entries from {cache.directory}\n")
        return 0
    info = cache.info()
    state = "" if info["usable"] else " (not usable: not private to this user, or not writable)"
    sys.stdout.write(f"directory: {info['directory']}{state}\n"
                     f"entries: {info['entries']}\n"
                     f"size: {info['bytes']} bytes (limit {info['limit']})\n")
    return 0


def _trace(prog, opts, out):
    """`--trace`: run once recording, write the traced program (and report)."""
    from bril.tracing.tracer import report, report_text, trace_program
    passes = []
    if opts.trace_passes or opts.loads:
        from bril.passes import registry     # (only when plug-ins are asked for)
        for path, name in opts.loads:
            registry.load_file(path, name)
        passes = registry.resolve_all(opts.trace_passes)
    result = trace_program(prog, opts.args, hot=opts.hot or 56, out=out,
                           optimize=not opts.trace_no_opt, passes=passes,
                           cache=_code_cache(opts), growth_price=0 if opts.trace_counts else None,
                           specialize=opts.trace_specialize)
    _write_atomically(opts.trace, _json_text(result.program))
    if opts.trace_report is not None:
        if opts.trace_report.endswith(".json"):
            import json
            _write_atomically(opts.trace_report, json.dumps(report(result), indent=2) + "\n")
        else:
            text = "\n".join(report_text(result)) + "\n"
            if opts.trace_report == "-":
                sys.stderr.write(text)
            else:
                _write_atomically(opts.trace_report, text)
    return result.original_count


def _jit_cache(opts):
    """The code cache the JIT keeps its units in; None for none (`--jit --no-cache`:
    compiled in this process, kept nowhere); False if the JIT is off for want of
    one (by default, the JIT runs only with a usable cache: units come back from
    its compile server through it)."""
    cache = _code_cache(opts)
    if cache is not None and cache.usable_now():
        return cache
    return False if getattr(opts, "jit_default", False) else None


def _jit(prog, opts, out, base_dir, filename, cache):
    """The JIT (the default; `--jit`): run with hot loops compiled to native code (and
    write the report, also when the program fails)."""
    from bril.interpreter.interp import run
    global _native_code_loaded
    _native_code_loaded = True
    if opts.hot:
        from bril.backend.jit import Jit
        jit = Jit(hot=opts.hot, background=opts.jit_background, cache=cache, pay_back=0,
                  shared_heap=None)
    else:
        # Sampled: the JIT comes in once the run lasts (or at once, with a profile).
        from bril.backend.jit_deferred import DeferredJit
        jit = DeferredJit(cache, background=opts.jit_background, shared_heap=None,
                          exe_key=opts.exe_key, detach=True)
    try:
        return run(prog, opts.args, out=out, base_dir=base_dir, lib_dirs=opts.lib_dirs,
                   filename=filename, jit=jit, cache=cache, tier=opts.tier or "auto")
    finally:
        if opts.jit_report is not None:
            from bril.backend.jit import report_text
            rep = jit.report()
            if opts.jit_report.endswith(".json"):
                import json
                _write_atomically(opts.jit_report, json.dumps(rep, indent=2) + "\n")
            elif opts.jit_report == "-":
                sys.stderr.write(report_text(rep))
            else:
                _write_atomically(opts.jit_report, report_text(rep))


def _json_text(prog):
    from bril.ir.printer import program_json
    return program_json(prog, sort_keys=False) + "\n"


def _write_atomically(path, text):
    from bril.ir.program import write_atomically
    write_atomically(path, text)


def _program_output():
    """A UTF-8 stream on stdout for the program's `print`s: block-buffered unless
    stdout is a terminal (even under PYTHONUNBUFFERED, which would otherwise cost a
    system call per line); the interpreter flushes it at the end and before an
    error is reported."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stdout       # not a real file (e.g. replaced in-process)
    tty = os.isatty(fd)
    return open(fd, "w", encoding="utf-8", errors=_replacing_surrogates(), newline="\n",
                buffering=1 if tty else 1 << 16, closefd=False)


def _replacing_surrogates():
    """An encoding error handler writing U+FFFD for a lone surrogate (a char
    constant "\\ud800"), as JavaScript does when it prints one."""
    import codecs
    name = "bril-replace-surrogates"
    try:
        codecs.lookup_error(name)
    except LookupError:
        replacement = "\ufffd".encode("utf-8")      # (a str replacement must be ASCII)
        codecs.register_error(name, lambda e: (replacement * (e.end - e.start), e.end))
    return name


_native_code_loaded = False


def main(argv=None, started=None):
    """brili; `started`: what `bril.cli.brili_start.try_start` returned for the command
    line, if the caller (the `brili` script) called it."""
    command = argv is None      # the console script (not a call from Python)
    argv = sys.argv[1:] if argv is None else argv
    try:
        started = started or try_start(argv)
        from bril.ir.errors import run_main
        run_main(lambda: _body(argv, started))
    except SystemExit as done:
        if _native_code_loaded or command:
            # Leave at once: without LLVM's static destructors, which would race
            # with the JIT's compiler thread if it is still busy, and without
            # freeing the program object by object (a tenth of a second for a
            # 100,000-instruction program) when the process ends anyway.
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    code = code or 1
            os._exit(code)
        raise


if __name__ == "__main__":
    main()
