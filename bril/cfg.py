"""`bril.cfg` is `bril.analysis.cfg`: this name stays for passes written against it."""

import sys

from .analysis import cfg as _real

sys.modules[__name__] = _real
