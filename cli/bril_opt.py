"""`bril-opt`: run optimization passes over a Bril JSON program (stdin to stdout)."""

import sys

import click

from bril.errors import BrilError


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-O", "optimize", is_flag=True,
              help="Run the default optimization pipeline (before any PASS given).")
@click.option("--list", "list_passes", is_flag=True, help="Describe the passes and exit.")
@click.argument("passes", nargs=-1)
def bril_opt(optimize, list_passes, passes):
    """Read a Bril JSON program on stdin, run the PASSes in order, write JSON on stdout.

    With no PASS and no -O the program is only checked and copied.
    """
    from bril.passes import registry

    if list_passes:
        width = max(len(n) for n in registry.PASSES)
        for p in registry.PASSES.values():
            click.echo(f"{p.name:<{width}}  {p.description}")
        click.echo(f"\n-O runs: {' '.join(registry.O_PIPELINE)}")
        return 0
    bad = registry.unknown(passes)
    if bad:
        raise BrilError(f"unknown pass '{bad[0]}' (see bril-opt --list)")
    from bril.program import load_program

    prog = load_program(sys.stdin.buffer.read())
    names = (registry.O_PIPELINE if optimize else []) + list(passes)
    prog = registry.run_pipeline(prog, names)
    from bril.printer import program_json
    sys.stdout.write(program_json(prog) + "\n")        # json.dumps(indent=2, sort_keys), faster
    return 0


def main():
    from bril.cli import no_cycle_collection
    from bril.errors import run_click
    with no_cycle_collection():
        run_click(bril_opt)


if __name__ == "__main__":
    main()
