"""The sandbox `shell` and `run_cell` run in, and its walls (SPEC section 15)."""
