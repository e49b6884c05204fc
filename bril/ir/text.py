"""Bril's text format, both ways.

    parse_program(text, positions=False, filename=None) -> dict

and printing, `bril.ir.printer.format_program(prog) -> str`.

Parsing lives in `bril.ir.parse` (a lark LALR grammar, `bril.lark`), with a fast
path for well-formed programs in `bril.ir.fastparse` (which gives up, to lark, on
anything unusual and on `positions`), printing in `bril.ir.printer`.  `bril.ir.parse`
imports lark, so it is loaded only when parsing is asked for: printing (`bril2txt`)
and the interpreters never import lark.
"""


def parse_program(text, positions=False, filename=None):
    """Bril text (str, or UTF-8 bytes) to a JSON program dict.

    positions: add `"pos": {"row", "col"}` to functions, instructions, labels
    and imports, as `bril2json -p` does (with `"src": filename` if given).
    Raises BrilError(message, pos=(row, col)) for a syntax error.
    """
    if not positions:
        from .fastparse import parse as fast

        prog = fast(text)
        if prog is not None:
            return prog
    from .parse import parse_program as parse

    return parse(text, positions=positions, filename=filename)
