"""Type profiles: the types the `any` parameters of a program's functions held in a run.

    brili --write-profile FILE ...      writes one (`observed`, `write`)
    brilc --profile FILE                compiles a variant of each function for them
                                        (`read` -> `bril.backend.llvm_lower`'s assumptions)

A profile is JSON, for a program:

    {"bril-type-profile": 1,
     "functions": {"ack": {"params": {"m": "int", "calls": {"ptr": "any"}}}}}

Each parameter listed (declared `any`) held values of that one Bril type in the
calls the interpreter's first tier ran (the calls before a function moves to
generated code: the same observations generated code specializes on); one that
held several types is left out.  A profile only steers speed: code compiled for
it checks the types at each entry and runs the function's generic code when
they differ, so a profile written on another input, or for another program,
never changes what a program prints.
"""

import json
import os

from ..ir.errors import BrilError

FORMAT = "bril-type-profile"
VERSION = 1
_SCALARS = ("int", "bool", "float", "char")


def _json_type(kind):
    """The Bril type (JSON) of values of an observed kind ("int", "ptr:any"...), or
    None (a pointer into a region of pointers: its full type is not observed)."""
    if kind in _SCALARS:
        return kind
    if kind.startswith("ptr:") and (kind[4:] in _SCALARS or kind[4:] == "any"):
        return {"ptr": kind[4:]}
    return None


def observed(compiled):
    """The profile (a dict) of what a run of `compiled` (a
    `bril.interpreter.interp.CompiledProgram`) saw."""
    functions = {}
    for index, func in enumerate(compiled.linked.functions):
        params = {}
        for name, kind in sorted(compiled.observed_kinds(index).items()):
            typ = _json_type(kind)
            if typ is not None:
                params[name] = typ
        if params:
            functions[func.get("name", "")] = {"params": params}
    return {FORMAT: VERSION, "functions": functions}


def write(path, profile):
    """Write a profile to path, atomically (a file in the same directory, renamed)."""
    text = json.dumps(profile, indent=1, sort_keys=True) + "\n"
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise BrilError(f"cannot write {path}: {e.strerror}") from None


def read(path):
    """{function name: {parameter: Bril type (JSON)}} from a profile file; a BrilError
    (one line) if it cannot be read or is not a profile."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as e:
        raise BrilError(f"cannot read profile {path}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BrilError(f"profile {path} is not JSON: {e}") from None
    return read_data(data, path)


def read_data(data, path):
    """`read`'s result from a profile's JSON data (path: for the messages)."""
    if not isinstance(data, dict) or data.get(FORMAT) != VERSION:
        raise BrilError(f"{path} is not a type profile ({FORMAT} {VERSION}; "
                        f"written by brili --write-profile)")
    functions = data.get("functions")
    if not isinstance(functions, dict):
        raise BrilError(f"profile {path}: \"functions\" must be an object")
    found = {}
    for name, entry in functions.items():
        params = entry.get("params") if isinstance(entry, dict) else None
        if not isinstance(params, dict):
            raise BrilError(f"profile {path}: function {name} needs \"params\", an object")
        for param, typ in params.items():
            if _kind_of(typ) is None:
                raise BrilError(f"profile {path}: parameter {param} of {name} has no "
                                f"type a profile can hold: {json.dumps(typ)}")
        found[name] = dict(params)
    return found


def _kind_of(typ):
    if typ in _SCALARS:
        return typ
    if isinstance(typ, dict) and set(typ) == {"ptr"} and (typ["ptr"] in _SCALARS
                                                          or typ["ptr"] == "any"):
        return "ptr:" + typ["ptr"]
    return None
