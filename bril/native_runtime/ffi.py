"""The C types and calls that running native code needs, made from `_ctypes`.

`ctypes` is a Python layer over its C core `_ctypes`; importing the layer costs
every `brili --jit` run that loads cached native code about 1.5 ms (a warm run
of a short program takes 20-30 ms), and such a run uses a handful of its
types.  These are the same types (a simple type is a `_SimpleCData` subclass
with a type code; a function type a `CFuncPtr` subclass with flags, result
and argument types), made as ctypes makes them.  Code that compiles (LLVM,
llvmlite) imports ctypes anyway and may use either.

    handle = dlopen(path, RTLD_GLOBAL)       the shared object (None: this process)
    address = symbol(handle, "name")         a symbol's address (int)
    f = function(address, c_int64, c_void_p) a callable C function
    c_int64.from_address(symbol(h, "var"))   a C variable
    string_at(address, n) -> bytes           n bytes copied from memory
"""

import _ctypes
from _ctypes import RTLD_GLOBAL, RTLD_LOCAL, byref  # noqa: F401 (the module's API)


def _simple(name, code):
    """A simple C type, as ctypes makes c_int64 & co.: its struct-module type code."""
    return type(name, (_ctypes._SimpleCData,), {"_type_": code})


c_int64 = _simple("c_int64", "q")
c_int = _simple("c_int", "i")
c_double = _simple("c_double", "d")
c_void_p = _simple("c_void_p", "P")
# (unsigned long: the size of a pointer wherever dlopen is, LP64 and 32-bit POSIX)
c_size_t = _simple("c_size_t", "L")
c_ssize_t = _simple("c_ssize_t", "l")
c_char = _simple("c_char", "c")
c_uint8 = _simple("c_uint8", "B")
c_char_p = _simple("c_char_p", "z")
py_object = _simple("py_object", "O")


def dlopen(path, mode=RTLD_LOCAL):
    """The handle of a shared object, loaded (path None: the running process)."""
    return _ctypes.dlopen(path, mode)


def symbol(handle, name):
    """The address of `name` in the shared object `handle`; AttributeError if none."""
    try:
        return _ctypes.dlsym(handle, name)
    except OSError as e:
        raise AttributeError(f"{name}: {e}") from None


_function_types = {}


def function(address, restype, *argtypes, python_api=False):
    """The C function at `address`, callable from Python (`python_api`: a function
    of the Python C API, called holding the GIL, its Python errors raised)."""
    flags = _ctypes.FUNCFLAG_PYTHONAPI if python_api else _ctypes.FUNCFLAG_CDECL
    key = (restype, argtypes, flags)
    kind = _function_types.get(key)
    if kind is None:
        kind = _function_types[key] = type("CFunction", (_ctypes.CFuncPtr,), {
            "_flags_": flags, "_restype_": restype, "_argtypes_": argtypes})
    return kind(address)


def string_at(address, n):
    """n bytes at address, copied."""
    return (c_char * n).from_address(address).raw
