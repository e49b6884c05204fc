"""A Python toolchain for Bril with speculative tracing and native code."""
