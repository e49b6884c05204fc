"""Imports (docs/lang/import.md): gather the functions a program can call.

Each file is a module with its own namespace: its functions plus the
functions it imports (under their aliases).  A call inside a module is
resolved in that module's namespace, so two files may both define `@helper`.
Imported files are found relative to the importing file's directory, then
in each library directory (`-L`) in order; `.json` files are read as JSON,
`.bril` files with the text parser (imported lazily).  Cycles are allowed: a
file is loaded once, by its real path.  Errors: a missing file, importing a
function the file does not define (or defines twice), an alias that clashes
with a local function or with another import.

As in the reference interpreter, duplicate function names inside one module
are only an error when a call (or the start of @main) looks the name up.
"""

import os

from .errors import BrilError
from . import messages as M


class Module:
    def __init__(self, path, directory):
        self.path = path                # real path of the file (None for the main program)
        self.directory = directory      # where its relative imports are resolved first
        self.names = {}                 # local name -> list of function indices


class LinkedProgram:
    """All functions of all loaded modules, with per-module name resolution."""

    def __init__(self):
        self.functions = []             # function dicts, by global index
        self.module_of = []             # global index -> Module
        self.modules = {}               # real path -> Module
        self.main_module = None
        # (bril.backend.jitprofile's digests of the program, made once: functions are
        # added only while linking, never changed after)
        self.program_key_memo = self.profile_key_memo = None
        self.allocates_memo = None

    def add_module(self, module, functions):
        for f in functions:
            idx = len(self.functions)
            self.functions.append(f)
            self.module_of.append(module)
            module.names.setdefault(f["name"], []).append(idx)

    def lookup(self, module, name):
        """Global index of `name` in module's namespace, or the reference's error text."""
        found = module.names.get(name)
        if not found:
            return M.text(M.NO_FUNCTION, name=name)
        if len(found) > 1:
            return M.text(M.MULTIPLE_FUNCTIONS, name=name)
        return found[0]

    def resolve_call(self, caller_index, name):
        return self.lookup(self.module_of[caller_index], name)

    def allocates(self):
        """Whether the program has an `alloc` (else it never has a pointer)."""
        # (once: 6-10 ms of a 48,000-instruction program's start, which both halves
        # of the JIT asked for)
        if self.allocates_memo is None:
            self.allocates_memo = any(i.get("op") == "alloc" for f in self.functions
                                      for i in f.get("instrs") or ())
        return self.allocates_memo

    def main_index(self):
        """@main of the main program; raises BrilError as the reference does."""
        r = self.lookup(self.main_module, "main")
        if isinstance(r, str):
            raise BrilError(r)
        return r


def _read_module_file(path):
    from .program import read_bytes
    data = read_bytes(path, "imported file")
    if path.endswith(".bril"):
        from .text import parse_program       # lazily: lark is slow to import
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BrilError(f"{path}: not UTF-8 text")
        return parse_program(text, filename=path)
    from .program import load_program
    return load_program(data)


def _find_file(rel, directory, lib_dirs):
    if os.path.isabs(rel):
        return rel if os.path.isfile(rel) else None
    for d in [directory, *lib_dirs]:
        cand = os.path.join(d, rel)
        if os.path.isfile(cand):
            return os.path.realpath(cand)
    return None


def link(prog, base_dir=None, lib_dirs=(), filename=None):
    """Load the imports of `prog` (transitively) and return a LinkedProgram.

    `base_dir`: directory of the main program's file (default: the current
    directory); `filename`, if given, is the main program's own path (so a
    program importing itself is loaded once)."""
    linked = LinkedProgram()
    lib_dirs = [os.path.abspath(d) for d in lib_dirs]
    base = os.path.abspath(base_dir or os.getcwd())
    main = Module(os.path.realpath(filename) if filename else None, base)
    linked.main_module = main
    if main.path:
        linked.modules[main.path] = main
    pending = [(main, prog)]
    linked.add_module(main, prog.get("functions") or [])
    while pending:
        module, mprog = pending.pop()
        for imp in mprog.get("imports") or []:
            rel = imp.get("path")
            if not isinstance(rel, str):
                raise BrilError("malformed import: needs a 'path'")
            path = _find_file(rel, module.directory, lib_dirs)
            if path is None:
                searched = ", ".join([module.directory, *lib_dirs])
                raise BrilError(f"cannot find imported file {rel} (searched {searched})")
            target = linked.modules.get(path)
            if target is None:
                target = Module(path, os.path.dirname(path))
                linked.modules[path] = target
                tprog = _read_module_file(path)
                linked.add_module(target, tprog.get("functions") or [])
                pending.append((target, tprog))
            _bind_imports(linked, module, target, imp, rel)
    return linked


def _bind_imports(linked, module, target, imp, rel):
    for spec in imp.get("functions") or []:
        name = spec.get("name")
        alias = spec.get("alias") or name
        found = target.names.get(name)
        if not found:
            raise BrilError(f"{rel} has no function @{name} to import")
        if len(found) > 1:
            raise BrilError(f"{rel} defines @{name} more than once")
        existing = module.names.get(alias)
        if existing:
            if existing == found:
                continue            # the same function imported twice under one name
            raise BrilError(f"imported function @{alias} conflicts with another function "
                            f"of the same name")
        module.names[alias] = list(found)
