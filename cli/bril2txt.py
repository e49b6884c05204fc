"""`bril2txt`: a Bril JSON program on stdin, the text format on stdout."""

import sys

import click

from bril.cli import PLUGIN_HELP
from bril.ir.errors import run_click


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               epilog=PLUGIN_HELP)
def bril2txt():
    """Read a Bril program as JSON on stdin; write it in the text format on stdout.

    Malformed JSON or an unknown op is one line, `error: ...`, with exit code 2.
    """
    # Neither module imports lark: printing needs no parser.
    from bril.ir.program import load_program
    from bril.ir.printer import format_program

    prog = load_program(sys.stdin.buffer.read())
    sys.stdout.buffer.write(format_program(prog).encode("utf-8"))


def main():
    from bril.cli import no_cycle_collection
    with no_cycle_collection():
        run_click(bril2txt)


if __name__ == "__main__":
    main()
