"""`bril.dataflow` is `bril.analysis.dataflow`: this name stays for passes written against it."""

import sys

from .analysis import dataflow as _real

sys.modules[__name__] = _real
