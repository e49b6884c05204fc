"""Reading a Bril JSON program and checking that it has the documented shape.

Every tool that reads JSON goes through `load_program`, so a truncated file, a
wrong field type or an unknown op is one clear `error: ...` line, never a
traceback deep inside a pass.  Extra fields are kept: Bril tools ignore
fields they do not know, and ours carry them through.
"""

import json

from .errors import BrilError
from .ops import OPS


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
    raise BrilError(f"{ctx}: malformed type {json.dumps(t)}")


def _check_str_list(instr, key, ctx):
    v = instr.get(key)
    if v is None:
        return
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BrilError(f"{ctx}: field '{key}' must be a list of strings")


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
            ctx = _where(name, i)
            if not isinstance(instr, dict):
                raise BrilError(f"{ctx}: instruction must be a JSON object")
            if "op" not in instr:
                if not isinstance(instr.get("label"), str):
                    raise BrilError(f"{ctx}: neither an instruction (no 'op') nor a label")
                continue
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
        prog = json.loads(text)
    except json.JSONDecodeError as e:
        raise BrilError(f"{e.lineno}:{e.colno}: invalid JSON: {e.msg}")
    except RecursionError:
        raise BrilError("invalid JSON: nested too deeply")
    except ValueError as e:         # e.g. an integer literal with thousands of digits
        raise BrilError(f"invalid JSON: {e}")
    return check_program(prog)
