"""`[tiers]`: the server each purpose goes to (SPEC section 22). Pure.

A purpose is `chat` (the server new sessions' slots are on), `summary` (an epoch's summary
and its merges) or `vision` (an image); its value names a server, `"default"` for `[server]`
or a `[servers.<name>]`. `summary` and `vision` are each request a conversation of its own,
which reuses no cache, so what they must never do is take a session's slot: on a llama-server
that holds sessions' slots they name a server slot of their own, `"<server>:<id>"` with an
id no slot of `[slots]` has there (the server would otherwise put the request in whichever
slot it likes, and push a session's prompt out of it). On a server that holds no session's
slot, or an OpenAI-style one (one prefix cache for every request, no slots), the id may be
left out: no `id_slot` is sent and the server picks.

`chat` unset, a new session takes any slot of `[slots]` (by its id's hash) as without tiers;
set, one on that server. A session keeps its slot, and so its server, for its life: the tier
is read only when a session is made.

`split_tiers` reads the table before the converter structures the config, `check_tiers` what
the whole config must agree with after; each raises `ValueError` ending `@ $.tiers.<purpose>`.
"""

from __future__ import annotations

from typing import Any

from ._mistakes import key_path, unknown_field
from ._sections import DEFAULT_SERVER, Config

__all__ = ["PURPOSES", "check_tiers", "split_tiers"]

PURPOSES = ("chat", "summary", "vision")


def split_tiers(raw: Any, servers: Any) -> tuple[dict[str, str], dict[str, int]]:
    """The server of each purpose `[tiers]` names, and the server slot id of those that give
    one, each in the order of `PURPOSES`.

    Raises:
        ValueError: not a table, an unknown purpose, a value that is not `"<server>"` or
            `"<server>:<id>"` (`chat`: a server alone), or a server the config does not name.
    """
    if type(raw) is not dict:
        raise ValueError("expected an object @ $.tiers")
    for purpose in raw:
        if purpose not in PURPOSES:
            raise ValueError(unknown_field(key_path("tiers", purpose), purpose, PURPOSES))
    known = {DEFAULT_SERVER, *(servers if type(servers) is dict else ())}
    tiers: dict[str, str] = {}
    ids: dict[str, int] = {}
    for purpose in (p for p in PURPOSES if p in raw):
        value, where = raw[purpose], key_path("tiers", purpose)
        if type(value) is not str:
            raise ValueError(f"expected str @ {where}")
        server, colon, number = value.partition(":")
        if not server or (colon and not number.isdigit()):
            raise ValueError(f'expected "<server>" or "<server>:<id>", got {value!r} @ {where}')
        if server not in known:
            names = ", ".join(sorted(known))
            raise ValueError(f"no server {server!r} (there are: {names}) @ {where}")
        if colon and purpose == "chat":
            raise ValueError(
                f"expected a server, got {value!r}: new sessions take the slots [slots] puts "
                f'on it ("{server}") @ {where}'
            )
        tiers[purpose] = server
        if colon:
            ids[purpose] = int(number)
    return tiers, ids


def check_tiers(config: Config) -> None:
    """What the tiers must agree with in the rest of the config: `chat` names a server some
    slot is on; `summary` and `vision` never share a server slot with a session.

    Raises:
        ValueError: the first tier that does not, said with what to write instead.
    """
    for purpose, server in config.tiers.items():
        where = key_path("tiers", purpose)
        held = {config.slots[s]: s for s in config.slots if config.server_of(s) == server}
        if purpose == "chat":
            if not held:
                raise ValueError(
                    f"no slot of [slots] is on server {server!r}, so a new session would have "
                    f'none to take; add one (name = "{server}:0") @ {where}'
                )
            continue
        if not held or config.server_config(server).kind != "llama-server":
            continue  # no session's slot there to push out
        own = f'"{server}:{max(held) + 1}"'
        slot_id = config.tier_slots.get(purpose)
        if slot_id is None:
            names = ", ".join(held[i] for i in sorted(held))
            raise ValueError(
                f"server {server!r} holds sessions' slots ({names}): give the {purpose} a "
                f"slot of its own, such as {own}, or its requests could push a session's "
                f"prompt out of its slot @ {where}"
            )
        if slot_id in held:
            raise ValueError(
                f"slot {slot_id} of server {server!r} is [slots] {held[slot_id]}'s: give the "
                f"{purpose} a slot no session holds, such as {own} @ {where}"
            )
