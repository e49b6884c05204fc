"""Plain records: named fields, positional or keyword construction, equality and
a readable repr -- what the modules on a run's path used `dataclasses` for,
without its start-up cost (`dataclasses` imports `inspect`, `ast` and `dis`:
about 13 ms of every `brili --trace` and of the first promoted function).

    class Span(Record):
        fields = ("start", "end", "tags")
        defaults = {"tags": list}

A default that is `list`, `dict` or `set` itself stands for a new empty one per
record.
"""

_FACTORIES = (list, dict, set)


_NEW = object()             # "no value given": make the default


class Record:
    fields = ()
    defaults = {}

    def __init_subclass__(cls, **kw):
        # An __init__ written out for the fields (as dataclasses do): records such
        # as trace items are made by the thousand.
        super().__init_subclass__(**kw)
        params, body, env = [], [], {"_NEW": _NEW}
        for name in cls.fields:
            if name not in cls.defaults:
                params.append(name)
                body.append(f"self.{name} = {name}")
                continue
            default = cls.defaults[name]
            if default in _FACTORIES:
                env[f"_f_{name}"] = default
                params.append(f"{name}=_NEW")
                body.append(f"self.{name} = _f_{name}() if {name} is _NEW else {name}")
            else:
                env[f"_d_{name}"] = default
                params.append(f"{name}=_d_{name}")
                body.append(f"self.{name} = {name}")
        src = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"])
        exec(src, env)
        cls.__init__ = env["__init__"]

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.fields)

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.fields)
        return f"{type(self).__name__}({inner})"
