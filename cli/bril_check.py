"""`bril-check`: report every type and well-formedness error of a Bril program.

    bril-check [-f FILE | --text] [FILE]

The rules are `bril.ir.rules`, the ones every tool's load-time check applies
(`brili`, `bril-opt`... stop at the first shape problem; this reports them all,
and the type rules too).  Arguments are parsed by hand and lark is imported only
for Bril text, so a check costs little more than reading the JSON.
"""

import sys

from bril.cli import read_input

USAGE = """\
usage: bril-check [-f FILE | --text] [--name NAME]

Check a Bril program (JSON on standard input by default) against the shape,
type and name rules of Bril and its extensions, and report every problem, one
per line: FILE:LINE:COL: error: MESSAGE when positions are known (Bril text
read with -f or --text, or JSON from `bril2json -p`), FILE: error: @f,
instruction N: MESSAGE otherwise.  Exit status 0 if the program is well formed,
1 if it is not, 2 if it cannot be read.

options:
  -f FILE      read the program from FILE (.bril text, or .json)
  --text       read Bril text (not JSON) from standard input
  --name NAME  the file name shown in messages for standard input (default: -)
  -h, --help   show this help

bril-check takes no plug-ins: passes (bril-opt --load FILE.py NAME, module:function
specs, the `bril.passes` entry points) are checked by running their output
through it, e.g. `bril2json < p.bril | bril-opt --load mypass.py dse | bril-check`.
"""


def parse_args(argv):
    from bril.ir.errors import BrilError
    opts = {"file": None, "text": False, "name": None, "help": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            opts["help"] = True
        elif a == "--text":
            opts["text"] = True
        elif a in ("-f", "--name"):
            if i + 1 >= len(argv):
                raise BrilError(f"option {a} needs an argument")
            i += 1
            opts["file" if a == "-f" else "name"] = argv[i]
        elif a.startswith("-") and a != "-":
            raise BrilError(f"unknown option {a} (see bril-check --help)")
        elif opts["file"] is None:
            opts["file"] = a
        else:
            raise BrilError(f"unexpected argument {a}")
        i += 1
    return opts


def read(opts):
    """(program or None, list of problems found while reading it)."""
    from bril.ir.errors import BrilError
    from bril.ir.program import parse_json
    from bril.ir.rules import Problem
    data, as_text = read_input(opts["file"], opts["text"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BrilError(f"input is not UTF-8 text ({e.reason} at byte {e.start})")
    if as_text:
        from bril.ir.text import parse_program
        try:
            return parse_program(text, positions=True), []
        except BrilError as e:
            return None, [Problem(e.message, e.pos)]
    if not text.strip():
        return None, [Problem("empty input: expected a Bril JSON program")]
    try:
        return parse_json(text), []
    except RecursionError:
        return None, [Problem("invalid JSON: nested too deeply")]
    except ValueError as e:
        if hasattr(e, "lineno"):
            return None, [Problem(f"invalid JSON: {e.msg}", (e.lineno, e.colno))]
        return None, [Problem(f"invalid JSON: {e}")]


def format_problem(name, p):
    if p.pos is not None:
        return f"{name}:{p.pos[0]}:{p.pos[1]}: error: {p.message}"
    return f"{name}: error: {p.text()}"


def _body(argv):
    opts = parse_args(argv)
    if opts["help"]:
        sys.stdout.write(USAGE)
        return 0
    prog, problems = read(opts)
    if prog is not None:
        from bril.ir.rules import problems as check
        problems = check(prog)
    name = opts["name"] or opts["file"] or "-"
    if problems:
        sys.stderr.write("".join(format_problem(name, p) + "\n" for p in problems))
        return 1
    return 0


def main(argv=None):
    from bril.ir.errors import run_main
    run_main(lambda: _body(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
