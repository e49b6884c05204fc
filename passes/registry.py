"""Every pass by name, with a one-line description, and the `-O` pipeline; plug-ins.

A pass is a function from a program (dict) to a new program (dict); it never
mutates its input.  Besides the built-in passes, a pass is named by a *spec*
(the same in `bril-opt`, `brili --trace-pass` and `bril-bench` configurations):

    NAME                 a built-in pass, one loaded with `--load FILE.py NAME`,
                         or one an installed package declares in the entry-point
                         group `bril.passes` (`NAME = "package.module:function"`)
    module:function      a function of an importable module
    path/to/file.py:function
                         a function of a Python file
    O                    the whole `-O` pipeline (also `-O`)

Plug-ins run under `run_pass`: an exception, or a result that is not a Bril
program (bril.ir.rules finds a shape problem, or it is not JSON data), becomes one
`error: pass NAME ...` line.  The plug-in machinery (importlib, entry points)
is imported only when a spec needs it.
"""

import sys

from bril.ir.errors import BrilError
from bril.ir.record import Record


class Pass(Record):
    # name: str
    # run: callable  # program -> program
    # description: str
    # plugin: bool = False  # not ours: its result is checked (run_pass)
    # (a Record, not a dataclass: `dataclasses` cost every `brili --trace` and
    # `bril-opt` run about 10 ms of imports)
    fields = ('name', 'run', 'description', 'plugin')
    defaults = {'plugin': False}


def _passes():
    from . import tdce, lvn, constprop, cfgclean, licm, inline, ssa
    return [
        Pass("tdce", tdce.tdce, "dead-code elimination (global liveness; keeps anything that can fail)"),
        Pass("lvn", lvn.lvn, "local value numbering: CSE, copy propagation, constant folding"),
        Pass("constprop", constprop.constprop,
             "global constant propagation and folding; branches on constants become jumps"),
        Pass("inline", inline.inline, "inline small non-recursive functions"),
        Pass("prune", inline.prune_functions,
             "drop the functions no call from @main reaches (whole programs; not in -O)"),
        Pass("to-ssa", ssa.to_ssa, "convert into SSA form (ssa2 set/get), pruned by liveness"),
        Pass("from-ssa", ssa.from_ssa, "convert ssa2 set/get back to ordinary copies, coalescing"),
        Pass("licm", licm.licm, "loop-invariant code motion into loop preheaders"),
        Pass("cfgclean", cfgclean.cfgclean,
             "unreachable blocks, jump threading, block merging, loop rotation, jump-saving layout"),
    ]


PASSES = {p.name: p for p in _passes()}

# The default optimization pipeline (`bril-opt -O`).  Callees are cleaned up
# before inlining (more of them then pass its cost test); loops are rotated by
# cfgclean before licm (so loop bodies run at least once per entry).
O_PIPELINE = ["lvn", "constprop", "tdce", "cfgclean",
              "inline", "lvn", "constprop", "tdce", "cfgclean",
              "licm", "lvn", "constprop", "tdce", "cfgclean"]


ENTRY_POINT_GROUP = "bril.passes"
# Passes loaded from files (`load_file`) by name, for later specs of this process.
LOADED = {}


def unknown(names):
    """The names that are not passes (specs are resolved by `resolve`)."""
    out = []
    for n in names:
        try:
            resolve(n)
        except BrilError:
            out.append(n)
    return out


def _describe(fn, spec):
    doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
    return doc[0] if doc else f"plug-in {spec}"


def _plugin(name, fn, spec):
    if not callable(fn):
        raise BrilError(f"pass {name}: {spec} is not a function")
    return Pass(name, fn, _describe(fn, spec), plugin=True)


def load_file(path, name, function=None):
    """The pass `function` (default: `name`) of the Python file `path`, registered
    under `name` for later specs; BrilError if it cannot be loaded."""
    import importlib.util
    import os
    function = function or name
    if not os.path.isfile(path):
        raise BrilError(f"pass {name}: cannot read {path}")
    mod_name = "bril_plugin_" + "".join(c if c.isalnum() else "_" for c in
                                        os.path.abspath(path))
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    except Exception as e:
        raise BrilError(f"pass {name}: loading {path} failed: {type(e).__name__}: {e}")
    fn = getattr(module, function, None)
    if fn is None:
        raise BrilError(f"pass {name}: {path} has no function {function}")
    LOADED[name] = p = _plugin(name, fn, f"{path}:{function}")
    return p


def _from_module(spec):
    import importlib
    mod, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(mod)
    except Exception as e:
        raise BrilError(f"pass {spec}: cannot import {mod}: {type(e).__name__}: {e}")
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise BrilError(f"pass {spec}: {mod} has no {attr}")
    return _plugin(spec, fn, spec)


def entry_points():
    """name -> entry point of every pass an installed package declares."""
    from importlib.metadata import entry_points as eps
    return {ep.name: ep for ep in eps(group=ENTRY_POINT_GROUP)}


def resolve(spec):
    """The passes a spec names, in order (see the module's documentation)."""
    if spec in ("O", "-O"):
        return [PASSES[n] for n in O_PIPELINE]
    p = PASSES.get(spec) or LOADED.get(spec)
    if p is not None:
        return [p]
    if ":" in spec:
        target, _, function = spec.rpartition(":")
        if target.endswith(".py"):
            return [load_file(target, spec, function)]
        return [_from_module(spec)]
    ep = entry_points().get(spec)
    if ep is None:
        raise BrilError(f"unknown pass '{spec}' (see bril-opt --list)")
    try:
        fn = ep.load()
    except Exception as e:
        raise BrilError(f"pass {spec}: loading entry point {ep.value} failed: "
                        f"{type(e).__name__}: {e}")
    return [_plugin(spec, fn, ep.value)]


def resolve_all(specs):
    """The passes of a list of specs, in order (a comma inside a spec separates specs)."""
    out = []
    for spec in specs:
        for part in spec.split(","):
            if part:
                out.extend(resolve(part))
    return out


def malformed(prog):
    """Why `prog` is not a Bril program a pass may return, or None."""
    if not isinstance(prog, dict):
        return f"returned {type(prog).__name__}, not a program"
    from bril.ir.rules import shape_problems
    problems = shape_problems(prog)
    if problems:
        return f"returned a malformed program: {problems[0].text()}"
    import json
    try:
        json.dumps(prog, allow_nan=True)
    except (TypeError, ValueError) as e:
        return f"returned a program that is not JSON data: {e}"
    return None


def run_pass(p, prog):
    """Run one pass; a plug-in's exception or malformed result is a BrilError
    naming it (`pass NAME raised ...`)."""
    if not p.plugin:
        return p.run(prog)
    import copy
    try:
        out = p.run(copy.deepcopy(prog))
    except BrilError as e:
        raise BrilError(f"pass {p.name} failed: {e}") from None
    except Exception as e:
        raise BrilError(f"pass {p.name} raised {type(e).__name__}: {e}") from None
    why = malformed(out)
    if why is not None:
        raise BrilError(f"pass {p.name} {why}")
    return out


def run_pipeline(prog, names):
    """Run passes given by name or spec (or as Pass objects), in order, on a copy
    of `prog` made once (each pass then changes it in place: `safety.owning`)."""
    from .safety import copy_program, owning
    passes = [p for name in names for p in ([name] if isinstance(name, Pass) else resolve(name))]
    if not passes:
        return prog
    prog = copy_program(prog)
    with owning():
        for p in passes:
            prog = run_pass(p, prog)
    return prog


def optimize(prog):
    """Run the `-O` pipeline."""
    return run_pipeline(prog, O_PIPELINE)
