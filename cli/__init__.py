"""Command-line entry points (installed as `bril.cli`): thin wrappers over the library."""
