"""What an MCP server's tools are to the registry, and what their results are to the model.
Pure (SPEC section 16).

A tool of server `time` named `get_current_time` is `time.get_current_time` in the registry:
server names hold no dot, and brokerd's own tools none, so no two can collide. A listed tool
whose name, description or schema is not one a model can be given (too long, not an object
schema, a name of other characters) is left out and said in the server's state.

A result is text: the text blocks joined, `structuredContent` as JSON text where there is no
text block (servers send its JSON as text too, as the protocol asks; the SDK's own servers
wrap a plain answer as `{"result": ...}`), and a line naming each image, audio, blob or link
with its type and size (the bytes are not the model's to read). The images, audio and blobs
go to loopd as the result's attachments, which the session keeps beside its log, up to
`MOST_ATTACHED` bytes of base64 a result. `isError` is said as the first line. Every result
is untrusted: it is the server's word.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable

import mcp.types as types

from ...proto import Attachment, DataClass, ResultResponse, ToolSchema, encode
from ...tools import schema_problem
from ..files._walk import clean
from ..registry import McpTool

__all__ = ["MOST_RESULT", "McpTool", "listed_tools", "result_of"]

MOST_RESULT = 256 * 1024  # characters of a result's head and of its tail given to loopd (as shell)
MOST_DESCRIPTION = 4000  # characters of a tool's description
MOST_SCHEMA = 64 * 1024  # bytes of a tool's input schema, as compact JSON
MOST_TOOLS = 1000  # tools of one server
MOST_ATTACHED = 256 * 1024  # bytes of a result's attachments as JSON (base64), all together
MOST_ATTACHMENTS = 16  # of one result
ATTACHMENT_JSON = 64  # bytes of JSON an attachment costs beside its data
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MIME = re.compile(r"[A-Za-z0-9][\w.+-]{0,63}/[A-Za-z0-9][\w.+-]{0,63}")


def listed_tools(server: str, listed: Iterable[types.Tool]) -> tuple[list[McpTool], list[str]]:
    """The tools a server listed that a model can be given, and a line for each left out."""
    tools: list[McpTool] = []
    left_out: list[str] = []
    seen: set[str] = set()
    for tool in listed:
        problem = _problem(tool, seen)
        if problem is None and len(tools) >= MOST_TOOLS:
            problem = f"more than {MOST_TOOLS} tools"
        if problem is not None:
            left_out.append(f"{tool.name[:64]!r}: {problem}")
            continue
        seen.add(tool.name)
        description = clean(" ".join((tool.description or tool.title or "").split()))
        schema = ToolSchema(f"{server}.{tool.name}", description, dict(tool.input_schema))
        hints = tool.annotations
        tools.append(McpTool(schema, tool.name, bool(hints and hints.read_only_hint is True)))
    return tools, left_out


def _problem(tool: types.Tool, seen: set[str]) -> str | None:
    if not _NAME.fullmatch(tool.name):
        return "a name of more than 64 characters or of others than letters, digits, _ and -"
    if tool.name in seen:
        return "listed twice"
    if len(tool.description or "") > MOST_DESCRIPTION:
        return f"a description of more than {MOST_DESCRIPTION} characters"
    if tool.input_schema.get("type") != "object":
        return "an input schema that is not of an object"
    if len(encode(tool.input_schema)) > MOST_SCHEMA:
        return f"an input schema of more than {MOST_SCHEMA // 1024} KiB"
    return schema_problem(tool.input_schema)


def result_of(result: types.CallToolResult, data_class: DataClass) -> ResultResponse:
    """The model's text of `result`, untrusted, of the server's class; past `MOST_RESULT` its
    head and tail, saying how much was left out."""
    parts: list[str] = ["The tool reported an error:"] if result.is_error else []
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    attached: list[Attachment] = []
    for block in result.content:
        parts.append(_block(block, attached))
    if result.structured_content is not None and not texts:
        parts.append(encode(result.structured_content).decode())
    text = "\n".join(part for part in parts if part) or "(the tool returned nothing)"
    truncated = len(text) > 2 * MOST_RESULT
    if truncated:
        left = len(text) - 2 * MOST_RESULT
        cut = f"\n[CUT: {left:,} characters of the result left out]\n"
        text = text[:MOST_RESULT] + cut + text[-MOST_RESULT:]
    return ResultResponse(
        text,
        data_class,
        untrusted=True,
        truncated=truncated,
        attachments=tuple(attached),
        is_error=bool(result.is_error),
    )


def _block(block: types.ContentBlock, attached: list[Attachment]) -> str:
    match block:
        case types.TextContent(text=text):
            return text
        case types.ImageContent(mime_type=mime, data=data):
            return f"[image {_clean(mime)}, {_attach(mime, data, attached)}]"
        case types.AudioContent(mime_type=mime, data=data):
            return f"[audio {_clean(mime)}, {_attach(mime, data, attached)}]"
        case types.ResourceLink(uri=uri, name=name):
            return f"[a link to {_clean(str(uri))} ({_clean(name)}); not read]"
        case types.EmbeddedResource(resource=types.TextResourceContents(uri=uri, text=text)):
            return f"[resource {_clean(str(uri))}]\n{text}"
        case types.EmbeddedResource(resource=types.BlobResourceContents() as blob):
            mime = blob.mime_type or "application/octet-stream"
            kept = _attach(mime, blob.blob, attached)
            return f"[resource {_clean(str(blob.uri))}: {_clean(mime)}, {kept}]"
    return f"[a {_clean(str(getattr(block, 'type', 'block')))} block; not shown]"


def _attach(mime: str, data: str, attached: list[Attachment]) -> str:
    """Its size, and whether it is kept with the session's results: its bytes (not the
    model's to read) go to loopd as an attachment while they fit `MOST_ATTACHED` and
    `MOST_ATTACHMENTS`."""
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"{len(data):,} characters that are not base64; not kept"
    if len(attached) >= MOST_ATTACHMENTS:
        return f"{size:,} bytes; not shown, and not kept: a result keeps {MOST_ATTACHMENTS} at most"
    used = sum(len(a.data) + ATTACHMENT_JSON for a in attached)  # at most 16 of them
    if used + len(data) + ATTACHMENT_JSON > MOST_ATTACHED:
        limit = MOST_ATTACHED // 1024
        return f"{size:,} bytes; not shown, and not kept: over the {limit} KiB a result carries"
    attached.append(Attachment(mime if _MIME.fullmatch(mime) else "application/octet-stream", data))
    return f"{size:,} bytes; not shown, kept with the session's results as part {len(attached)}"


def _clean(text: str) -> str:
    return clean(text[:200])
