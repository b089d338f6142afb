"""`find_tool {query}`: the registry's best matches for the model's words (`tool_search.py`
ranks them), as JSON schemas to call with `call_tool`. An MCP server's schemas are its words:
an answer holding one is untrusted. Asked while a configured server has not yet given its
first list, it waits for it (within that server's start time and the call's), and says which
servers are still not there, so the model does not conclude that a tool is nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs
import trio

from ..proto import DataClass, ResultResponse, encode, unstructure
from ..tools import local
from .registry import MOST_FOUND, Registry, server_of

if TYPE_CHECKING:  # the MCP SDK is imported only by a brokerd with servers to run
    from .mcp.server import McpServer

__all__ = ["find_text", "find_tool"]


def find_text(registry: Registry, query: str) -> ResultResponse:
    """What `find_tool` answers: the best schemas as JSON text, how many more matched, and
    how to call one; or that none matches. An MCP server's schema is its server's words, so
    an answer that holds one is untrusted."""
    found, more = registry.find(query)
    if not found:
        return local("No tool matches.")
    schemas = encode([unstructure(schema) for schema in found]).decode()
    also = f"\n{more} more tools match: ask with other words to see them." if more else ""
    text = f"{schemas}{also}\nCall it with call_tool."
    if any(server_of(schema.name) is not None for schema in found):  # an MCP server's words
        return ResultResponse(text, DataClass.PRIVATE, untrusted=True, truncated=False)
    return local(text)


async def find_tool(
    registry: Callable[[], Registry], servers: Mapping[str, McpServer], query: str
) -> ResultResponse:
    """`find_tool`'s answer; while it finds fewer than it may give and a configured MCP
    server has not yet given its first list, it waits for those lists first (each within
    its server's start time and the call's), then says which servers are still not
    there."""
    if len(registry().find(query)[0]) < MOST_FOUND:
        unlisted = [s for s in servers.values() if not s.first_listed.is_set()]
        async with trio.open_nursery() as nursery:
            for server in unlisted:
                nursery.start_soon(server.first_listing)
    answer = find_text(registry(), query)
    missing = [s for s in servers.values() if not s.first_listed.is_set()]
    if not missing:
        return answer
    said = "; ".join(f"{s.name} ({s.state}{': ' + s.reason if s.reason else ''})" for s in missing)
    note = (
        f"\n(Not there yet, so not searched: the MCP servers {said}. Their tools may "
        "match: ask again later.)"
    )
    quoted = any(s.reason for s in missing)  # a reason may quote the server
    return attrs.evolve(answer, content=answer.content + note, untrusted=answer.untrusted or quoted)
