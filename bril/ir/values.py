"""Bril run-time values: how they print and how `@main` arguments become values.

Representation used by every Python engine:

    int    -> Python int (always within signed 64 bits)
    bool   -> Python bool (checked with `type(v) is bool`; bool is not an int here)
    float  -> Python float
    char   -> Python str of one code point
    ptr    -> a tuple (data, offset, region), see `bril.interpreter.heap`
    undef  -> the sentinel `UNDEF` (ssa2 `undef`); only `id`/`set`/`get` accept it

Printing follows the reference interpreter (JavaScript): floats with
`toFixed(17)`, or `toExponential(17)` when |log10|x|| >= 10, ties rounded away
from zero; pointers print as JavaScript prints an object.
"""

import math

from . import messages as M
from .errors import BrilError
from .ops import INT_MAX, INT_MIN, wrap64


class _Undef:
    """The value of an ssa2 `undef` instruction."""
    __slots__ = ()

    def __repr__(self):
        return "UNDEF"


UNDEF = _Undef()

OBJECT_TEXT = "[object Object]"     # how JavaScript prints an object (a pointer, a ptr type)

# Exact decimal arithmetic is needed only for ties (rare): imported on first use.

def _decimal():
    from decimal import ROUND_HALF_UP, Context, Decimal
    exact = Context(prec=1200, rounding=ROUND_HALF_UP)   # a double's exact value fits
    return Decimal, exact, Decimal("1e-17")


def _fixed17_exact(x):
    Decimal, exact, unit = _decimal()
    d = Decimal(x).quantize(unit, context=exact)
    return f"{d:f}"


def _exp17_exact(x):
    Decimal, exact, unit = _decimal()
    sign = "-" if x < 0 else ""
    d = Decimal(abs(x))
    exp = d.adjusted()
    mant = d.scaleb(-exp, context=exact).quantize(unit, context=exact)
    if mant >= 10:                      # 9.99..95 rounded up to 10
        exp += 1
        mant = d.scaleb(-exp, context=exact).quantize(unit, context=exact)
    return f"{sign}{mant:f}e{'+' if exp >= 0 else '-'}{abs(exp)}"


def format_float(x):
    """A float as the reference prints it (JavaScript toFixed/toExponential, 17 digits).

    C's `%.17f`/`%.17e` round exact ties to even where JavaScript rounds them away
    from zero; a tie needs a short exact binary fraction, tested cheaply below, and
    only then the exact decimal path runs."""
    if x != x:
        return "NaN"
    if x == 0.0:
        return "-0.00000000000000000" if math.copysign(1.0, x) < 0 else "0.00000000000000000"
    ax = abs(x)
    if ax == math.inf:
        return "Infinity" if x > 0 else "-Infinity"
    if abs(math.log10(ax)) >= 10:
        # Ties only for 1e10 <= |x| < 1e18 with a fraction of at most 8 bits.
        if ax < 1e18 and ax >= 1e10 and ax != math.floor(ax):
            return _exp17_exact(x)
        s = "%.17e" % x
        mant, _, exp = s.partition("e")
        sign = exp[0]
        digits = exp[1:].lstrip("0") or "0"
        return f"{mant}e{sign}{digits}"
    # A tie at the 17th decimal needs x = odd multiple of 2**-18.
    scaled = ax * 262144.0
    if scaled == math.floor(scaled) and (ax * 131072.0) != math.floor(ax * 131072.0):
        return _fixed17_exact(x)
    return "%.17f" % x


UNSET = object()        # a `const` without a value: the variable becomes unset (as in the reference)


def const_value(instr):
    """The value a `const` instruction assigns (UNSET: none, the variable becomes
    unset); raises BrilError with the reference's message for a value it refuses
    (every tier raises it when, and only if, the instruction runs)."""
    v = instr.get("value")
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        if instr.get("type") == "float":
            try:
                return float(v)
            except OverflowError:
                return math.inf if v > 0 else -math.inf
        if isinstance(v, float) and (v != v or v in (math.inf, -math.inf)):
            raise BrilError(M.text(M.CONST_NOT_INT, value=v))
        return wrap64(math.floor(v))
    if isinstance(v, str):
        if len(v) != 1:
            raise BrilError(M.CONST_CHAR_LENGTH)
        return v
    return UNSET


def js_type_text(typ):
    """A Bril type as JavaScript's template strings show it (objects as [object Object])."""
    if isinstance(typ, str):
        return typ
    if typ is None:
        return "undefined"
    return OBJECT_TEXT


def format_value(v):
    """One value of any type for `print`; `print` of `undef` is an error."""
    t = type(v)
    if t is int:
        return str(v)
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return format_float(v)
    if t is str:
        return v
    if t is tuple:
        return OBJECT_TEXT
    if v is UNDEF:
        raise BrilError(M.PRINT_UNDEFINED)
    raise BrilError(f"cannot print value {v!r}")


