"""Tools over programs: benchmark runs (bril-bench) and CFG drawings (bril2dot)."""
