"""`bxctl`, the command-line channel: chat, sessions, approvals, memory and the rest."""
