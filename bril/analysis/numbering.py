"""Value numbering: the one table behind local value numbering (`lvn`, per basic
block) and the tracer's optimizer (`bril.tracing.trace_opt`, over a whole trace).

Every value gets a number; a variable holds one number at a time; an expression
(op and operand numbers, commutative operands sorted) or a constant maps to the
number that first computed it, so a repeat can become a copy of a variable that
still holds it.  What the two users add is policy: `lvn` renames overwritten
definitions so values stay available, the tracer folds what guards make known.
"""

from ..ir.ops import OPS, float2bits


def const_key(typ, value):
    """The table key of a constant of declared type `typ`: exact (0.0 and -0.0
    differ, `true` is not 1), and a constant of another declared type is another
    value even when the Python values are equal."""
    if isinstance(value, float):
        return ("const", str(typ), "float", float2bits(value))
    return ("const", str(typ), type(value).__name__, value)


class ValueNumbers:
    __slots__ = ("num_of", "holders", "consts", "table", "count")

    def __init__(self):
        self.num_of = {}        # variable -> value number it holds
        self.holders = {}       # value number -> variables holding it now (first: its home)
        self.consts = {}        # value number -> the constant it is
        self.table = {}         # expression or constant key -> value number
        self.count = 0

    def new(self):
        self.count += 1
        return self.count

    def number(self, var):
        """The number of the value var holds; a variable not seen yet (live-in)
        gets a fresh number, which it holds."""
        num = self.num_of.get(var)
        if num is None:
            num = self.num_of[var] = self.new()
            self.holders[num] = [var]
        return num

    def assign(self, var, num):
        """Variable var now holds value num (and no longer its old value)."""
        old = self.num_of.get(var)
        if old is not None:
            hs = self.holders.get(old)
            if hs and var in hs:
                hs.remove(var)
        self.num_of[var] = num
        self.holders.setdefault(num, []).append(var)

    def home(self, num):
        """A variable holding value num now, or None."""
        hs = self.holders.get(num)
        return hs[0] if hs else None

    def of_const(self, key, value):
        """The number of a constant (`const_key` or any exact key)."""
        num = self.table.get(key)
        if num is None:
            num = self.table[key] = self.new()
            self.consts[num] = value
        return num

    def of_expr(self, op, nums, *qualifiers):
        """(number, computed before) of op applied to values nums."""
        if OPS[op].commutative:
            nums = sorted(nums)
        key = (op, *qualifiers, tuple(nums))
        num = self.table.get(key)
        if num is None:
            num = self.table[key] = self.new()
            return num, False
        return num, True
