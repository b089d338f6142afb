"""The policy: grants, rules for `shell`, and what the owner is asked (SPEC section 14)."""
