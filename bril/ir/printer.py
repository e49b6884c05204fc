"""Printing a JSON program dict in the Bril text format (`bril.ir.text.format_program`).

The output is what the reference `bril2txt` prints, byte for byte, for every
program it can print; the import extension, which it does not print, comes
out as `from "lib.json" import @f, @g as @h;` lines before the functions.
"""

# Characters a char literal writes as an escape (the parser's CHAR_ESCAPES, reversed).
_CHAR_ESCAPED = {"\0": "\\0", "\a": "\\a", "\b": "\\b", "\t": "\\t",
                 "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r"}


def format_type(typ):
    """`int`, `ptr<int>`, `ptr<ptr<bool>>`, ... from a JSON type (a loop over the
    nesting, however deep)."""
    opened = []
    while isinstance(typ, dict):
        (name, typ), = typ.items()
        opened.append(name)
    if not opened:
        return typ
    return "".join(f"{name}<" for name in opened) + str(typ) + ">" * len(opened)


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
    import json
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
        if "op" in instr:  # an instruction, as bril.ir.program reads it
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


# --- JSON -------------------------------------------------------------------------------

def program_json(prog, sort_keys=True):
    """`json.dumps(prog, indent=2, sort_keys=sort_keys)`, byte for byte, in a
    fraction of its time on large programs.

    With an indent, `json.dumps` runs its pure-Python encoder over every value;
    here each instruction is written directly (strings through the C string
    encoder, one plan of keys per set of keys) and only unusual values (nested
    types, floats, extra fields) go through `json.dumps`, indented to their
    depth.  The pieces are joined once at the end; no recursion on the
    program's size."""
    try:
        from _json import encode_basestring_ascii as enc    # (no `json`: it imports `re`)
    except ImportError:
        from json.encoder import encode_basestring_ascii as enc

    def dumps(v, **kw):
        from json import dumps
        return dumps(v, **kw)

    def generic(v, ind):
        return dumps(v, indent=2, sort_keys=sort_keys).replace("\n", "\n" + ind)

    def str_keys(d):
        return type(d) is dict and all(type(k) is str for k in d)

    def order(d):
        return sorted(d) if sort_keys else list(d)

    if not str_keys(prog) or not prog:
        return dumps(prog, indent=2, sort_keys=sort_keys)
    out = ["{"]
    for n, key in enumerate(order(prog)):
        value = prog[key]
        out.append(("\n  " if n == 0 else ",\n  ") + enc(key) + ": ")
        if key != "functions" or type(value) is not list or not value:
            out.append(generic(value, "  "))
            continue
        out.append("[")
        for m, func in enumerate(value):
            out.append("\n    " if m == 0 else ",\n    ")
            if not str_keys(func) or not func:
                out.append(generic(func, "    "))
                continue
            out.append("{")
            for j, fkey in enumerate(order(func)):
                fvalue = func[fkey]
                out.append(("\n      " if j == 0 else ",\n      ") + enc(fkey) + ": ")
                if fkey != "instrs" or type(fvalue) is not list or not fvalue:
                    out.append(_field_json(fvalue, "      ", enc, generic, order))
                    continue
                _instrs_json(fvalue, out, enc, generic, sort_keys)
            out.append("\n    }")
        out.append("\n  ]")
    out.append("\n}")
    return "".join(out)


def _value_json(v, ind, enc, generic):
    """`generic(v, ind)` of a leaf value: a string, an int, a bool, a finite float or
    a type (`{"ptr": ...}` down to a string, however deep: a loop) directly, as
    `json.dumps` writes them; anything else by `generic` (which imports `json`, and
    with it `re`: most of a short bril2json run)."""
    t = type(v)
    if t is str:
        return enc(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is float and v - v == 0:           # (finite: not inf or NaN)
        return float.__repr__(v)
    keys = []
    while type(v) is dict and len(v) == 1:
        (k, v), = v.items()
        if type(k) is not str:
            break
        keys.append(k)
    else:
        if keys and type(v) is str:
            opens = "".join("{\n" + ind + "  " * (depth + 1) + enc(k) + ": "
                            for depth, k in enumerate(keys))
            closes = "".join("\n" + ind + "  " * depth + "}" for depth in range(len(keys) - 1, -1, -1))
            return opens + enc(v) + closes
    return None


def _field_json(v, ind, enc, generic, order):
    """A function's field other than its instructions: its name and type and its
    parameters (dicts of such values) directly, anything else by `generic`."""
    if type(v) is list and v and all(type(p) is dict and p and all(type(k) is str for k in p)
                                     for p in v):
        inner = ind + "  "
        keys = ",\n" + inner + "  "
        items = []
        for p in v:
            fields = [(k, _value_json(p[k], inner + "  ", enc, generic)) for k in order(p)]
            if any(x is None for _, x in fields):
                return generic(v, ind)
            items.append("{\n" + inner + "  " + keys.join(enc(k) + ": " + x for k, x in fields)
                         + "\n" + inner + "}")
        return "[\n" + inner + (",\n" + inner).join(items) + "\n" + ind + "]"
    x = _value_json(v, ind, enc, generic)
    return generic(v, ind) if x is None else x


def _instrs_json(instrs, out, enc, generic, sort_keys):
    """Append a function's non-empty instruction list, at its indentation, to out."""
    ind = "        "                       # an instruction's braces
    inner = ind + "  "                      # its keys
    open_list = "[\n" + inner + "  "
    item_sep = ",\n" + inner + "  "
    close_list = "\n" + inner + "]"
    key_sep = ",\n" + inner
    plans = {}                              # keys in insertion order -> [(key, '"key": ')]
    append = out.append
    append("[\n" + ind)
    first = True
    for d in instrs:
        if first:
            first = False
        else:
            append(",\n" + ind)
        if type(d) is not dict:
            append(generic(d, ind))
            continue
        keys = tuple(d)
        plan = plans.get(keys)
        if plan is None:
            if not keys or any(type(k) is not str for k in keys):
                append(generic(d, ind))
                continue
            plan = plans[keys] = [(k, enc(k) + ": ")
                                  for k in (sorted(keys) if sort_keys else keys)]
        parts = []
        for k, prefix in plan:
            v = d[k]
            t = type(v)
            if t is str:
                parts.append(prefix + enc(v))
            elif t is list and v:
                try:
                    parts.append(prefix + open_list + item_sep.join(map(enc, v)) + close_list)
                except TypeError:           # not only strings
                    parts.append(prefix + generic(v, inner))
            elif t is int:
                parts.append(prefix + int.__repr__(v))
            elif t is bool:
                parts.append(prefix + ("true" if v else "false"))
            else:
                x = _value_json(v, inner, enc, generic)
                parts.append(prefix + (generic(v, inner) if x is None else x))
        append("{\n" + inner + key_sep.join(parts) + "\n" + ind + "}")
    append("\n      ]")
