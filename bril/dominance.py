"""`bril.dominance` is `bril.analysis.dominance`: this name stays for passes written against it."""

import sys

from .analysis import dominance as _real

sys.modules[__name__] = _real
