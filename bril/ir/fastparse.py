"""A fast path for parsing well-formed Bril text (`bril.ir.text.parse_program`).

The grammar (`bril.lark`) stays the definition of the text format, and lark's
parser (`bril.ir.parse`) the one that reports errors.  This module reads the
common case -- a program that parses -- in a single loop over a token list
that one regular expression makes (`re.findall`, in C), without importing
lark: about 5x faster than the LALR parser on 100,000-instruction programs.  A
short program's tokens come from a scanner in plain Python that matches exactly
what the expression matches (`_scan`): importing `re` alone (7-9 ms) takes
longer than reading such a program, and `bril2json` starts in every
`bril2json < p.bril | brili` pipeline.

Whenever anything is not exactly as the grammar wants it (a stray character,
a token out of place, an unknown op, a literal out of range, a request for
source positions), `parse` returns None and the caller runs the lark parser,
which then either gives the same program or the precise error.  So this
parser may be stricter than the grammar, never looser, and it must build
exactly the dicts `bril.ir.parse.ToJSON` builds.  It is iterative: nested types
(`ptr<ptr<...>>`) are read with a counter, not by recursion.
"""

from .ops import INT_MAX, INT_MIN, OPS

# The grammar's terminals (bril.lark), the ignored ones (blanks and comments)
# left out, and a catch-all single character for anything else (which makes
# the fast path give up).  Terminals start with distinct characters, so the
# order of the alternatives matters only for `.`: `.5` is a NUMBER, `.a` a
# LABEL; both are tried before the catch-all.  `_scan` reads the same tokens.
_IDENT = r"[A-Za-z_%][A-Za-z0-9_%.]*"
_TOKEN_ALTERNATIVES = [
    r"#[^\n]*",                                     # a comment: dropped
    _IDENT,                                         # IDENT and keywords
    "@" + _IDENT,                                   # FUNC
    r"\." + _IDENT,                                 # LABEL
    r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?",   # NUMBER
    r"'(?:\\[0abtnvfr]|[^\n])[^'\n]*'",             # CHAR
    r'"(?:[^"\\\n]|\\.)*"',                         # STRING
    r"[^ \t\f\r\n]",                                # punctuation, or anything else
]
# Texts up to this many characters are read by `_scan`, longer ones by the
# expression (`_findall`): at this size the two take about as long as importing
# `re`.
SCAN_CHARS = 50_000
_findall = None


def tokens(text):
    """The tokens of text, comments included: `_TOKEN_ALTERNATIVES`' matches, in
    order, as `re.findall` of their alternation gives them."""
    global _findall
    if len(text) <= SCAN_CHARS:
        return _scan(text)
    if _findall is None:
        import re
        _findall = re.compile("|".join(_TOKEN_ALTERNATIVES)).findall
    return _findall(text)


_BLANK = frozenset(" \t\f\r\n")
_IDENT_REST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_%.")


def _scan(text):
    """`tokens` by hand: at each position the first alternative that matches
    (leftmost, not longest, as the expression's alternation), blanks skipped.
    `\\d` is any Unicode decimal digit (`str.isdecimal`), as in the expression."""
    out = []
    append = out.append
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c in _BLANK:
            i += 1
            continue
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c in _IDENT_START:
            j = _ident_end(text, i + 1, n)
        elif (c == "@" or c == ".") and i + 1 < n and text[i + 1] in _IDENT_START:
            j = _ident_end(text, i + 2, n)
        else:
            j = _number_end(text, i, n) if c in _NUMBER_START or c.isdecimal() else None
            if j is None and c == "'":
                j = _char_end(text, i, n)
            elif j is None and c == '"':
                j = _string_end(text, i, n)
            if j is None:
                j = i + 1               # (the catch-all: one character)
        append(text[i:j])
        i = j
    return out


def _ident_end(text, j, n):
    rest = _IDENT_REST
    while j < n and text[j] in rest:
        j += 1
    return j


def _digits_end(text, j, n):
    while j < n and text[j].isdecimal():
        j += 1
    return j


def _number_end(text, i, n):
    """The end of `[+-]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?` at i, or None."""
    j = i + 1 if text[i] in "+-" else i
    k = _digits_end(text, j, n)
    if k > j:                           # \d+ \.? \d*
        if k < n and text[k] == ".":
            k = _digits_end(text, k + 1, n)
    elif j < n and text[j] == ".":      # \. \d+
        k = _digits_end(text, j + 1, n)
        if k == j + 1:
            return None
    else:
        return None
    if k < n and text[k] in "eE":       # (an exponent only if whole)
        e = k + 1
        if e < n and text[e] in "+-":
            e += 1
        f = _digits_end(text, e, n)
        if f > e:
            k = f
    return k


