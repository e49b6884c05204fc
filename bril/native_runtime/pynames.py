"""Python names of generated code: how Bril names become Python identifiers and back.

A Bril variable `x` is the local `v_x` (escaped: `_` doubles, any other
character outside [A-Za-z0-9] is `_<hex>_`), a shadow variable of ssa2 is
`s_x`, a variable of a callee inlined at call site N is `wN_x`.  Function
number i named `f` is `F<i>_f`; its variants add a suffix (`__generic`,
`__osr<block>`...).  The mangling is reversible so that an unbound local
(Python's UnboundLocalError) can be reported as the reference does
(`undefined variable x`).
"""


def function_name(index, name):
    """The Python name of function number `index` (its normal variant)."""
    return f"F{index}_{escape(name)[:40]}"


def function_index(code):
    """The Bril function number of a code object of generated code (`F<index>_...`,
    from a file named `<bril @NAME VARIANT>`), or None for any other code (the cold
    tier's templates are `<bril cold ...>`)."""
    name = code.co_name
    if name[:1] != "F" or not code.co_filename.startswith("<bril @"):
        return None
    digits = name[1:].split("_", 1)[0]
    return int(digits) if digits.isdigit() else None


VARIANT_SUFFIX = {"normal": "", "generic": "__generic", "entry": "__entry", "jit": "__jit",
                  "jitx": "__jitx", "record": "__record", "resume": "__resume"}


def variant_name(index, name, variant, osr=None):
    """The Python name a variant of function number `index` is defined as (`osr`:
    the block index an osr variant is entered at)."""
    if variant in ("osr", "osrjit", "osrrecord", "osrplain"):
        return f"{function_name(index, name)}__{variant}{osr}"
    return function_name(index, name) + VARIANT_SUFFIX[variant]


def escape(name):
    out = []
    for c in name:
        if c == "_":
            out.append("__")
        elif c.isascii() and c.isalnum():
            out.append(c)
        else:
            out.append(f"_{ord(c):x}_")
    return "".join(out)


def unescape(text):
    """Inverse of the escaping used in mangled names."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "_":
            out.append(c)
            i += 1
        elif text[i + 1:i + 2] == "_":
            out.append("_")
            i += 2
        else:
            j = text.index("_", i + 1)
            out.append(chr(int(text[i + 1:j], 16)))
            i = j + 1
    return "".join(out)


def var_name(name):
    return "v_" + escape(name)


def shadow_name(name):
    return "s_" + escape(name)


def bril_name_of(pyname):
    """('var'|'shadow', Bril name) for a mangled local, or None."""
    if pyname.startswith("v_"):
        return "var", unescape(pyname[2:])
    if pyname.startswith("s_"):
        return "shadow", unescape(pyname[2:])
    if pyname[:1] == "w":                   # a variable of an inlined callee: w<site>_
        digits = pyname[1:].split("_", 1)
        if len(digits) == 2 and digits[0].isdigit():
            return "var", unescape(digits[1])
    return None


class Links:
    """What one generated function needs bound in its namespace besides the engine's
    helpers: constants (named after the function, so variants never clash),
    the functions it calls (by their Python names), and variants of itself it
    may hand over to (compiled on first use).  Recorded while the source is
    written, replayed when the code is loaded (also from the code cache).

    `defname` is the Python name the source defines."""

    __slots__ = ("defname", "constants", "_ids", "callees", "variants", "label_ids", "counters",
                 "info")

    def __init__(self, defname):
        self.defname = defname
        self.constants = {}         # global name -> object
        self._ids = {}
        self.callees = set()        # function indices called by name
        self.variants = set()       # (global name, function index, variant)
        self.label_ids = None       # phi functions: label name -> id (for osr entries)
        self.counters = {}          # jit variants: flag name -> (function, header)
        self.info = {}              # what a tier needs to enter the code (marshal-able)

    def constant(self, obj):
        name = self._ids.get(id(obj))
        if name is None:
            name = self._ids[id(obj)] = f"_K_{self.defname}_{len(self.constants)}"
            self.constants[name] = obj
        return name

    def variant(self, index, variant):
        name = f"_{VARIANT_TAGS[variant]}{index}"
        self.variants.add((name, index, variant))
        return name

    def flag(self, index, header):
        """The name of the JIT's flag for loop header `header` (a block index) of
        function `index` (`_JQ<index>_<header>`): true when the loop should hand
        its frame to the JIT there."""
        name = f"_JQ{index}_{header}"
        self.counters[name] = (index, header)
        return name

    def as_data(self):
        """A marshal-able form (see `from_data`)."""
        return (self.defname, self.constants, sorted(self.callees), sorted(self.variants),
                self.label_ids, self.counters, self.info)

    @classmethod
    def from_data(cls, data):
        links = cls(data[0])
        links.constants, links.callees, links.variants, links.label_ids, links.counters = (
            data[1], set(data[2]), {tuple(v) for v in data[3]}, data[4],
            {k: tuple(v) for k, v in data[5].items()})
        links.info = data[6]
        return links


# Global names of lazily compiled variants: `_G3` (generic variant of function 3).
VARIANT_TAGS = {"generic": "G", "entry": "Y", "jitx": "X", "miss": "M", "deopt": "Z",
                "deoptx": "W"}
