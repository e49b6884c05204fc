"""`bril2txt`: a Bril JSON program on stdin, the text format on stdout."""

import sys


def convert():
    """Read a Bril program as JSON on stdin; write it in the text format on stdout."""
    # Neither module imports lark: printing needs no parser.
    from bril.ir.program import load_program
    from bril.ir.printer import format_program

    from bril.cli import stdin_bytes
    prog = load_program(stdin_bytes())
    sys.stdout.buffer.write(format_program(prog).encode("utf-8"))


def plain(argv):
    """The work of `bril2txt` with no argument (a pipeline's form), else None."""
    return convert if not argv else None


def command():
    import click
    from bril.cli import PLUGIN_HELP

    @click.command(context_settings={"help_option_names": ["-h", "--help"]},
                   epilog=PLUGIN_HELP)
    def bril2txt():
        """Read a Bril program as JSON on stdin; write it in the text format on stdout.

        Malformed JSON or an unknown op is one line, `error: ...`, with exit code 2.
        """
        convert()
    return bril2txt


def main():
    from bril.cli import run_plain_or_click
    run_plain_or_click(plain, command)


if __name__ == "__main__":
    main()