def _char_end(text, i, n):
    """The end of `'(?:\\\\[0abtnvfr]|[^\\n])[^'\\n]*'` at i (a quote), or None: the
    escape pair is tried first, then any one character."""
    if i + 2 < n and text[i + 1] == "\\" and text[i + 2] in "0abtnvfr":
        j = _quote_end(text, i + 3, n)
        if j is not None:
            return j
    if i + 1 < n and text[i + 1] != "\n":
        return _quote_end(text, i + 2, n)
    return None


def _quote_end(text, j, n):
    """Past the first `'` at or after j, if no newline comes first; else None."""
    while j < n:
        c = text[j]
        if c == "'":
            return j + 1
        if c == "\n":
            return None
        j += 1
    return None


def _string_end(text, i, n):
    """The end of `"(?:[^"\\\\\\n]|\\\\.)*"` at i (a double quote), or None."""
    j = i + 1
    while j < n:
        c = text[j]
        if c == '"':
            return j + 1
        if c == "\n":
            return None
        if c == "\\":
            if j + 1 >= n or text[j + 1] == "\n":
                return None
            j += 2
        else:
            j += 1
    return None

_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_%")
_NUMBER_START = frozenset("0123456789+-.")
_CHAR_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t",
                 "n": "\n", "v": "\v", "f": "\f", "r": "\r"}
# Characters a word may start with: the grammar's keywords are words too.
_PUNCT = frozenset("{}():;=<>,")


class _GiveUp(Exception):
    """Not a plain well-formed program: let the lark parser handle it."""


def _is_word(tok):
    return tok[0] in _IDENT_START


def _is_func(tok):
    return tok[0] == "@" and len(tok) > 1


def _is_label(tok):
    return tok[0] == "." and len(tok) > 1 and tok[1] in _IDENT_START


def _type(toks, i):
    """(JSON type, next index) for a type at toks[i]: NAME or NAME<type>."""
    names = []
    while True:
        tok = toks[i]
        if not _is_word(tok):
            raise _GiveUp
        if toks[i + 1] != "<":
            break
        names.append(tok)
        i += 2
    typ = tok
    i += 1
    for name in reversed(names):
        if toks[i] != ">":
            raise _GiveUp
        typ = {name: typ}
        i += 1
    return typ, i


def _literal(tok, typ):
    """A const's value, as bril.ir.parse's _number/_char/TRUE/FALSE give it."""
    c = tok[0]
    if c in _NUMBER_START:
        if c == "." and not (len(tok) > 1 and tok[1].isdigit()):
            raise _GiveUp
        if "." in tok or "e" in tok or "E" in tok:
            value = float(tok)
            if value in (float("inf"), float("-inf")):
                raise _GiveUp
            return value
        value = int(tok)
        if typ == "float":
            return float(value)
        if not INT_MIN <= value <= INT_MAX:
            raise _GiveUp
        return value
    if c == "'":
        if len(tok) < 3 or tok[-1] != "'":
            raise _GiveUp
        body = tok[1:-1]
        if len(body) == 2 and body[0] == "\\" and body[1] in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[body[1]]
        if len(body) != 1:
            raise _GiveUp
        return body
    if tok == "true":
        return True
    if tok == "false":
        return False
    raise _GiveUp


def _operands(toks, i, instr):
    """Read operands up to the `;` into instr; the index after the `;`."""
    args = funcs = labels = None
    while True:
        tok = toks[i]
        i += 1
        c = tok[0]
        if c in _IDENT_START:
            if args is None:
                args = [tok]
            else:
                args.append(tok)
        elif tok == ";":
            break
        elif c == "@" and len(tok) > 1:
            if funcs is None:
                funcs = [tok[1:]]
            else:
                funcs.append(tok[1:])
        elif c == "." and len(tok) > 1 and tok[1] in _IDENT_START:
            if labels is None:
                labels = [tok[1:]]
            else:
                labels.append(tok[1:])
        else:
            raise _GiveUp
    set_operands(instr, args, funcs, labels)
    return i


def set_operands(instr, args, funcs, labels):
    """The operand lists of an instruction, as bril2json writes them (empty ones left out)."""
    if args:
        instr["args"] = args
    if funcs:
        instr["funcs"] = funcs
    if labels:
        instr["labels"] = labels


