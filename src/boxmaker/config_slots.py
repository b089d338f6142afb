"""`[slots]` of the config: each logical slot is an id on the default server (`main = 0`) or
an id on a server named in `[servers.<name>]` (`big = "gpu:1"`). Pure; `config.py` calls
`split_slots` before structuring, so the config keeps `slots` as ids (what a request's
`id_slot` is) and `slot_servers` for the slots on named servers.
"""

from __future__ import annotations

from typing import Any

__all__ = ["split_slots"]


def split_slots(
    slots: dict[str, Any], servers: Any, default: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The slots as ids, and the server of each slot on a named one.

    Raises:
        ValueError: a string that is not `"<server>:<id>"`, or names no server; the message
            ends with the key (`@ $.slots.<name>`).
    """
    ids: dict[str, Any] = {}
    named: dict[str, str] = {}
    known = set(servers) if type(servers) is dict else set()
    for slot, value in slots.items():
        if type(value) is not str:
            ids[slot] = value  # an id on the default server; the converter checks its type
            continue
        server, _, number = value.rpartition(":")
        if not server or not number.isdigit():
            raise ValueError(
                f'expected an id or "<server>:<id>", got {value!r} @ $.slots[{slot!r}]'
            )
        if server != default and server not in known:
            names = ", ".join(sorted(known | {default}))
            raise ValueError(f"no server {server!r} (there are: {names}) @ $.slots[{slot!r}]")
        ids[slot] = int(number)
        if server != default:
            named[slot] = server
    return ids, named
