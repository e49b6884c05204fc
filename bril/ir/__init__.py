"""The program and its text: errors and messages, the op table, values, the well-formedness
rules, parsing and printing, loading and linking, the trace label convention.
"""
