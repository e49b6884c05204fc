"""`bril2json`: Bril text on stdin, the JSON program on stdout."""

import sys


def convert(positions=False):
    """Read a Bril program in the text format on stdin; write its JSON on stdout."""
    from bril.ir.printer import program_json
    from bril.ir.text import parse_program

    from bril.cli import stdin_bytes
    prog = parse_program(stdin_bytes(), positions=positions)
    # The reference tool's layout: two-space indent, sorted keys (program_json
    # writes exactly json.dumps(prog, indent=2, sort_keys=True), faster).
    sys.stdout.write(program_json(prog) + "\n")


def plain(argv):
    """The work of `bril2json` and `bril2json -p` (a pipeline's forms), else None."""
    if argv in ([], ["-p"]):
        return lambda: convert(positions=bool(argv))
    return None


def command():
    import click
    from bril.cli import PLUGIN_HELP

    @click.command(context_settings={"help_option_names": ["-h", "--help"]},
                   epilog=PLUGIN_HELP)
    @click.option("-p", "positions", is_flag=True,
                  help='Add source positions ("pos": {"row", "col"}) to functions, '
                       "instructions, labels and imports.")
    def bril2json(positions):
        """Read a Bril program in the text format on stdin; write its JSON on stdout.

        A syntax error is one line, `error: ROW:COL: ...`, with exit code 2.
        """
        convert(positions)
    return bril2json


def main():
    from bril.cli import run_plain_or_click
    run_plain_or_click(plain, command)


if __name__ == "__main__":
    main()
