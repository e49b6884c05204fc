"""Errors every tool reports the same way: one line on stderr, exit code 2."""

import sys

EXIT_ERROR = 2


class BrilError(Exception):
    """A problem with a Bril program or its input, reported as `error: MESSAGE`.

    `pos` is an optional (row, col) source position; tools that know it print
    `error: ROW:COL: MESSAGE` as the text-format tools do.
    """

    def __init__(self, message, pos=None):
        super().__init__(message)
        self.message = message
        self.pos = pos

    def __str__(self):
        if self.pos is not None:
            return f"{self.pos[0]}:{self.pos[1]}: {self.message}"
        return self.message


def int_setting(name, default):
    """The integer environment variable `name`, else `default`; a BrilError (one
    line, exit code 2) if it is set to something else."""
    import os
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise BrilError(f"{name} must be an integer, not {text!r}") from None


def report(err, stream=None):
    """Print `error: ...` for a BrilError on one line."""
    stream = stream or sys.stderr
    text = " ".join(str(err).splitlines()) or type(err).__name__
    print(f"error: {text}", file=stream)


def run_main(body):
    """Run a command body, turning BrilError (and stray crashes) into one line and exit 2.

    Used by every console script so that no input produces a Python traceback.
    """
    try:
        code = body()
    except BrilError as err:
        sys.stdout.flush()
        report(err)
        sys.exit(EXIT_ERROR)
    except RecursionError:
        # The program's own recursion is reported where it runs (bril.interpreter.interp:
        # "recursion too deep (more than N nested calls)"); one reaching here is
        # the tool's, and must not be blamed on the program.
        sys.stdout.flush()
        print("error: internal error: the tool's own recursion went too deep "
              "(please report this program)", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except UnicodeEncodeError as e:     # e.g. a lone surrogate in a JSON string
        print(f"error: text cannot be written as UTF-8 ({e.reason}: "
              f"{e.object[e.start:e.end]!r})", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(1)
    sys.exit(code or 0)


def run_click(command):
    """Run a click command under run_main: usage errors become one `error:` line too."""
    import click        # only the commands built on click pay for importing it

    def body():
        try:
            return command.main(standalone_mode=False)
        except click.exceptions.Abort:
            return 1
        except click.ClickException as err:
            raise BrilError(err.format_message()) from None
    run_main(body)
