"""Reading a Bril JSON program and checking that it has the documented shape.

Every tool that reads JSON goes through `load_program`, so a truncated file, a
wrong field type or an unknown op is one clear `error: ...` line, never a
traceback deep inside a pass.  Extra fields are kept: Bril tools ignore
fields they do not know, and ours carry them through.
"""

from itertools import repeat

from .errors import BrilError


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


_CONST_TYPES = (bool, int, float, str)


def check_program(prog):
    """Raise BrilError if `prog` is not a structurally valid Bril program.

    The rules are `bril.ir.rules` (`bril-check` reports every problem they find);
    this raises the first.  A tight pass over every instruction of every program
    that imports the rules only when something looks unusual, to ask them what."""
    from .ops import OPS        # (here: a warm run imports none of this module)
    if type(prog) is not dict or type(prog.get("functions")) is not list \
            or type(prog.get("imports", ())) not in (list, tuple) or prog.get("imports"):
        _raise_header(prog, None)
    for func in prog["functions"]:
        if type(func) is not dict or type(func.get("name")) is not str \
                or type(func.get("instrs")) is not list or type(func.get("args", ())) \
                not in (list, tuple) or type(func.get("type", "")) is not str:
            _raise_header(prog, func)
        for a in func.get("args", ()):
            if type(a) is not dict or type(a.get("name")) is not str \
                    or type(a.get("type")) is not str:
                _raise_header(prog, func)
        name = func["name"]
        for i, instr in enumerate(func["instrs"]):
            if type(instr) is not dict:
                _raise_instruction(instr, name, i)
            get = instr.get
            op = get("op")
            if op is None:
                if "op" in instr or type(get("label")) is not str:
                    _raise_instruction(instr, name, i)
                continue
            if type(op) is not str or op not in OPS:
                _raise_instruction(instr, name, i)
            # Lists of names: `join` tests every element is a str, in C.
            v = get("args")
            if v is not None and (type(v) is not list or not _all_str(v)):
                _raise_instruction(instr, name, i)
            v = get("funcs")
            if v is not None and (type(v) is not list or not _all_str(v)):
                _raise_instruction(instr, name, i)
            v = get("labels")
            if v is not None and (type(v) is not list or not _all_str(v)):
                _raise_instruction(instr, name, i)
            d = get("dest")
            if d is not None and type(d) is not str:
                _raise_instruction(instr, name, i)
            if ("type" in instr and type(instr["type"]) is not str) or (op == "const" and (
                    d is None or type(get("value")) not in _CONST_TYPES)):
                _raise_instruction(instr, name, i)
    return prog


def _all_str(names):
    try:
        "".join(names)
        return True
    except TypeError:
        return False


def _raise_header(prog, func):
    """Raise the first problem the rules find outside instructions (of the program,
    or of `func`), if there is one."""
    from . import rules
    if func is None:
        problems = rules.program_header_problems(prog)[1]
    else:
        problems = rules.function_header_problems(func)[0]
    for p in problems:
        raise BrilError(p.text())


def _raise_instruction(instr, name, i):
    """Raise the instruction's shape problem, if the rules find one."""
    from . import rules
    msg = rules.instruction_shape(instr)
    if msg is not None:
        raise BrilError(f"{rules.where(name, i)}: {msg}")


_JUMPS = ("jmp", "br", "guard")


def may_run_long(prog):
    """False when no function of the program can loop or call: it then runs at most
    as many instructions as it has, so nothing in it can become hot (`brili --jit`
    runs it as plain `brili` does).  A cycle of blocks needs a jump to a label at
    or before the jump (falling through only goes forward), so one linear scan of
    the labels decides.  Programs with imports may: their other files are not read."""
    if prog.get("imports"):
        return True
    for func in prog.get("functions", ()):
        instrs = func.get("instrs", ())
        # (the ops gathered in C first: a 400,000-instruction function without
        # a jump is decided in a third of the time the loop below takes)
        ops = set(map(dict.get, instrs, repeat("op")))
        if "call" in ops:
            return True
        if ops.isdisjoint(_JUMPS):
            continue
        seen = set()
        for instr in instrs:
            if "label" in instr:
                seen.add(instr["label"])
            elif instr.get("op") in _JUMPS and not seen.isdisjoint(instr.get("labels") or ()):
                return True
    return False


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


def read_program(file=None, text=False, load_json=None, read=None):
    """(program dict, file name or None): the program in FILE (Bril text unless it
    ends in .json, or `text`), else on standard input (JSON unless `text`), the way
    every command reads it; `load_json` turns JSON bytes into a program (default:
    `load_program`); `read`: what `bril.warm_start.read_input` returned, if it was
    called already.
    BrilError for an unreadable file or text that is not UTF-8."""
    if read is None:
        from ..warm_start import read_input
        try:
            read = read_input(file, text)
        except OSError as e:
            raise unreadable(file or "standard input", e) from None
    data, as_text = read
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
        raise unreadable(path, e, what) from None


def unreadable(path, err, what=""):
    """The BrilError for a file that could not be read (`err`, the OSError)."""
    return BrilError(f"cannot read {what + ' ' if what else ''}{path}: {err.strerror}")


def write_atomically(path, data):
    """Write a whole file or nothing (data: str, written as UTF-8, or bytes): a
    temporary file beside it, renamed into place; BrilError `cannot write PATH:
    reason` if that fails."""
    import os
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        # (not `tempfile`: importing it costs more than the write of a small program)
        while True:
            tmp = os.path.join(directory, f".bril-{os.getpid()}-{os.urandom(6).hex()}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileExistsError:
                continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise BrilError(f"cannot write {path}: {e.strerror}")
