"""The code cache: where compiled code is kept across runs, and what it is keyed on."""
