"""Type profiles: the types the `any` parameters of a program's functions held in a
run, and the parameters every call passed one value.

    brili --write-profile FILE ...      writes one (`observed`, `write`)
    brilc --profile FILE                compiles a variant of each function for them
                                        (`read` -> `bril.backend.llvm_lower`'s assumptions)

A profile is JSON, for a program:

    {"bril-type-profile": 1,
     "functions": {"ack": {"kinds": [{"m": "int", "calls": {"ptr": "any"}}]},
                   "step": {"kinds": [{"a": "int"}, {"a": "float"}]},
                   "place": {"kinds": [], "values": {"n": 8}}}}

"kinds" lists the types the `any` parameters held together, each combination
that at least KINDS_SHARE of the calls the interpreter's first tier
(`bril.interpreter.cold`) ran passed (KINDS_KEPT at most, the most common first:
a program whose values change kind at a phase of the run has one per phase).
Under "values", an int or bool parameter that held one value in nearly all such
calls (VALUE_SHARE, VALUE_CALLS).  `brili --write-profile` keeps every function
in that tier for the whole run, so that every call is seen (a slower run: write
profiles on small inputs).  A profile only
steers speed: code compiled for it checks the types and values at each entry
and runs the function's generic code when they differ, so a profile written on
another input, or for another program, never changes what a program prints.
"""

from ..ir.errors import BrilError
from ..ir.ops import INT_MAX, INT_MIN
from ..ir.program import read_bytes, write_atomically

FORMAT = "bril-type-profile"
VERSION = 1
_SCALARS = ("int", "bool", "float", "char")
# A combination of kinds is listed under "kinds" if at least KINDS_SHARE of the
# calls passed it; KINDS_KEPT of them at most.
KINDS_SHARE = 0.1
KINDS_KEPT = 3
# A parameter is listed under "values" if one value was passed in at least
# VALUE_SHARE of the function's calls, and in VALUE_CALLS of them at least (a
# function called once or twice gains nothing from a variant).
VALUE_SHARE = 0.9
VALUE_CALLS = 4


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
        calls, sets = compiled.observed_kind_sets(index)
        kinds = []
        for kind_set, n in sorted(sets, key=lambda item: -item[1]):
            typed = {name: typ for name, kind in sorted(kind_set.items())
                     if (typ := _json_type(kind)) is not None}
            if n >= KINDS_SHARE * calls and typed and len(kinds) < KINDS_KEPT:
                kinds.append(typed)
        entry = {"kinds": kinds}
        calls, counts = compiled.observed_values(index)
        values = {}
        for name, seen in sorted(counts.items()):
            value, n = max(seen.items(), key=lambda item: item[1])
            if n >= VALUE_CALLS and n >= VALUE_SHARE * calls:
                values[name] = value
        if values:
            entry["values"] = values
        if kinds or values:
            functions[func.get("name", "")] = entry
    return {FORMAT: VERSION, "functions": functions}


def seen(compiled):
    """A profile (a dict) of the one kind each `any` parameter held in every call the
    first tier of a run of `compiled` ran (`CompiledProgram.observed_kinds`): what
    any run knows without `--write-profile`'s counting (for the program's
    executable, `bril.backend.program_exe`)."""
    functions = {}
    for index, func in enumerate(compiled.linked.functions):
        kinds = {name: typ for name, kind in sorted(compiled.observed_kinds(index).items())
                 if (typ := _json_type(kind)) is not None}
        if kinds:
            functions[func.get("name", "")] = {"kinds": [kinds]}
    return {FORMAT: VERSION, "functions": functions}


def write(path, profile):
    """Write a profile to path, atomically."""
    import json             # (not at the top: json brings re and enum, ~14 ms)
    write_atomically(path, json.dumps(profile, indent=1, sort_keys=True) + "\n")


def read(path):
    """{function name: ([{parameter: Bril type (JSON)}, ...], {parameter: int or bool})}
    from a profile file; a BrilError (one line) if it cannot be read or is not a
    profile."""
    import json
    try:
        data = json.loads(read_bytes(path, "profile"))
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
        kinds = entry.get("kinds") if isinstance(entry, dict) else None
        if not isinstance(kinds, list) or not all(isinstance(k, dict) for k in kinds):
            raise BrilError(f"profile {path}: function {name} needs \"kinds\", a list of "
                            f"objects")
        for params in kinds:
            for param, typ in params.items():
                if _kind_of(typ) is None:
                    import json
                    raise BrilError(f"profile {path}: parameter {param} of {name} has no "
                                    f"type a profile can hold: {json.dumps(typ)}")
        values = entry.get("values", {})
        if not isinstance(values, dict) or any(
                type(v) is not bool and (type(v) is not int or not INT_MIN <= v <= INT_MAX)
                for v in values.values()):
            raise BrilError(f"profile {path}: the \"values\" of {name} must be an object "
                            f"of bools and 64-bit ints")
        found[name] = ([dict(params) for params in kinds], dict(values))
    return found


def _kind_of(typ):
    if typ in _SCALARS:
        return typ
    if isinstance(typ, dict) and set(typ) == {"ptr"} and (typ["ptr"] in _SCALARS
                                                          or typ["ptr"] == "any"):
        return "ptr:" + typ["ptr"]
    return None
