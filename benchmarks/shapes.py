"""Programs of unusual size and shape, as Bril JSON, for the scale benchmark and tests.

Front ends and tracers emit code the hand-written benchmarks never show: long
functions, long chains of blocks, deep loop nests, many variables, many
functions.  Each generator takes a size and returns a program dict whose
output and dynamic instruction count are known in closed form
(`expected(shape, size)`), so a test can check any tool's result exactly.

`SHAPES` names every shape with the size used in the issue that introduced it
(the "table size"); the scale benchmark runs multiples of it.
"""


def _const(dest, value, typ="int"):
    return {"op": "const", "dest": dest, "type": typ, "value": value}


def _op(op, dest, *args, typ="int"):
    return {"op": op, "dest": dest, "type": typ, "args": list(args)}


def _main(instrs, args=()):
    f = {"name": "main", "instrs": instrs}
    if args:
        f["args"] = [{"name": a, "type": "int"} for a in args]
    return f


def jmp_chain(n):
    """One function, n blocks, each adding one and jumping to the next."""
    instrs = [_const("x", 0), _const("one", 1), {"op": "jmp", "labels": ["l0"]}]
    for i in range(n):
        instrs.append({"label": f"l{i}"})
        instrs.append(_op("add", "x", "x", "one"))
        if i + 1 < n:
            instrs.append({"op": "jmp", "labels": [f"l{i + 1}"]})
    instrs.append({"op": "print", "args": ["x"]})
    return {"functions": [_main(instrs)]}


def straight_line(n):
    """n `add`s in one block (a generated, fully unrolled computation)."""
    instrs = [_const("x", 0), _const("one", 1)]
    instrs += [_op("add", "x", "x", "one") for _ in range(n)]
    instrs.append({"op": "print", "args": ["x"]})
    return {"functions": [_main(instrs)]}


def nested_loops(n):
    """n loops nested in one another, each running one iteration."""
    instrs = [_const("one", 1), _const("s", 0)]
    for d in range(n):
        instrs += [_const(f"i{d}", 0), {"label": f"h{d}"},
                   _op("lt", f"c{d}", f"i{d}", "one", typ="bool"),
                   {"op": "br", "args": [f"c{d}"], "labels": [f"b{d}", f"e{d}"]},
                   {"label": f"b{d}"}]
    instrs.append(_op("add", "s", "s", "one"))
    for d in reversed(range(n)):
        instrs += [_op("add", f"i{d}", f"i{d}", "one"),
                   {"op": "jmp", "labels": [f"h{d}"]},
                   {"label": f"e{d}"}]
    instrs.append({"op": "print", "args": ["s"]})
    return {"functions": [_main(instrs)]}


def many_variables(n):
    """n distinct variables, each defined once and read once."""
    instrs = [_const("s", 0)]
    for i in range(n):
        instrs.append(_const(f"v{i}", i % 7))
        instrs.append(_op("add", "s", "s", f"v{i}"))
    instrs.append({"op": "print", "args": ["s"]})
    return {"functions": [_main(instrs)]}


def call_chain(n):
    """n functions, each calling the next (a call stack n deep)."""
    funcs = [_main([_const("x", 0),
                    {"op": "call", "dest": "y", "type": "int", "funcs": ["f0"], "args": ["x"]},
                    {"op": "print", "args": ["y"]}])]
    for i in range(n):
        body = [_const("one", 1), _op("add", "y", "x", "one")]
        if i + 1 < n:
            body.append({"op": "call", "dest": "y", "type": "int", "funcs": [f"f{i + 1}"],
                         "args": ["y"]})
        body.append({"op": "ret", "args": ["y"]})
        funcs.append({"name": f"f{i}", "args": [{"name": "x", "type": "int"}], "type": "int",
                      "instrs": body})
    return {"functions": funcs}


def many_functions(n):
    """@main calls n small functions one after the other (a wide call graph)."""
    main = [_const("s", 0)]
    funcs = []
    for i in range(n):
        main.append({"op": "call", "dest": "s", "type": "int", "funcs": [f"g{i}"], "args": ["s"]})
        funcs.append({"name": f"g{i}", "args": [{"name": "x", "type": "int"}], "type": "int",
                      "instrs": [_const("k", i % 5), _op("add", "y", "x", "k"),
                                 {"op": "ret", "args": ["y"]}]})
    main.append({"op": "print", "args": ["s"]})
    return {"functions": [_main(main)] + funcs}


# name -> (generator, table size, (output, dynamic count) as a function of the size)
SHAPES = {
    "jmp-chain": (jmp_chain, 600, lambda n: (f"{n}\n", 3 + 2 * n)),
    "straight-line": (straight_line, 100_000, lambda n: (f"{n}\n", n + 3)),
    "nested-loops": (nested_loops, 120, lambda n: ("1\n", 7 * n + 4)),
    "many-variables": (many_variables, 20_000, lambda n: (f"{3 * (n // 7) * 7 + sum(range(n % 7))}\n", 2 + 2 * n)),
    "call-chain": (call_chain, 3000, lambda n: (f"{n}\n", 3 + 4 * n - 1)),
    "many-functions": (many_functions, 3000, lambda n: (f"{2 * (n // 5) * 5 + sum(range(n % 5))}\n", 2 + 4 * n)),
}


def program(shape, size):
    return SHAPES[shape][0](size)


def expected(shape, size):
    """(stdout, total_dyn_inst) of the shape's program at that size."""
    return SHAPES[shape][2](size)
