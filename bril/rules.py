"""`bril.rules` is `bril.ir.rules`: this name stays for passes written against it."""

import sys

from .ir import rules as _real

sys.modules[__name__] = _real
