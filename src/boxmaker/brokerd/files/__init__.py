"""The file tools and the roots they reach (SPEC section 14)."""
