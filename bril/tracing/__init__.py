"""Tracing: recording hot loops, building, optimizing, selecting and splicing speculative
traces, value specialization.
"""
