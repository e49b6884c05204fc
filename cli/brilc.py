"""`brilc`: compile a Bril program ahead of time to native code (through LLVM).

    brilc [-o OUT] [--emit-llvm | -c] [-O LEVEL] [--no-count] [-f FILE | --text] [-L DIR]...

Reads the program as JSON from standard input (or FILE: `.bril` text or `.json`)
and writes, by default, an executable linked with the run-time library
(bril/native_runtime/brilrt.c, compiled once with the system C compiler and cached).
The executable takes @main's arguments on its command line, prints exactly
as `brili` does, fails with `error: ...` and exit status 2 where `brili`
would, and with `-p` prints `total_dyn_inst: N` on stderr.

Errors in brilc itself (a bad program, an unsupported feature, no C
compiler) are one line `error: ...` with exit status 2.
"""

import argparse
import os
import sys

USAGE = """\
usage: brilc [-o OUT] [--emit-llvm | -c] [-O LEVEL] [--no-count] [-f FILE | --text] [-L DIR]...
             [--profile FILE]

Compile the Bril program read as JSON from standard input to native code.

options:
  -o OUT        output file (default: an executable `a.out`, or FILE's name without
                its suffix; `-c`: OUT.o; `--emit-llvm`: standard output)
  --emit-llvm   write LLVM IR text (optimised at the -O level) instead
  -c            write an object file instead (link it with the run-time library,
                the object `python -m bril.native_runtime.nativert` prints the path of)
  -O LEVEL      optimisation level 0-3 (default 2)
  --no-count    leave out the dynamic instruction count (the executable then
                refuses -p); slightly faster code
  -f FILE       read the program from FILE (.bril text, or .json)
  --text        read Bril text (not JSON) from standard input
  -L DIR        also look for imported files in DIR (repeatable)
  --profile FILE
                a type profile (brili --write-profile FILE, from a run on any
                input): each function gets a variant per set of types its `any`
                parameters held (those and the `any` variables that follow from
                them unboxed), and one for the values nearly every call passed
                (constants there); its entry checks the arguments and runs the
                generic code when they differ; and a loop, a copy per set of
                types its `any` variables held at its header, entered when the
                values arriving there have them
  -h, --help    show this help

Bril passes run before brilc: bril2json < p.bril | bril-opt -O SPEC... | brilc.
Plug-in passes: bril-opt --load FILE.py NAME, module:function or
file.py:function specs, passes installed in the `bril.passes` entry-point
group (also in brili --trace --trace-pass SPEC and bril-bench runs).
"""


def _parser():
    from bril.ir.errors import BrilError

    class Parser(argparse.ArgumentParser):
        def error(self, message):        # one line, exit 2, as every tool here
            raise BrilError(message)

    p = Parser(prog="brilc", add_help=False)
    p.add_argument("-o", dest="out")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--emit-llvm", action="store_true")
    mode.add_argument("-c", dest="object", action="store_true")
    p.add_argument("-O", dest="level", default="2", choices=["0", "1", "2", "3"])
    p.add_argument("--no-count", action="store_true")
    p.add_argument("-f", dest="file")
    p.add_argument("--text", action="store_true")
    p.add_argument("-L", dest="lib_dirs", action="append", default=[])
    p.add_argument("--profile")
    p.add_argument("-h", "--help", action="store_true")
    return p


def read_program(file, text):
    """(program dict, filename or None) from FILE or standard input."""
    from bril.ir.program import read_program as read
    return read(file, text)


def default_output(opts):
    if opts.out is not None:
        return opts.out
    stem = os.path.splitext(os.path.basename(opts.file))[0] if opts.file else None
    if opts.object:
        return (stem or "a") + ".o"
    return stem or "a.out"


def _body(argv):
    from bril.ir.errors import BrilError
    opts = _parser().parse_args(argv)
    if opts.help:
        sys.stdout.write(USAGE)
        return 0
    try:
        return _compile(opts)
    except (BrilError, RecursionError, KeyboardInterrupt):
        raise
    except Exception as e:      # a bug here must still be one line, never a traceback
        raise BrilError(f"internal error in brilc: {type(e).__name__}: {e}") from None


def _compile(opts):
    prog, filename = read_program(opts.file, opts.text)
    from bril.backend import llvm_lower, native
    profile = None
    if opts.profile is not None:
        from bril.interpreter import type_profile
        profile = type_profile.read(opts.profile)
    base_dir = os.path.dirname(os.path.abspath(filename)) if filename else None
    module = llvm_lower.lower_program(prog, base_dir=base_dir, lib_dirs=opts.lib_dirs,
                                      filename=filename, count=not opts.no_count,
                                      profile=profile)
    level = int(opts.level)
    light = native.light_for(prog)
    if opts.emit_llvm:
        text = native.emit_llvm(module, level, light=light)
        if opts.out is None or opts.out == "-":
            sys.stdout.write(text)
        else:
            _write(opts.out, text.encode())
        return 0
    out = default_output(opts)
    if opts.object:
        _write(out, native.emit_object(module, level, light=light))
        return 0
    native.build_executable(module, out, level, light=light)
    return 0


def _write(path, data):
    from bril.ir.program import write_atomically
    write_atomically(path, data)


def main(argv=None):
    from bril.ir.errors import run_main
    from bril.cli import no_cycle_collection
    argv = sys.argv[1:] if argv is None else argv
    with no_cycle_collection():
        run_main(lambda: _body(argv))


if __name__ == "__main__":
    main()