def _body(toks, i):
    """(instruction list, index after the closing `}`)."""
    instrs = []
    append = instrs.append
    ops = OPS
    while True:
        tok = toks[i]
        c = tok[0]
        if c in _IDENT_START:
            nxt = toks[i + 1]
            if nxt == ":" or nxt == "=":
                typ = None
                if nxt == ":":
                    after = toks[i + 3]
                    if after == "=" and toks[i + 2][0] in _IDENT_START:    # the usual `x: int =`
                        typ = toks[i + 2]
                        j = i + 4
                    else:
                        typ, j = _type(toks, i + 2)
                        if toks[j] != "=":
                            raise _GiveUp
                        j += 1
                else:
                    j = i + 2
                op = toks[j]
                if op == "const":
                    value = _literal(toks[j + 1], typ)
                    if toks[j + 2] != ";":
                        raise _GiveUp
                    instr = {"op": "const", "dest": tok, "value": value}
                    if typ is not None:
                        instr["type"] = typ
                    i = j + 3
                else:
                    if op not in ops:
                        raise _GiveUp
                    instr = {"op": op}
                    i = _operands(toks, j + 1, instr)
                    instr["dest"] = tok
                    if typ is not None:
                        instr["type"] = typ
                append(instr)
            else:
                if tok not in ops or tok == "const":
                    raise _GiveUp
                instr = {"op": tok}
                i = _operands(toks, i + 1, instr)
                append(instr)
        elif c == ".":
            if len(tok) < 2 or tok[1] not in _IDENT_START or toks[i + 1] != ":":
                raise _GiveUp
            append({"label": tok[1:]})
            i += 2
        elif tok == "}":
            return instrs, i + 1
        else:
            raise _GiveUp


def _function(toks, i):
    """(function dict, next index) for a function whose name is toks[i]."""
    name = toks[i][1:]
    i += 1
    params = None
    if toks[i] == "(":
        params = []
        i += 1
        if toks[i] != ")":
            while True:
                pname = toks[i]
                if not _is_word(pname) or toks[i + 1] != ":":
                    raise _GiveUp
                ptype, i = _type(toks, i + 2)
                params.append({"name": pname, "type": ptype})
                if toks[i] == ",":
                    i += 1
                elif toks[i] == ")":
                    break
                else:
                    raise _GiveUp
        i += 1
    typ = None
    if toks[i] == ":":
        typ, i = _type(toks, i + 1)
    if toks[i] != "{":
        raise _GiveUp
    instrs, i = _body(toks, i + 1)
    func = {"name": name, "instrs": instrs}
    if params:
        func["args"] = params
    if typ is not None:
        func["type"] = typ
    return func, i


def _import(toks, i):
    """(import dict, next index) for `from "path" import @f, @g as @h;` at toks[i]."""
    import json
    path_tok = toks[i + 1]
    if path_tok[0] != '"' or len(path_tok) < 2 or path_tok[-1] != '"' or toks[i + 2] != "import":
        raise _GiveUp
    try:
        path = json.loads(path_tok)
    except ValueError:
        raise _GiveUp from None
    names = []
    i += 3
    while True:
        tok = toks[i]
        if not _is_func(tok):
            raise _GiveUp
        entry = {"name": tok[1:]}
        i += 1
        if toks[i] == "as":
            if not _is_func(toks[i + 1]):
                raise _GiveUp
            entry["alias"] = toks[i + 1][1:]
            i += 2
        names.append(entry)
        if toks[i] == ",":
            i += 1
        elif toks[i] == ";":
            return {"path": path, "functions": names}, i + 1
        else:
            raise _GiveUp


def parse(text):
    """The JSON program dict of Bril text (str, or UTF-8 bytes), or None if the
    text is anything but a plain well-formed program (the lark parser then
    decides, and reports the error if there is one)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None
    toks = tokens(text)
    if "#" in text:
        toks = [t for t in toks if t[0] != "#"]
    n = len(toks)
    toks.append("")          # sentinels: a truncated program reads "" and gives up
    toks.append("")
    toks.append("")
    toks.append("")
    functions, imports = [], []
    i = 0
    try:
        while i < n:
            tok = toks[i]
            if _is_func(tok):
                func, i = _function(toks, i)
                functions.append(func)
            elif tok == "from":
                imp, i = _import(toks, i)
                imports.append(imp)
            else:
                return None
        if i != n:
            return None
    except (_GiveUp, IndexError, ValueError, OverflowError):
        return None
    prog = {"functions": functions}
    if imports:
        prog["imports"] = imports
    return prog
