"""The run-time side of native code: the C run-time library (brilrt.c) and its loader,
ctypes helpers, the slot layout values cross in (resume data), Python names of generated
code.
"""