def kind_of(v):
    """The Bril type name of a run-time value ('ptr' for pointers, 'undef' for undef)."""
    t = type(v)
    if t is int:
        return "int"
    if t is bool:
        return "bool"
    if t is float:
        return "float"
    if t is str:
        return "char"
    if t is tuple:
        return "ptr"
    return "undef"


def type_cmp(lhs, rhs):
    """The reference's `typeCmp` between a call's declared type and the callee's."""
    if lhs == "any" or rhs == "any":
        return True
    if lhs in ("int", "bool", "float", "char"):
        return lhs == rhs
    if isinstance(rhs, dict) and "ptr" in rhs:
        return type_cmp(lhs.get("ptr") if isinstance(lhs, dict) else None, rhs["ptr"])
    return False


# --- @main arguments ------------------------------------------------------------------
#
# The reference parses an int argument with JavaScript's Number() and a float one by
# requiring Number() and parseFloat() to agree.  We do the same, except that decimal
# integers are read exactly (no detour through a double).

_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" \
            "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_DECIMAL = r"(?:Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
_PATTERNS = None


def _patterns():
    """(number, prefix, radix) regular expressions, compiled on first use: `re` costs
    start-up time, and plain decimal arguments never need it."""
    global _PATTERNS
    if _PATTERNS is None:
        import re
        _PATTERNS = (re.compile(r"[+-]?" + _DECIMAL + r"\Z"), re.compile(r"[+-]?" + _DECIMAL),
                     re.compile(r"0(?:[xX]([0-9a-fA-F]+)|[oO]([0-7]+)|[bB]([01]+))\Z"))
    return _PATTERNS


_FLOAT_CHARS = frozenset("0123456789.eE+-")


def _plain_decimal(t):
    """float(t) if t is a plain decimal literal (on which Python and JavaScript agree),
    else None."""
    if t and _FLOAT_CHARS.issuperset(t):
        try:
            return float(t)
        except ValueError:
            return None
    return None


def _decimal_int(t):
    """True if t is [+-]?[0-9]+ (ASCII digits)."""
    body = t[1:] if t[:1] in ("+", "-") else t
    return body.isascii() and body.isdigit()


def _decimal_value(s):
    sign = -1.0 if s.startswith("-") else 1.0
    body = s.lstrip("+-")
    if body == "Infinity":
        return sign * math.inf
    return float(s)


def js_number(s):
    """JavaScript `Number(s)` for a string: an int for radix literals, else a float (NaN if bad)."""
    t = s.strip(_JS_SPACE)
    if t == "":
        return 0.0
    x = _plain_decimal(t)
    if x is not None:
        return x
    number, _, radix = _patterns()
    m = radix.match(t)
    if m:
        digits, base = next((g, b) for g, b in zip(m.groups(), (16, 8, 2)) if g)
        return int(digits, base)
    if number.match(t):
        return _decimal_value(t)
    return math.nan


def js_parse_float(s):
    """JavaScript `parseFloat(s)`: the longest decimal prefix after leading spaces."""
    t = s.lstrip(_JS_SPACE)
    x = _plain_decimal(t)
    if x is not None:
        return x
    m = _patterns()[1].match(t)
    if not m:
        return math.nan
    text = m.group(0)
    # A trailing 'e' without digits is not part of the number (regex already excludes it).
    return _decimal_value(text)


def parse_int_arg(s):
    t = s.strip(_JS_SPACE)
    if _decimal_int(t):
        n = int(t)
    else:
        x = js_number(s)
        if isinstance(x, int):
            n = x
        elif x != x or x in (math.inf, -math.inf) or x != math.floor(x):
            raise BrilError(M.text(M.MAIN_INT, text=s))
        else:
            n = int(x)
    if not INT_MIN <= n <= INT_MAX:
        raise BrilError(M.text(M.MAIN_INT_RANGE, text=s))
    return n


def parse_float_arg(s):
    f = js_parse_float(s)
    f2 = js_number(s)
    if f == f and f == f2:
        return f
    raise BrilError(M.text(M.MAIN_FLOAT, text=s))


def parse_bool_arg(s):
    if s == "true":
        return True
    if s == "false":
        return False
    raise BrilError(M.text(M.MAIN_BOOL, text=s))


def parse_char_arg(s):
    if len(s) == 1:
        return s
    raise BrilError(M.text(M.MAIN_CHAR, text=s))


_ARG_PARSERS = {
    "int": parse_int_arg,
    "float": parse_float_arg,
    "bool": parse_bool_arg,
    "char": parse_char_arg,
}

MISSING = object()   # a main parameter of a type the reference does not parse (left unset)


def parse_main_args(params, argv):
    """Values for @main's parameters from command-line strings.

    `params` is the function's "args" list.  A parameter of another type (any,
    pointers) is left unset, as the reference does: it is `MISSING` in the result."""
    if len(argv) != len(params):
        raise BrilError(M.text(M.MAIN_ARITY, expected=len(params), found=len(argv)))
    values = []
    for p, s in zip(params, argv):
        typ = p.get("type")
        parse = _ARG_PARSERS.get(typ) if isinstance(typ, str) else None
        values.append(parse(s) if parse else MISSING)
    return values
