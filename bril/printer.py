"""Printing a JSON program dict in the Bril text format (`bril.text.format_program`).

The output is what the reference `bril2txt` prints, byte for byte, for every
program it can print; the import extension, which it does not print, comes
out as `from "lib.json" import @f, @g as @h;` lines before the functions.
"""

import json

# Characters a char literal writes as an escape (the parser's CHAR_ESCAPES, reversed).
_CHAR_ESCAPED = {"\0": "\\0", "\a": "\\a", "\b": "\\b", "\t": "\\t",
                 "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r"}


def format_type(typ):
    """`int`, `ptr<int>`, `ptr<ptr<bool>>`, ... from a JSON type."""
    if isinstance(typ, dict):
        (name, inner), = typ.items()
        return f"{name}<{format_type(inner)}>"
    return typ


def format_literal(value):
    """A const's value as the text format writes it."""
    if isinstance(value, str):  # a char: the only string-valued literal
        return "'" + _CHAR_ESCAPED.get(value, value) + "'"
    # Python's spelling, lowercased, as the reference prints it:
    # True -> true, 4.0 -> 4.0, 1e16 -> 1e+16.
    return str(value).lower()


def format_instr(instr):
    """One instruction, without indentation or the final `;`."""
    op = instr["op"]
    if op == "const":
        rhs = "const " + format_literal(instr.get("value"))
    else:
        parts = [op]
        funcs = instr.get("funcs")
        if funcs:
            parts.extend("@" + f for f in funcs)
        args = instr.get("args")
        if args:
            parts.extend(args)
        labels = instr.get("labels")
        if labels:
            parts.extend("." + label for label in labels)
        rhs = " ".join(parts)
    if "dest" not in instr:
        return rhs
    if "type" in instr:
        return f"{instr['dest']}: {format_type(instr['type'])} = {rhs}"
    return f"{instr['dest']} = {rhs}"


def format_import(imp):
    names = ", ".join("@" + f["name"] + (" as @" + f["alias"] if "alias" in f else "")
                      for f in imp["functions"])
    return f"from {json.dumps(imp['path'], ensure_ascii=False)} import {names};"


def _format_func(func, lines):
    header = "@" + func["name"]
    args = func.get("args")
    if args:
        header += "(" + ", ".join(f"{a['name']}: {format_type(a['type'])}"
                                  for a in args) + ")"
    typ = func.get("type", "void")
    if typ != "void":  # the reference prints no return type for `void`
        header += ": " + format_type(typ)
    lines.append(header + " {")
    for instr in func["instrs"]:
        if "op" in instr:  # an instruction, as bril.program reads it
            lines.append("  " + format_instr(instr) + ";")
        else:
            lines.append("." + instr["label"] + ":")
    lines.append("}")


def format_program(prog):
    """The text of a JSON program dict: imports first, then each function.

    Fields the text format has no place for (positions, unknown extras) are
    left out.
    """
    lines = [format_import(imp) for imp in prog.get("imports", ())]
    for func in prog["functions"]:
        _format_func(func, lines)
    return "".join(line + "\n" for line in lines)
