"""brokerd: the daemon that holds every tool and every grant (SPEC section 14): the
registry, the policy, the file tools, the calls that wait for the owner (`service`), the
`broker.sock` server (`serve`) and the self-test before it starts (`selftest`)."""

from typing import TYPE_CHECKING, Any

from .hands import Hands
from .memory_tools import Memory
from .policy.decide import decide_call
from .policy.load import load_policy
from .policy.rules import (
    SHIPPED_POLICY,
    Decision,
    Policy,
    PolicyError,
    decide,
    parse_policy,
)
from .registry import Registry, RegistryEntry, builtin_registry
from .selftest import BrokerTest, broker_self_test
from .serve import BrokerServer
from .service import Broker, find_text

__all__ = [
    "SHIPPED_POLICY",
    "Broker",
    "BrokerServer",
    "BrokerTest",
    "Decision",
    "Hands",
    "McpServer",
    "Memory",
    "Policy",
    "PolicyError",
    "Registry",
    "RegistryEntry",
    "broker_self_test",
    "builtin_registry",
    "decide",
    "decide_call",
    "find_text",
    "load_policy",
    "parse_policy",
]

if TYPE_CHECKING:
    from .mcp.server import McpServer


def __getattr__(name: str) -> Any:
    """`McpServer`, imported when first asked for: the MCP SDK takes half a second to import,
    which only a brokerd with servers to run pays."""
    if name == "McpServer":
        from .mcp.server import McpServer

        return McpServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
