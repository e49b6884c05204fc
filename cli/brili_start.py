"""`brili`'s command line and first steps: what a warm run does before it becomes its
program's executable (`bril.warm_start`), imported before anything else of the
command (`cli/bin/brili`).  The rest of `brili`, its `--help` text included, is
`bril.cli.brili`.
"""

import os
import sys

from bril.cli import read_input
from bril.warm_start import (after_run_builds, default_directory, enabled_by_environment,
                             execute, exe_key, find_executable, too_big)


class Options:
    """What a brili command line asks for (`parse_args`)."""

    def __init__(self):
        self.profile = False
        self.file = None
        self.text = False
        self.lib_dirs = []
        self.dump = False
        self.help = False
        self.trace = None
        self.hot = None
        self.trace_report = None
        self.trace_no_opt = False
        self.trace_counts = False
        self.trace_specialize = False
        self.trace_passes = []
        self.loads = []
        self.jit = None                 # None: the default (on unless BRIL_JIT=0)
        self.jit_default = False        # (the JIT is on because it is the default)
        self.jit_background = False
        self.jit_report = None
        self.tier = None
        self.cache = True
        self.cache_command = None
        self.args = []
        self.write_profile = None
        self.exe_key = None             # (bril.backend.program_exe: found before the run)


# Flags: option -> (attribute, value it sets).
FLAGS = {
    "-h": ("help", True), "--help": ("help", True), "--text": ("text", True),
    "--dump-py": ("dump", True), "--trace-no-opt": ("trace_no_opt", True),
    "--trace-counts": ("trace_counts", True), "--trace-specialize": ("trace_specialize", True),
    "--jit": ("jit", True), "--no-jit": ("jit", False),
    "--jit-background": ("jit_background", True),
    "--no-cache": ("cache", False),
    "--cache-info": ("cache_command", "--cache-info"),
    "--cache-clear": ("cache_command", "--cache-clear"),
}


def _usage_error(message):
    """The BrilError for a bad command line (imported only then: a warm run needs no
    error reporting)."""
    from bril.ir.errors import BrilError
    return BrilError(message)


def _hot(text):
    n = int(text) if text.isdigit() else 0
    if n < 1:
        raise _usage_error(f"--hot needs a positive whole number; got {text}")
    return n


def _tier(text):
    if text not in ("auto", "cold", "fast"):
        raise _usage_error(f"--tier must be auto, cold or fast; got {text}")
    return text


# Options taking a value: option -> (attribute, how the text becomes the value).
VALUED = {"-f": ("file", str), "--trace": ("trace", str), "--trace-report": ("trace_report", str),
          "--jit-report": ("jit_report", str), "--hot": ("hot", _hot), "--tier": ("tier", _tier),
          "--write-profile": ("write_profile", str)}


def parse_args(argv):
    opts = Options()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            opts.args.extend(argv[i + 1:])
            break
        if a == "-p" and not opts.profile:
            opts.profile = True         # (as in the reference, a second -p is an argument)
        elif a in FLAGS:
            setattr(opts, *FLAGS[a])
        elif a == "--trace-pass" or a == "--load":
            need = 1 if a == "--trace-pass" else 2
            if i + need >= len(argv):
                needs = "an argument" if need == 1 else "FILE.py NAME"
                raise _usage_error(f"option {a} needs {needs}")
            if a == "--load":
                opts.loads.append((argv[i + 1], argv[i + 2]))
            else:
                opts.trace_passes.append(argv[i + 1])
            i += need
        elif a in VALUED or a == "-L":
            if i + 1 >= len(argv):
                raise _usage_error(f"option {a} needs an argument")
            i += 1
            if a == "-L":
                opts.lib_dirs.append(argv[i])
            else:
                name, convert = VALUED[a]
                setattr(opts, name, convert(argv[i]))
        elif a.startswith("-L") and len(a) > 2:
            opts.lib_dirs.append(a[2:])
        elif a.startswith("--lib="):
            opts.lib_dirs.append(a[len("--lib="):])
        else:
            opts.args.append(a)
        i += 1
    if (opts.trace_passes or opts.loads) and opts.trace is None:
        raise _usage_error("--trace-pass and --load need --trace")
    if opts.jit and opts.trace is not None:
        raise _usage_error("--jit and --trace cannot be used together")
    if opts.write_profile is not None:
        if opts.trace is not None or opts.jit:
            raise _usage_error("--write-profile cannot be used with --trace or --jit")
        # (the first tier sees every call: the profile's types and values)
        opts.jit = False
        opts.tier = opts.tier or "cold"
    if (opts.jit_report is not None or opts.jit_background) and opts.jit is False:
        raise _usage_error("--jit-report and --jit-background need the JIT (not --no-jit)")
    if opts.jit is None:
        opts.jit = opts.trace is None and os.environ.get("BRIL_JIT", "1") not in (
            "0", "no", "off", "false")
        opts.jit_default = True
    return opts


def executable_key(opts, read):
    """The key of the program's whole executable, which this process becomes at once
    if the code cache has it; None if this run is not one the executable can be (a
    flag asks for the interpreter's own work).  `read`: what `read_input` returned."""
    if not (opts.jit and opts.cache and not opts.hot and opts.jit_report is None
            and not opts.jit_background and opts.tier is None and not opts.dump):
        return None
    if not enabled_by_environment() or os.environ.get("BRIL_CHECK_FACTS"):
        return None
    if too_big(*read):
        return None                 # (too big to be compiled whole: not hashed)
    key = exe_key(*read)
    path = find_executable(default_directory(), key)
    if path is not None:
        wait_if_asked(_default_cache)   # (before: this process becomes it)
        execute(path, opts.profile, opts.args)
    return key


def _default_cache():
    from bril.cache.codecache import CodeCache
    return CodeCache()


def wait_if_asked(cache):
    """With BRIL_JIT_PRECOMPILE=wait, wait for every build in flight in the code cache
    (`cache`, or a function making it; None for none), this run's or another run's (a
    script's next command then finds what they build), whatever engine ran the
    program."""
    if after_run_builds() == "wait":
        cache = cache() if callable(cache) else cache
        if cache is not None:
            from bril.cache.buildlocks import wait_for_builds
            wait_for_builds(cache)


def start(argv):
    """(options, what the program was read as: `read_input`'s answer): brili's first
    steps.  A warm run becomes the program's executable here and never returns.
    (None for what was read with --help or a cache command.)"""
    opts = parse_args(argv)
    if opts.help or opts.cache_command is not None:
        return opts, None
    read = read_input(opts.file, opts.text, meanwhile=_import_for_the_run)
    opts.exe_key = executable_key(opts, read)
    return opts, read


def try_start(argv):
    """`start` before anything reports errors (a warm run needs nothing more): None if
    it fails before the program's bytes are read -- a bad command line, a file that
    cannot be read -- and `bril.cli.brili` then takes the same steps again, where
    errors are reported; the exception if it fails after, which `bril.cli.brili`
    reports."""
    try:
        opts = parse_args(argv)
        if opts.file is not None:
            with open(opts.file, "rb"):
                pass
    except Exception:
        return None
    except KeyboardInterrupt:
        sys.exit(1)
    try:
        return start(argv)
    except KeyboardInterrupt:
        sys.exit(1)
    except Exception as e:      # (after the input was read: `bril.cli.brili` reports it)
        return e


def _import_for_the_run():
    """What running the program needs, imported while its input is still coming."""
    import bril.interpreter.interp      # noqa: F401 (and the cold tier's modules)
    import bril.interpreter.cold        # noqa: F401
