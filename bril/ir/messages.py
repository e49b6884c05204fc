"""Every run-time error message of every engine, written once.

The Python tiers (`bril.interpreter.cold`, `bril.interpreter.codegen`,
`bril.interpreter.heap`, `bril.ir.ops`), the LLVM lowering
(`bril.backend.llvm_lower`) and the C runtime (`native_runtime/brilrt.c`, through the
header `c_header()` writes when the runtime is built) all say what the reference
interpreter says, from this table, so a message fixed here is fixed everywhere.

A message is a template: `{name:d}` stands for an integer (`%lld` in C), `{name}`
for text (`%s`).  `text(MESSAGE, name=value, ...)` fills one in.
"""

# --- operands and calls -------------------------------------------------------------

OPERAND_KIND = "{op} argument {i:d} must be a {kind}"
ARGCOUNT = "{op} takes {expected:d} argument(s); got {found:d}"
UNKNOWN_OPCODE = "unknown opcode {op}"
UNKNOWN_TYPE = "unknown type {type}"
UNDEFINED_VARIABLE = "undefined variable {name}"
NO_SET = "get without corresponding set for {name}"
ARGUMENT_MISMATCH = "function argument type mismatch"
RESULT_MISMATCH = "type of value returned by function does not match destination type"
DECLARATION_MISMATCH = "type of value returned by function does not match declaration"
VOID_IN_VALUE_CALL = "function with void return type used in value call"
UNTYPED_DEST = "function call must include a type if it has a destination"
VALUE_WITHOUT_DEST = "unexpected value returned without destination"
NONVOID_NO_VALUE = "non-void function (type: {type}) doesn't return anything"
MISSING_FUNCS = "missing functions; expected at least 1"
FUNCS_COUNT = "expecting 1 functions; found {found:d}"
ARITY = "function expected {expected:d} arguments, got {found:d}"
RET_ARGCOUNT = "ret takes 0 or 1 argument(s); got {found:d}"
RECURSION = "recursion too deep (more than {depth:d} nested calls)"
# The nested Bril calls every engine allows: the next one fails with RECURSION.  (The
# reference, on a 1 MB JavaScript stack, stops below 5,000; not in its data.)
MAX_CALL_DEPTH = 200_000
NO_FUNCTION = "no function of name {name} found"
MULTIPLE_FUNCTIONS = "multiple functions of name {name} found"

# --- values ----------------------------------------------------------------------

DIVISION_BY_ZERO = "division by zero"
BAD_CHAR = "value {value:d} cannot be converted to char"
CONST_NOT_INT = "cannot convert {value} to an int"
CONST_CHAR_LENGTH = "char must have one character"
PRINT_UNDEFINED = "print of undefined value"
PHI_NO_LABEL = "phi: no predecessor label has been executed"
PHI_NO_ARGUMENT = "phi has no argument for label {label}"

# --- speculation -----------------------------------------------------------------

CALL_IN_SPECULATION = "call not allowed during speculation"
RET_IN_SPECULATION = "ret not allowed during speculation"
IMPLICIT_RETURN_IN_SPECULATION = "implicit return in speculative state"
COMMIT_OUTSIDE = "commit in non-speculative state"
ABORT_OUTSIDE = "abort in non-speculative state"

# --- memory ----------------------------------------------------------------------

ALLOC_NON_POINTER = "cannot allocate non-pointer type {type}"
ALLOC_NOT_POSITIVE = "must allocate a positive amount of memory: {amount:d} <= 0"
ALLOC_TOO_LARGE = "cannot allocate {amount:d} entries"
BAD_FREE = ("Tried to free illegal memory location base: {base:d}, offset: {offset:d}. "
            "Offset must be 0.")
BAD_ACCESS = "Uninitialized heap location {base:d} and/or illegal offset {offset:d}"
UNINITIALIZED = "Pointer {name} points to uninitialized data"
STORE_KIND = "store argument 1 must be a {type}"
LEAK = "Some memory locations have not been freed by end of execution."
OUT_OF_MEMORY = "out of memory"
# Native code only: a pointer held as an `any` value is used where a pointer of another
# type is expected (its cells' layout is that of its own type; the interpreter goes on).
ANY_POINTER = "native code does not support using a pointer of another type as a {type}"

# --- @main's arguments -----------------------------------------------------------------

MAIN_ARITY = "mismatched main argument arity: expected {expected:d}; got {found:d}"
MAIN_INT = "int argument to main must be an integer; got {text}"
MAIN_INT_RANGE = "int argument to main is out of the 64-bit range; got {text}"
MAIN_FLOAT = "float argument to main must not be 'NaN'; got {text}"
MAIN_BOOL = "boolean argument to main must be 'true'/'false'; got {text}"
MAIN_CHAR = "char argument to main must have one character; got {text}"


def text(message, **fields):
    """A message with its fields filled in."""
    return message.format(**fields) if fields else message


# The messages the C runtime prints itself (the others reach it as text from the
# lowering), under the names of its header.
C_MESSAGES = {
    "BRT_MSG_BAD_ACCESS": BAD_ACCESS, "BRT_MSG_UNINITIALIZED": UNINITIALIZED,
    "BRT_MSG_BAD_CHAR": BAD_CHAR, "BRT_MSG_ALLOC_NOT_POSITIVE": ALLOC_NOT_POSITIVE,
    "BRT_MSG_ALLOC_TOO_LARGE": ALLOC_TOO_LARGE, "BRT_MSG_BAD_FREE": BAD_FREE,
    "BRT_MSG_RECURSION": RECURSION, "BRT_MSG_LEAK": LEAK, "BRT_MSG_OUT_OF_MEMORY": OUT_OF_MEMORY,
    "BRT_MSG_MAIN_INT": MAIN_INT, "BRT_MSG_MAIN_INT_RANGE": MAIN_INT_RANGE,
    "BRT_MSG_MAIN_FLOAT": MAIN_FLOAT,
    "BRT_MSG_MAIN_BOOL": MAIN_BOOL, "BRT_MSG_MAIN_CHAR": MAIN_CHAR,
    "BRT_MSG_MAIN_ARITY": MAIN_ARITY,
}


def c_format(message):
    """The printf form of a message: `{x:d}` -> `%lld`, `{x}` -> `%s`."""
    out = []
    i = 0
    while i < len(message):
        c = message[i]
        if c == "{":
            j = message.index("}", i)
            out.append("%lld" if message[i + 1:j].endswith(":d") else "%s")
            i = j + 1
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def c_string(text):
    """A C string literal of `text` (UTF-8): printable ASCII as is, everything else
    as three-digit octal escapes (which, unlike hex ones, never run into the next
    character)."""
    out = ['"']
    for byte in text.encode("utf-8"):
        c = chr(byte)
        if c in '"\\':
            out.append("\\" + c)
        elif 32 <= byte < 127:
            out.append(c)
        else:
            out.append("\\%03o" % byte)
    out.append('"')
    return "".join(out)


def c_header():
    """`brilrt_messages.h`: the runtime's messages as C string literals, and the
    limit on nested calls.  (Made at every start that loads native code, to key the
    runtime's build: no json.)"""
    lines = ["/* Generated by bril.ir.messages when the runtime is built: do not edit. */"]
    for name, message in C_MESSAGES.items():
        lines.append(f"#define {name} {c_string(c_format(message))}")
    lines.append(f"#define MAX_CALL_DEPTH {MAX_CALL_DEPTH}")
    return "\n".join(lines) + "\n"
