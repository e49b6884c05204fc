"""Ways of running a program that several test modules share: in this process
(`run_outcome`), as `brili` in a subprocess (`run_brili`), and as an executable
built by brilc's back end (`build`, `run_native`).  Each test module used to
carry its own copy of these."""

import io
import json
import os
import subprocess
import sys

from bril.interpreter import interp
from bril.ir.errors import BrilError
from bril.ir.text import parse_program

BRILI = [sys.executable, "-P", "-m", "bril.cli.brili"]


def run_outcome(prog, args=(), **options):
    """(stdout, count or None, error message or None) of a run of prog in this
    process; options go to `bril.interpreter.interp.run`."""
    out = io.StringIO()
    try:
        count = interp.run(prog, [str(a) for a in args], out=out, **options)
    except BrilError as e:
        return out.getvalue(), None, e.message
    return out.getvalue(), count, None


def bril_json(text):
    """Bril text as the JSON program `brili` reads."""
    return json.dumps(parse_program(text))


def run_brili(args, stdin="", *, timeout=120, **env):
    """`brili ARGS` in a subprocess (this Python's), output captured: text in and
    out when stdin is a str, bytes when it is bytes.  env: variables to set on top
    of ours (e.g. BRIL_CACHE_DIR=tmp_path)."""
    environment = dict(os.environ, **{k: str(v) for k, v in env.items()}) if env else None
    return subprocess.run([*BRILI, *args], input=stdin, capture_output=True,
                          text=isinstance(stdin, str), env=environment, timeout=timeout)


# --- executables (brilc's back end, in process) ------------------------------------------

class Built:
    def __init__(self, exe=None, error=None):
        self.exe = exe          # path of the executable, or None
        self.error = error      # the BrilError brilc raised, or None


def build(prog, exe, base_dir=None, lib_dirs=(), filename=None):
    """prog compiled to the executable `exe`, as brilc compiles it."""
    from bril.backend import llvm_lower, native
    try:
        module = llvm_lower.lower_program(prog, base_dir=base_dir, lib_dirs=lib_dirs,
                                          filename=filename)
        native.build_executable(module, exe)
    except BrilError as e:
        return Built(error=e)
    except Exception as e:      # a bug: fail the one test that needs this program
        return Built(error=BrilError(f"crashed: {type(e).__name__}: {e}"))
    return Built(exe=exe)


class Run:
    def __init__(self, done):
        self.returncode = done.returncode
        self.stdout = done.stdout.decode("utf-8")
        self.stderr = done.stderr.decode("utf-8")


def run_native(built, args=(), profile=True):
    """A run of a built executable (with `-p` unless profile is false)."""
    assert built.error is None, f"brilc failed: {built.error}"
    argv = [str(built.exe)] + (["-p"] if profile else []) + ["--"] + [str(a) for a in args]
    return Run(subprocess.run(argv, capture_output=True, timeout=120))
