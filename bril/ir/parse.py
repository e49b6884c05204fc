"""Parsing the Bril text format into a JSON program dict (`bril.ir.text.parse_program`).

The grammar lives in `bril.lark`.  The LALR parser is built once per process
(and lark caches its tables on disk between processes), then:

* a small lexer built from the grammar's own terminals feeds it tokens: one
  regular-expression match per token, where lark's general lexer spends a few
  Python calls per token; on a 100,000-instruction program that is about a
  third of the parse time;
* the JSON-building callbacks run inline as the parser reduces, so no parse
  tree is ever built.

This module imports lark; `bril.ir.text` imports it only when parsing is asked
for, so `bril2txt` and `brili` never pay for it.
"""

import json
import math
from pathlib import Path
import re

import lark
from lark.lexer import Lexer, PatternStr, Token

from .errors import BrilError
from .fastparse import set_operands
from .ops import INT_MAX, INT_MIN, OPS

GRAMMAR_FILE = Path(__file__).with_name("bril.lark")

# Character escapes of the text format, as the reference tools define them.
CHAR_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t",
                "n": "\n", "v": "\v", "f": "\f", "r": "\r"}


# --- Lexer -----------------------------------------------------------------------------

class BrilLexer(Lexer):
    """Tokens for the LALR parser, from one master regex over bril.lark's terminals.

    Relies on the two properties bril.lark documents: terminals start with
    distinct characters (so the first alternative that matches is the token),
    and only ignored terminals span lines.  Keywords (string terminals spelled
    like a name) are recognised the way lark's contextual lexer does it: a
    word becomes the keyword only where the parser state accepts the keyword.
    """

    __future_interface__ = 2  # lex(lexer_state, parser_state)

    def __init__(self, lexer_conf):
        self.ignore = frozenset(lexer_conf.ignore)
        regex_terms = [t for t in lexer_conf.terminals if not isinstance(t.pattern, PatternStr)]
        self.keywords = {}
        literals = {}
        for term in lexer_conf.terminals:
            if not isinstance(term.pattern, PatternStr):
                continue
            text = term.pattern.value
            word_of = next((r.name for r in regex_terms
                            if re.fullmatch(r.pattern.to_regexp(), text)), None)
            if word_of is not None:
                self.keywords[text] = (word_of, term.name)
            else:
                literals[text] = term.name
        self.literals = literals
        alternatives = [f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in regex_terms]
        alternatives.append("(?P<_LITERAL>" + "|".join(
            re.escape(s) for s in sorted(literals, key=len, reverse=True)) + ")")
        # A terminal matching the empty string would stall the loop in lex().
        empty = [t.name for t in regex_terms if re.fullmatch(t.pattern.to_regexp(), "")]
        if empty or not literals:
            raise ValueError(f"terminals that match the empty string: {empty or '_LITERAL'}")
        self.master = re.compile("|".join(alternatives))

    def lex(self, lexer_state, parser_state):
        text = getattr(lexer_state.text, "text", lexer_state.text)  # TextSlice since lark 1.2
        states = parser_state.parse_conf.states
        match = self.master.match
        ignore, keywords, literals = self.ignore, self.keywords, self.literals
        line, line_start, pos, end = 1, 0, 0, len(text)
        while pos < end:
            m = match(text, pos)
            if m is None:
                # What this state accepts: the terminals (upper case) among its
                # table entries, as lark itself reports them.
                accepted = {name for name in states[parser_state.position] if name.isupper()}
                raise lark.UnexpectedCharacters(text, pos, line, pos - line_start + 1,
                                                allowed=accepted, state=parser_state)
            kind = m.lastgroup
            stop = m.end()
            if kind in ignore:
                newlines = text.count("\n", pos, stop)
                if newlines:
                    line += newlines
                    line_start = text.rindex("\n", pos, stop) + 1
            else:
                value = m.group()
                if kind == "_LITERAL":
                    kind = literals[value]
                elif value in keywords:
                    word_kind, keyword = keywords[value]
                    if kind == word_kind and keyword in states[parser_state.position]:
                        kind = keyword
                yield Token(kind, value, pos, line, pos - line_start + 1)
            pos = stop


# --- Values ----------------------------------------------------------------------------

