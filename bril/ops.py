"""`bril.ops` is `bril.ir.ops`: this name stays for passes written against it."""

import sys

from .ir import ops as _real

sys.modules[__name__] = _real
