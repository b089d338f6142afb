"""brokerd's errors: what a caller can act on, each saying why in its message.

    BrokerError
     ├── PolicyError        policy.toml cannot be read, is not a policy, grants a place it must
     │                      not, or an example does not hold (file, key, what was expected)
     ├── Denied             a file tool's path leaves its root, or names a device, FIFO or socket
     ├── Fixable            a problem the model can fix: no such file, not a folder, ...
     └── MissingCommand     an MCP server's program is not found (where it was looked for)

A tool's failure is a result (`FailedResponse`), never brokerd's end: these are raised inside
brokerd and answered in words. loopd's side of `broker.sock` has its own (`serving.BrokerDown`).
"""

from __future__ import annotations

__all__ = ["BrokerError", "Denied", "Fixable", "MissingCommand", "PolicyError"]


class BrokerError(Exception):
    """brokerd cannot do what was asked; `str(error)` says why."""


class PolicyError(BrokerError):
    """The policy cannot be used; the message names the file, the key and what was expected."""


class Denied(BrokerError):
    """The path leaves its root, or names a device, FIFO or socket; `str()` is the reason."""


class Fixable(BrokerError):
    """A problem the model can fix (no such file, not a folder); `str()` is the message."""


class MissingCommand(BrokerError):
    """The command's program is not found; `str()` says where it was looked for."""
