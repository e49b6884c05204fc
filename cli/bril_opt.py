"""`bril-opt`: run optimization passes over a Bril JSON program (stdin to stdout)."""

import sys


def optimize_program(optimize, loads, list_passes, passes):
    """The command's work: PASSes (and -O first, --load's last) over stdin's program."""
    from bril.passes import registry

    for path, name in loads:
        registry.load_file(path, name)
    if list_passes:
        rows = [(p.name, p.description) for p in registry.PASSES.values()]
        rows += [(p.name, p.description) for p in registry.LOADED.values()]
        rows += [(name, f"plug-in: {ep.value}") for name, ep in
                 sorted(registry.entry_points().items())]
        width = max(len(n) for n, _ in rows)
        for name, description in rows:
            print(f"{name:<{width}}  {description}")
        print(f"\n-O runs: {' '.join(registry.O_PIPELINE)}")
        return 0
    names = (["O"] if optimize else []) + list(passes)
    names += [name for _, name in loads if name not in passes]
    pipeline = registry.resolve_all(names)      # every spec resolved before any runs
    from bril.ir.program import load_program

    from bril.cli import stdin_bytes
    prog = load_program(stdin_bytes())
    prog = registry.run_pipeline(prog, pipeline)
    from bril.ir.printer import program_json
    sys.stdout.write(program_json(prog) + "\n")        # json.dumps(indent=2, sort_keys), faster
    return 0


def plain(argv):
    """The work of `bril-opt [-O] [PASS...]` (a pipeline's forms: no other option),
    else None."""
    if any(a.startswith("-") and a != "-O" for a in argv):
        return None
    return lambda: optimize_program("-O" in argv, (), False, [a for a in argv if a != "-O"])


def command():
    import click
    from bril.cli import PLUGIN_HELP

    @click.command(context_settings={"help_option_names": ["-h", "--help"]},
                   epilog=PLUGIN_HELP)
    @click.option("-O", "optimize", is_flag=True,
                  help="Run the default optimization pipeline (before any PASS given).")
    @click.option("--load", "loads", nargs=2, multiple=True, metavar="FILE.py NAME",
                  help="Make the function NAME of the Python file FILE.py a pass called NAME "
                       "(repeatable); it runs where NAME is among the PASSes, else last.")
    @click.option("--list", "list_passes", is_flag=True,
                  help="Describe the passes (with installed plug-ins) and exit.")
    @click.argument("passes", nargs=-1)
    def bril_opt(optimize, loads, list_passes, passes):
        """Read a Bril JSON program on stdin, run the PASSes in order, write JSON on stdout.

        A PASS is a built-in pass (see --list), a name given to --load, a pass an
        installed package declares in the entry-point group `bril.passes`, a
        `module:function` or `file.py:function` spec (a function from a program to
        a program), or O for the -O pipeline; commas separate passes in one
        argument (`-O` is `O,PASS...`).  With no PASS and no -O the program is only
        checked and copied.  A plug-in that raises or returns a malformed program
        is one `error: pass NAME ...` line, exit status 2.
        """
        return optimize_program(optimize, loads, list_passes, passes)
    return bril_opt


def main():
    from bril.cli import run_plain_or_click
    run_plain_or_click(plain, command)


if __name__ == "__main__":
    main()
