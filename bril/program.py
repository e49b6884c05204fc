"""Reading a Bril JSON program and checking that it has the documented shape.

Every tool that reads JSON goes through `load_program`, so a truncated file, a
wrong field type or an unknown op is one clear `error: ...` line, never a
traceback deep inside a pass.  Extra fields are kept: Bril tools ignore
fields they do not know, and ours carry them through.
"""

from .errors import BrilError
from .ops import OPS


class _DecodeOptions:
    """What `json.loads` would pass to the C scanner, spelled out: importing
    `json.decoder` compiles regular expressions (importing `re`, `enum`...), about
    6 ms of every start."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                      "NaN": float("nan")}.__getitem__
    memo = None


_JSON_SPACE = " \t\n\r"


def parse_json(text):
    """json.loads(text) for a str, through the C scanner when it is there; any
    problem is left to `json.loads` itself, which raises its usual error."""
    try:
        from _json import make_scanner
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        value, end = make_scanner(_DecodeOptions)(text, start)
        if not text[end:].strip(_JSON_SPACE):
            return value
    except Exception:
        pass
    import json
    return json.loads(text)


def _where(func, index):
    return f"@{func}, instruction {index}"


def _check_type(t, ctx):
    inner = t
    while isinstance(inner, dict) and len(inner) == 1:     # a loop, not recursion
        (k, inner), = inner.items()
        if not isinstance(k, str):
            break
    if isinstance(inner, str):
        return
    import json
    raise BrilError(f"{ctx}: malformed type {json.dumps(t)}")


def _check_str_list(instr, key, ctx):
    v = instr.get(key)
    if v is None:
        return
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BrilError(f"{ctx}: field '{key}' must be a list of strings")


_CONST_TYPES = (bool, int, float, str)


def _check_instruction(instr, name, i):
    """The thorough check of one instruction; raises BrilError if it is malformed."""
    ctx = _where(name, i)
    if "op" not in instr:
        if not isinstance(instr.get("label"), str):
            raise BrilError(f"{ctx}: neither an instruction (no 'op') nor a label")
        return
    op = instr["op"]
    if not isinstance(op, str):
        raise BrilError(f"{ctx}: 'op' must be a string")
    if op not in OPS:
        raise BrilError(f"{ctx}: unknown opcode {op}")
    for key in ("args", "funcs", "labels"):
        _check_str_list(instr, key, ctx)
    if "dest" in instr and not isinstance(instr["dest"], str):
        raise BrilError(f"{ctx}: 'dest' must be a string")
    if "type" in instr:
        _check_type(instr["type"], ctx)
    if op == "const":
        if "dest" not in instr:
            raise BrilError(f"{ctx}: const needs a 'dest'")
        v = instr.get("value")
        if not isinstance(v, (bool, int, float, str)):
            raise BrilError(f"{ctx}: const needs a number, boolean or char 'value'")


def check_program(prog):
    """Raise BrilError if `prog` is not a structurally valid Bril program."""
    if not isinstance(prog, dict):
        raise BrilError("program must be a JSON object with a 'functions' list")
    funcs = prog.get("functions")
    if not isinstance(funcs, list):
        raise BrilError("program must have a 'functions' list")
    imports = prog.get("imports", [])
    if not isinstance(imports, list):
        raise BrilError("'imports' must be a list")
    for imp in imports:
        if not (isinstance(imp, dict) and isinstance(imp.get("path"), str)
                and isinstance(imp.get("functions"), list)
                and all(isinstance(f, dict) and isinstance(f.get("name"), str)
                        and isinstance(f.get("alias", ""), str)
                        for f in imp["functions"])):
            raise BrilError("malformed import: needs 'path' and a 'functions' list of names")
    for func in funcs:
        if not isinstance(func, dict) or not isinstance(func.get("name"), str):
            raise BrilError("every function needs a string 'name'")
        name = func["name"]
        args = func.get("args", [])
        if not isinstance(args, list):
            raise BrilError(f"@{name}: 'args' must be a list")
        for a in args:
            if not (isinstance(a, dict) and isinstance(a.get("name"), str) and "type" in a):
                raise BrilError(f"@{name}: every argument needs a 'name' and a 'type'")
            _check_type(a["type"], f"@{name}")
        if "type" in func:
            _check_type(func["type"], f"@{name}")
        instrs = func.get("instrs")
        if not isinstance(instrs, list):
            raise BrilError(f"@{name}: function needs an 'instrs' list")
        for i, instr in enumerate(instrs):
            # (one pass over every instruction of every program: kept tight, the
            # message built only when something is wrong)
            if type(instr) is not dict:
                raise BrilError(f"{_where(name, i)}: instruction must be a JSON object")
            op = instr.get("op")
            if op is None:
                if "op" in instr or type(instr.get("label")) is not str:
                    _check_instruction(instr, name, i)
                continue
            if type(op) is not str or op not in OPS:
                _check_instruction(instr, name, i)
            for key in ("args", "funcs", "labels"):
                v = instr.get(key)
                if v is not None:
                    if type(v) is not list:
                        _check_instruction(instr, name, i)
                    for x in v:
                        if type(x) is not str:
                            _check_instruction(instr, name, i)
            d = instr.get("dest")
            if (d is not None and type(d) is not str) or ("type" in instr and type(
                    instr["type"]) is not str):
                _check_instruction(instr, name, i)
            elif op == "const" and (d is None or type(instr.get("value")) not in _CONST_TYPES):
                _check_instruction(instr, name, i)
    return prog


def load_program(text):
    """Parse JSON text into a checked program dict."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BrilError(f"input is not UTF-8 text ({e.reason} at byte {e.start})")
    if not text.strip():
        raise BrilError("empty input: expected a Bril JSON program")
    try:
        prog = parse_json(text)
    except RecursionError:
        raise BrilError("invalid JSON: nested too deeply")
    except ValueError as e:
        if hasattr(e, "lineno"):           # json.JSONDecodeError
            raise BrilError(f"{e.lineno}:{e.colno}: invalid JSON: {e.msg}")
        raise BrilError(f"invalid JSON: {e}")   # e.g. an integer with thousands of digits
    return check_program(prog)


def read_program(file=None, text=False, load_json=None):
    """(program dict, file name or None): the program in FILE (Bril text unless it
    ends in .json, or `text`), else on standard input (JSON unless `text`), the way
    every command reads it; `load_json` turns JSON bytes into a program (default:
    `load_program`).  BrilError for an unreadable file or text that is not UTF-8."""
    import sys
    if file is not None:
        data = read_bytes(file)
        as_text = text or not file.endswith(".json")
    else:
        data = sys.stdin.buffer.read()
        as_text = text
    if as_text:
        from .text import parse_program       # lazily: the text parser is slow to import
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BrilError(f"input is not UTF-8 text ({e.reason} at byte {e.start})")
        return parse_program(source, filename=file), file
    return (load_json or load_program)(data), file


def read_bytes(path, what=""):
    """The bytes of a file; BrilError `cannot read [WHAT ]PATH: reason` if it cannot be."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise BrilError(f"cannot read {what + ' ' if what else ''}{path}: {e.strerror}")

