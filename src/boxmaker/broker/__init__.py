"""brokerd: the daemon that holds every tool and every grant (SPEC section 14)."""
