"""Programs of the dynamic extension (`any`) that native code must run exactly as the
interpreter does: shared by test_aot (brilc) and test_jit (`brili --jit`).

`DYNAMIC_LOOP` fills a ptr<any> region with values of every kind in a loop and
reads them back in another (through `any` parameters and results, and typed
variables that hold what the interpreter gives them unchecked); its first argument
picks an operation that meets a value of the wrong kind half way through the
loop (`DYNAMIC_LOOP_ERRORS`: mode -> the interpreter's message).

The programs themselves are in test/programs/dynamic/.
"""

from corpus import program_text

DYNAMIC_LOOP = program_text("dynamic/loop")

# mode -> the error at the first value of the wrong kind after half the loop (0: none)
DYNAMIC_LOOP_ERRORS = {
    0: None,
    1: "add argument 0 must be a int",
    2: "function argument type mismatch",
    3: "type of value returned by function does not match destination type",
    4: "store argument 1 must be a int",
    5: "br argument 0 must be a bool",
    6: "and argument 0 must be a bool",
    7: "ptradd argument 1 must be a int",
    8: "char2int argument 0 must be a char",
    9: "mul argument 0 must be a int",
}

# Small programs at the edges, each run with no arguments.
DYNAMIC_UNITS = {name: program_text(f"dynamic/{name}") for name in [
    "any_print_kinds", "any_float_loaded_as_int", "any_id_does_not_check",
    "any_results", "any_pointer_in_cell", "any_speculation",
    "any_shadows", "any_br", "any_argument_checked", "any_cells_every_kind",
    "any_uninitialised_cell"]}


# Programs with a mode argument: name -> (source, {mode: the error, or None}).
DYNAMIC_MODES = {
    # ssa2's undefined value held as an `any` value (in variables, a ptr<any> cell,
    # `any` arguments and results, a shadow); mode -> the error that meets it.
    "dynamic_undef": (program_text("dynamic/undef"), {
        0: "print of undefined value",
        1: "add argument 0 must be a int",
        2: "type of value returned by function does not match destination type",
        3: "print of undefined value",
    }),
    # load, store and ptradd through pointers in variables declared `any` (the cells'
    # layout known from the tag at run time); mode -> the error (0: none).
    "dynamic_through_any": (program_text("dynamic/through_any"), {
        0: None,
        1: "store argument 1 must be a int",
        2: "ptradd argument 1 must be a int",
        3: "load argument 0 must be a Pointer",
    }),
}
