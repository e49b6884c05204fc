"""Type profiles: the types the `any` parameters of a program's functions held in a
run, the parameters every call passed one value, and the types the `any` variables
held at loop headers.

    brili --write-profile FILE ...      writes one (`observed`, `write`)
    brilc --profile FILE                compiles a variant of each function for them
                                        (`read` -> `bril.backend.llvm_lower`'s assumptions)

A profile is JSON, for a program:

    {"bril-type-profile": 1,
     "functions": {"ack": {"kinds": [{"m": "int", "calls": {"ptr": "any"}}]},
                   "step": {"kinds": [{"a": "int"}, {"a": "float"}]},
                   "place": {"kinds": [], "values": {"n": 8}},
                   "main": {"kinds": [], "loops": {"loop": [{"acc": "int", "x": "int"},
                                                            {"acc": "float", "x": "float"}]}}}}

"kinds" lists the types the `any` parameters held together, each combination
that at least KINDS_SHARE of the calls the interpreter's first tier
(`bril.interpreter.cold`) ran passed (KINDS_KEPT at most, the most common first:
a program whose values change kind at a phase of the run has one per phase).
Under "values", an int or bool parameter that held one value in nearly all such
calls (VALUE_SHARE, VALUE_CALLS), and @main's int and bool arguments (its one
call: values invariant for the run).  Code compiled for them checks them once, at
the function's entry, and takes a value as a constant where that pays
(`bril.analysis.invariants.worth_constants`: a modulus, a short trip count).  A
profile merged from several runs (`merged`) lists under "varying" the parameters
whose value changed between runs, which are not speculated on again.  Under "loops", by loop header
label, the kinds the `any` variables live there held together as the loop came
round, each combination found by at least KINDS_SHARE of the arrivals (KINDS_KEPT
at most): native code keeps a copy of the loop for each, its variables' types known
there.
`brili --write-profile` keeps every function in that tier for the whole run, so
that every call is seen (a slower run: write profiles on small inputs).  A profile only
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
# function called once or twice gains nothing from a variant -- unless its loops
# ran long: `_common_values`).
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
        entry = {"kinds": _shared(sets, calls)}
        loops = {}
        for label, (arrivals, sets) in compiled.observed_header_sets(index).items():
            found = _shared(sets, arrivals)
            if found:
                loops[label] = found
        if loops:
            entry["loops"] = loops
        values = _main_values(compiled, index)
        values.update(_common_values(compiled, index))
        if values:
            entry["values"] = values
        if entry["kinds"] or values or loops:
            functions[func.get("name", "")] = entry
    return {FORMAT: VERSION, "functions": functions}


def _shared(sets, total):
    """The combinations of kinds ([({name: kind}, times seen), ...]) seen at least
    KINDS_SHARE of `total` times, as Bril types, the most common first (KINDS_KEPT at
    most; the names whose kind has no type left out)."""
    found = []
    for kind_set, n in sorted(sets, key=lambda item: -item[1]):
        typed = {name: typ for name, kind in sorted(kind_set.items())
                 if (typ := _json_type(kind)) is not None}
        if n >= KINDS_SHARE * total and typed and len(found) < KINDS_KEPT \
                and typed not in found:
            found.append(typed)
    return found


def _common_values(compiled, index):
    """{parameter: value} of function `index`'s int and bool parameters that held one
    value in nearly all the calls the first tier ran (VALUE_SHARE), in VALUE_CALLS
    of them at least -- or in all of them, however few, if the function went on in
    generated code: a function whose loop runs long leaves the first tier after a
    call or two."""
    calls, counts, moved = compiled.observed_values(index, VALUE_CALLS)
    values = {}
    for name, seen in sorted(counts.items()):
        value, n = max(seen.items(), key=lambda item: item[1])
        if n >= VALUE_SHARE * calls and (n >= VALUE_CALLS or (moved and n == calls)):
            values[name] = value
    return values


def _main_values(compiled, index):
    """{parameter: value} of @main's int and bool arguments if function `index` is
    @main, else {}."""
    if index != compiled.linked.main_index():
        return {}
    return dict(sorted(compiled.main_args.items()))


def seen(compiled):
    """A profile (a dict) of the one kind each `any` parameter held in every call the
    first tier of a run of `compiled` ran (`CompiledProgram.observed_kinds`), the
    kinds the `any` variables held where a loop moved to generated code
    (`CompiledProgram.loop_kinds_history`), @main's arguments, and the values nearly
    every call the first tier ran passed a parameter (`_common_values`): what
    any run knows without `--write-profile`, which keeps every call in that tier
    (for the program's executable, `bril.backend.program_exe`)."""
    functions = {}
    for index, func in enumerate(compiled.linked.functions):
        kinds = {name: typ for name, kind in sorted(compiled.observed_kinds(index).items())
                 if (typ := _json_type(kind)) is not None}
        loops = compiled.loop_kinds_history(index)
        values = _main_values(compiled, index)
        values.update(_common_values(compiled, index))
        entry = {"kinds": [kinds] if kinds else []}
        if loops:
            entry["loops"] = loops
        if values:
            entry["values"] = values
        if kinds or loops or values:
            functions[func.get("name", "")] = entry
    return {FORMAT: VERSION, "functions": functions}


def merged(old, new):
    """Two profiles of `seen`'s shape as one: for each function the sets of kinds of
    both (the old first; KINDS_KEPT at most), and of each loop header's
    (HEADER_KINDS_KEPT at most); the values both runs passed alike, those that
    differed listed under "varying" (never values again: a value that changes from
    run to run is no constant to compile for).  What runs of a program saw, kept in
    its JIT profile (`bril.backend.jit`): a warm run's first tier sees little (its
    code comes from the cache, and native code runs the loops), the first run's
    much."""
    from .interp import HEADER_KINDS_KEPT
    functions = {name: {"kinds": list(entry.get("kinds", ())),
                        "loops": {label: list(sets) for label, sets in entry.get("loops", {}).items()},
                        "values": dict(entry.get("values", {})),
                        "varying": list(entry.get("varying", ()))}
                 for name, entry in ((old or {}).get("functions") or {}).items()}
    for name, entry in ((new or {}).get("functions") or {}).items():
        mine = functions.setdefault(name, {"kinds": [], "loops": {}, "values": {},
                                           "varying": []})
        for param, value in entry.get("values", {}).items():
            if param in mine["varying"]:
                continue
            if param in mine["values"] and mine["values"][param] != value:
                del mine["values"][param]
                mine["varying"].append(param)
            else:
                mine["values"][param] = value
        for kinds in entry.get("kinds", ()):
            if kinds not in mine["kinds"] and len(mine["kinds"]) < KINDS_KEPT:
                mine["kinds"].append(kinds)
        for label, sets in entry.get("loops", {}).items():
            have = mine["loops"].setdefault(label, [])
            for kinds in sets:
                if kinds not in have and len(have) < HEADER_KINDS_KEPT:
                    have.append(kinds)
    for entry in functions.values():
        for key in ("loops", "values", "varying"):
            if not entry[key]:
                del entry[key]
    return {FORMAT: VERSION, "functions": functions}


def write(path, profile):
    """Write a profile to path, atomically."""
    import json             # (not at the top: json brings re and enum, ~14 ms)
    write_atomically(path, json.dumps(profile, indent=1, sort_keys=True) + "\n")


def read(path):
    """{function name: ([{parameter: Bril type (JSON)}, ...], {parameter: int or bool},
    {loop header label: [{variable: Bril type (JSON)}, ...]})} from a profile file; a
    BrilError (one line) if it cannot be read or is not a profile."""
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
        _check_kinds(kinds, path, f"parameter {{}} of {name}")
        loops = entry.get("loops", {})
        if not isinstance(loops, dict) or not all(
                isinstance(sets, list) and all(isinstance(k, dict) for k in sets)
                for sets in loops.values()):
            raise BrilError(f"profile {path}: the \"loops\" of {name} must map labels to "
                            f"lists of objects")
        for label, sets in loops.items():
            _check_kinds(sets, path, f"variable {{}} at .{label} in {name}")
        values = entry.get("values", {})
        if not isinstance(values, dict) or any(
                type(v) is not bool and (type(v) is not int or not INT_MIN <= v <= INT_MAX)
                for v in values.values()):
            raise BrilError(f"profile {path}: the \"values\" of {name} must be an object "
                            f"of bools and 64-bit ints")
        found[name] = ([dict(params) for params in kinds], dict(values),
                       {label: [dict(k) for k in sets] for label, sets in loops.items()})
    return found


def _check_kinds(sets, path, what):
    for kinds in sets:
        for name, typ in kinds.items():
            if _kind_of(typ) is None:
                import json
                raise BrilError(f"profile {path}: {what.format(name)} has no type a "
                                f"profile can hold: {json.dumps(typ)}")


def _kind_of(typ):
    if typ in _SCALARS:
        return typ
    if isinstance(typ, dict) and set(typ) == {"ptr"} and (typ["ptr"] in _SCALARS
                                                          or typ["ptr"] == "any"):
        return "ptr:" + typ["ptr"]
    return None
