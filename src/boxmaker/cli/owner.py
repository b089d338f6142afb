"""`bxctl tools`, `bxctl approvals` and `bxctl stop`: what the agent can do, the calls that
wait for the owner's answer, and stopping a session's running turn.

`bxctl tools` asks brokerd (its `broker.sock`) for every tool it holds: core (in a new
session's baseline) or found with `find_tool`, its grant and where the grant came from, and
the roots the file tools may reach with their class. `bxctl approvals` asks loopd which calls
wait, and with an id and an answer (`once`, `session`, `always`, `deny`) answers one.
`bxctl stop SESSION` stops the turn running in a session, as a hard break does, and nothing
runs in its place (a detached turn, or a schedule's, whose channel is gone, too).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import layout
from ..config import DEFAULT_HOME
from ..proto import Answer, encode, unstructure
from .sessions import Output
from .table import DIM, align, style

__all__ = ["COMMANDS", "add_commands", "run_owner_command"]

COMMANDS = ("tools", "approvals", "stop")
EXIT_NO_DAEMON = 3  # as bxctl chat's: nobody listens on the socket


STDERR_SHOWN = 5  # of a server's last stderr lines


def add_commands(commands: Any) -> None:
    tools = commands.add_parser("tools", help="list the tools, their grants and the roots")
    tools.add_argument(
        "--socket",
        type=Path,
        help="brokerd's socket (default: $BOXMAKER_HOME/run/broker/broker.sock)",
    )
    tools.add_argument("--json", action="store_true", help="brokerd's answer as JSON")
    waiting = commands.add_parser(
        "approvals", help="list the calls waiting for your answer, or answer one"
    )
    waiting.add_argument("id", nargs="?", help="the call's id, as listed")
    waiting.add_argument("answer", nargs="?", choices=[a.value for a in Answer])
    waiting.add_argument(
        "--socket", type=Path, help="loopd's socket (default: $BOXMAKER_HOME/run/loop/loop.sock)"
    )

    stop = commands.add_parser(
        "stop",
        help="stop a session's running turn (detached or not); nothing runs in its place",
    )
    stop.add_argument("session", metavar="SESSION")
    stop.add_argument(
        "--socket", type=Path, help="loopd's socket (default: $BOXMAKER_HOME/run/loop/loop.sock)"
    )


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME)


def run_owner_command(args: Any, environ: Mapping[str, str], out: Output) -> int:
    """Run `bxctl tools|approvals`; the exit status. Only these pay for trio."""
    import trio

    if args.command == "tools":
        socket = args.socket or layout.broker_socket(_home(environ))
        return trio.run(_tools, socket, args.json, out)
    socket = args.socket or layout.loop_socket(_home(environ))
    if args.command == "stop":
        return trio.run(_stop, socket, args.session, out)
    if args.id is not None and args.answer is None:
        out.err.write("error: give the answer too: once, session, always or deny\n")
        return 2
    return trio.run(_approvals, socket, args.id, args.answer, out)


async def _tools(socket: Path, as_json: bool, out: Output) -> int:
    from ..serving import BrokerDown, BrokerPort

    try:
        listing = await BrokerPort(socket, 10.0).list_tools()
    except BrokerDown as error:
        out.err.write(f"error: {error}\n")
        return EXIT_NO_DAEMON
    if as_json:
        out.out.write(encode(unstructure(listing)["body"]).decode() + "\n")  # as brokerd said
        return 0
    rows = [["TOOL", "IN", "GRANT", "FROM", "DOES"]]
    for tool in listing.tools:
        where = "core" if tool.core else "found"
        rows.append([tool.schema.name, where, tool.grant, tool.source, tool.schema.description])
    header, *lines = align(rows)
    out.out.write(style(header, DIM, out.color) + "\n" + "".join(f"{line}\n" for line in lines))
    rows = [["ROOT", "PATH", "READ", "WRITE", "CLASS", "CHECKPOINTS"]]
    for root in listing.roots:
        yes = {True: "yes", False: "no"}
        cells = [root.name, root.path, yes[root.read], yes[root.write], root.data_class.value]
        rows.append([*cells, root.checkpoints or "-"])
    header, *lines = align(rows)
    out.out.write("\n" + style(header, DIM, out.color) + "\n")
    out.out.write("".join(f"{line}\n" for line in lines))
    if listing.servers:
        rows = [["SERVER", "STATE", "TOOLS", "LISTED", "RESTARTS", "WHY"]]
        for server in listing.servers:
            listed = str(server.listed)[:19].replace("T", " ") if server.listed else "not yet"
            rows.append(
                [
                    server.name,
                    server.state,
                    str(server.tools),
                    listed,
                    str(server.restarts),
                    server.reason,
                ]
            )
        header, *lines = align(rows)
        out.out.write("\n" + style(header, DIM, out.color) + "\n")
        for server, line in zip(listing.servers, lines, strict=True):
            out.out.write(f"{line}\n")
            for said in server.stderr[-STDERR_SHOWN:]:
                out.out.write(style(f"    stderr: {said}", DIM, out.color) + "\n")
    return 0


async def _stop(socket: Path, session: str, out: Output) -> int:
    from ..client import ChannelError, ask
    from ..proto import InvalidValue, SessionId, StopFrame, StoppedFrame, WireError

    try:
        sid = SessionId(session)
    except InvalidValue as error:
        out.err.write(f"error: {error}\n")
        return 2
    try:
        answer = await ask(socket, StopFrame(sid))
    except ChannelError as error:
        out.err.write(f"error: {error}\n")
        return EXIT_NO_DAEMON
    if isinstance(answer, StoppedFrame):
        said = "stopped its turn" if answer.stopped else "no turn runs in it"
        out.out.write(f"{sid}: {said}\n")
        return 0
    why = answer.message if isinstance(answer, WireError) else repr(answer)
    out.err.write(f"error: {why}\n")
    return 1


async def _approvals(socket: Path, id: str | None, answer: str | None, out: Output) -> int:
    from .approve import list_waiting, send_answer, shown
    from .render import escape_controls

    if id is not None and answer is not None:
        problem = await send_answer(socket, id, Answer(answer))
        if problem is not None:
            out.err.write(f"error: {problem}\n")
            return 1
        out.out.write(f"{id}: {answer}\n")
        return 0
    waiting = await list_waiting(socket)
    if isinstance(waiting, str):
        out.err.write(f"error: {waiting}\n")
        return EXIT_NO_DAEMON
    if not waiting.waiting:
        out.err.write("no call waits for an answer\n")
        return 0
    rows = [["ID", "SESSION", "WAITED", "CALL"]]
    for item in waiting.waiting:
        cells = [item.id, item.session.value, f"{item.waited_s:g} s", item.summary]
        rows.append([escape_controls(cell).replace("\n", " ") for cell in cells])
    header, *lines = align(rows)
    out.out.write(style(header, DIM, out.color) + "\n" + "".join(f"{line}\n" for line in lines))
    for item in waiting.waiting:
        if item.detail:
            out.out.write(f"\n{escape_controls(item.id)}:\n{shown(item.detail, out.color)}")
    out.out.write("answer with: bxctl approvals ID once|session|always|deny\n")
    return 0