def _pos(token):
    return {"row": token.line, "col": token.column}


def _where(token):
    return (token.line, token.column)


def _number(tok, typ):
    """The JSON value of a numeric literal; the literal's spelling and the const type decide.

    A '.', 'e' or 'E' makes a float.  Anything else is an integer, kept exact
    (never through float) and limited to 64 bits.  An integer literal in a
    `float` const becomes a float: the reference keeps the JSON integer (equal
    as a JSON value), and every consumer then sees the type it expects.
    """
    text = str(tok)
    try:
        if "." in text or "e" in text or "E" in text:
            value = float(text)
            if math.isinf(value):
                raise OverflowError
            return value
        value = int(text)
        if typ == "float":
            return float(value)
    except (OverflowError, ValueError):
        raise BrilError(f"number {text} is out of range", _where(tok)) from None
    if not INT_MIN <= value <= INT_MAX:
        raise BrilError(f"integer {text} does not fit in 64 bits", _where(tok))
    return value


def _char(tok):
    """The one-character string a char literal ('a', '\\n', ...) stands for."""
    body = tok[1:-1]
    if len(body) == 2 and body[0] == "\\" and body[1] in CHAR_ESCAPES:
        return CHAR_ESCAPES[body[1]]
    if len(body) != 1:
        raise BrilError(f"char constant {tok} must be exactly one character", _where(tok))
    return body


# --- Callbacks -------------------------------------------------------------------------

class ToJSON:
    """Callbacks named after the grammar's rules, called by the parser as it reduces.

    Each gets the rule's children (tokens, and the values earlier callbacks
    returned; None for an absent optional part) and returns the JSON value.
    """

    def __init__(self, positions):
        self.positions = positions

    def start(self, items):
        prog = {"functions": [x for x in items if "instrs" in x]}
        imports = [x for x in items if "path" in x]
        if imports:
            prog["imports"] = imports
        return prog

    def import_(self, items):
        from_tok, path_tok, *names = items
        try:
            path = json.loads(path_tok)
        except ValueError:
            raise BrilError(f"bad escape in import path {path_tok}", _where(path_tok)) from None
        imp = {"path": path, "functions": names}
        if self.positions:
            imp["pos"] = _pos(from_tok)
        return imp

    def import_name(self, items):
        name, alias = items
        entry = {"name": name[1:]}
        if alias is not None:
            entry["alias"] = alias[1:]
        return entry

    def func(self, items):
        name_tok, params, typ = items[0], items[1], items[2]
        func = {"name": name_tok[1:], "instrs": items[3:]}
        if params:  # `@main()` has no `args` key, as the reference
            func["args"] = params
        if typ is not None:
            func["type"] = typ
        if self.positions:
            func["pos"] = _pos(name_tok)
        return func

    def params(self, items):
        return [p for p in items if p is not None]

    def param(self, items):
        return {"name": str(items[0]), "type": items[1]}

    def prim_type(self, items):
        return str(items[0])

    def param_type(self, items):
        return {str(items[0]): items[1]}

    def const(self, items):
        dest, typ, lit = items
        kind = lit.type
        if kind == "NUMBER":
            value = _number(lit, typ)
        elif kind == "CHAR":
            value = _char(lit)
        else:
            value = kind == "TRUE"
        instr = {"op": "const", "dest": str(dest), "value": value}
        if typ is not None:
            instr["type"] = typ
        if self.positions:
            instr["pos"] = _pos(dest)
        return instr

    def value_op(self, items):
        dest, typ = items[0], items[1]
        instr = _operation(items, 2)
        instr["dest"] = str(dest)
        if typ is not None:
            instr["type"] = typ
        if self.positions:
            instr["pos"] = _pos(dest)
        return instr

    def effect_op(self, items):
        op_tok = items[0]
        if op_tok == "const":
            raise BrilError("const needs a destination: NAME: TYPE = const VALUE;",
                            _where(op_tok))
        instr = _operation(items, 0)
        if self.positions:
            instr["pos"] = _pos(op_tok)
        return instr

    def label(self, items):
        tok = items[0]
        label = {"label": tok[1:]}
        if self.positions:
            label["pos"] = _pos(tok)
        return label


