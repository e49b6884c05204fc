"""The Python engine's tiers: the heap, the cold tier, generated Python, and `run`."""
