"""`bril.interp` is `bril.interpreter.interp`: this name stays for passes written against it."""

import sys

from .interpreter import interp as _real

sys.modules[__name__] = _real
