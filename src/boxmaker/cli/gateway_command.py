"""`bxctl gateway`: whether gatewayd runs and is connected, and its rooms with their sessions,
from the status file it keeps (`<home>/run/gateway/status.json`, 0600; no daemon is asked).
A file left by a gatewayd that is not running any more says so."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import layout
from ..proto import DecodeError, encode, parse_json
from ..session import SessionError
from ..store import FileSystem
from .render import escape_controls
from .sessions import Output, home_of
from .table import align

__all__ = ["COMMAND", "add_command", "run_gateway"]

COMMAND = "gateway"
STATUS = "status.json"


def add_command(commands: Any) -> None:
    shown = commands.add_parser(
        "gateway", help="whether gatewayd is connected, its rooms and their sessions"
    )
    shown.add_argument("--home", type=Path, help="the home (default: $BOXMAKER_HOME)")
    shown.add_argument("--json", action="store_true", help="the status file as JSON")


def _running(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_gateway(args: Any, environ: Mapping[str, str], out: Output) -> int:
    path = layout.gateway_run(home_of(args.home, environ)) / STATUS
    try:
        data = FileSystem().read_if_there(path)
        status = parse_json(data) if data is not None else None
    except (OSError, SessionError, DecodeError) as error:
        out.err.write(f"error: {path}: {error}\n")
        return 1
    if not isinstance(status, dict) or not _running(status.get("pid")):
        out.err.write(f"gatewayd is not running (no live status in {path})\n")
        return 1
    if args.json:
        out.out.write(encode(status).decode() + "\n")
        return 0
    said = escape_controls
    connected = (
        "connected" if status.get("connected") else f"not connected: {status.get('problem')}"
    )
    out.out.write(
        f"gatewayd (pid {status.get('pid')}) as {said(str(status.get('user_id')))} on "
        f"{said(str(status.get('homeserver')))}: {said(connected)}; loopd "
        f"{'reached' if status.get('loopd') else 'not reached'}; "
        f"{status.get('pending', 0)} messages waiting for their answers\n"
    )
    rooms = [r for r in status.get("rooms", []) if isinstance(r, dict)]
    if rooms:
        rows = [["ROOM", "SESSION", "SESSIONS"]] + [
            [said(str(r.get("room"))), said(str(r.get("session"))), str(r.get("sessions"))]
            for r in rooms
        ]
        out.out.write("\n".join(align(rows)) + "\n")
    else:
        out.out.write("no rooms yet: invite the bot from an owner's account\n")
    return 0