def _operation(items, at):
    """An instruction dict from the op name items[at] and its operands after it."""
    op_tok = items[at]
    op = str(op_tok)
    if op not in OPS:
        raise BrilError(f"unknown opcode {op}", _where(op_tok))
    instr = {"op": op}
    args = []
    funcs = []
    labels = []
    for i in range(at + 1, len(items)):
        tok = items[i]
        kind = tok.type
        if kind == "IDENT":
            args.append(str(tok))
        elif kind == "LABEL":
            labels.append(tok[1:])
        else:
            funcs.append(tok[1:])
    set_operands(instr, args, funcs, labels)
    return instr


# --- The parser and its errors ---------------------------------------------------------

# One parser per `positions` setting, each built on first use and kept.
_parsers = {}


def build_parser(positions=False, cache=True):
    """A new lark LALR parser for Bril text with the JSON callbacks attached.

    cache=True keeps lark's grammar analysis in a temporary file, so a new
    process (each bril2json run) loads the LALR tables instead of computing
    them; the callbacks are attached on load.
    """
    return lark.Lark(GRAMMAR_FILE.read_text(), parser="lalr", lexer=BrilLexer,
                     transformer=ToJSON(positions), maybe_placeholders=True, cache=cache)


def parser_for(positions):
    parser = _parsers.get(positions)
    if parser is None:
        parser = _parsers[positions] = build_parser(positions)
    return parser


# How syntax errors name the terminals they expected.
_TERMINAL_NAMES = {
    "IDENT": "a name", "FUNC": "a @function", "LABEL": "a .label", "NUMBER": "a number",
    "CHAR": "a char literal", "STRING": 'a "path"', "$END": "end of input",
}


def _describe_terminal(parser, name):
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        pattern = parser.get_terminal(name).pattern
    except KeyError:
        return name
    return repr(pattern.value) if isinstance(pattern, PatternStr) else name


def _syntax_error(err, text, parser):
    """A BrilError `ROW:COL: unexpected X; expected Y` from a lark UnexpectedInput."""
    if isinstance(err, lark.UnexpectedCharacters):
        found = f"character {err.char!r}"
        expected = err.allowed
    elif isinstance(err, lark.UnexpectedToken) and err.token.type != "$END":
        found = repr(str(err.token))
        expected = err.expected
    else:
        found, expected = "end of input", getattr(err, "expected", ())
    if found == "end of input":
        # Lark places the end at the last token; the reader wants the real end.
        pos = (text.count("\n") + 1, len(text) - text.rfind("\n"))
    else:
        pos = (err.line, err.column)
    names = sorted({_describe_terminal(parser, t) for t in expected or ()})
    message = f"unexpected {found}"
    if names:
        message += "; expected " + (names[0] if len(names) == 1
                                     else ", ".join(names[:-1]) + " or " + names[-1])
    return BrilError(message, pos)


def decode_source(data):
    """Text from bytes (UTF-8; a leading byte-order mark is dropped)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BrilError(f"input is not UTF-8 text ({e.reason} at byte {e.start})") from None
    return data[1:] if data.startswith("\ufeff") else data


def parse_program(text, positions=False, filename=None):
    """Parse Bril text (str, or UTF-8 bytes) into a JSON program dict.

    With `positions`, functions, instructions, labels and imports get
    `"pos": {"row", "col"}` (1-based, as the reference `bril2json -p`), and
    `"src": filename` too when a filename is given.  Errors are BrilError with
    a (row, col) position; with a filename, the message names the file.
    """
    text = decode_source(text)
    if not text.strip():
        raise BrilError("empty input: expected a Bril program")
    parser = parser_for(positions)
    try:
        prog = parser.parse(text)
    except lark.exceptions.UnexpectedInput as err:
        exc = _syntax_error(err, text, parser)
    except BrilError as err:
        exc = err
    else:
        if positions and filename is not None:
            _add_src(prog, filename)
        return prog
    if filename is not None:
        exc = BrilError(f"{exc.message} (in {filename})", exc.pos)
    raise exc


def _add_src(prog, filename):
    for imp in prog.get("imports", ()):
        imp["src"] = filename
    for func in prog["functions"]:
        func["src"] = filename
        for instr in func["instrs"]:
            instr["src"] = filename
