"""The config's turn settings as a turn's log keeps them (SPEC section 20), and a config with
a recorded set put back, for replay. Pure.

Only what differs from this version's defaults is kept: a replay under a later version then
runs with that version's defaults, as the session would continue under it, so a changed
default is seen as a changed rule.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..proto import structure, unstructure
from ._sections import Config, ConfigError

__all__ = ["TURN_KEYS", "turn_config", "with_turn_config"]

# The sections a turn reads, and of each the keys it reads (None: all of them).
TURN_KEYS: dict[str, tuple[str, ...] | None] = {
    "loop": None,
    "context": None,
    "memory": ("auto_recall",),
    "tools": ("approval_timeout_s",),
}


def turn_config(config: Config) -> dict[str, dict[str, Any]]:
    """The turn settings of `config` that differ from the defaults, by section and key."""
    kept: dict[str, dict[str, Any]] = {}
    for section, keys in TURN_KEYS.items():
        value = getattr(config, section)
        default = _default_of(type(value), value)
        said, usual = unstructure(value), unstructure(default)
        changed = {
            key: said[key]
            for key in (keys if keys is not None else said)
            if said[key] != usual[key]
        }
        if changed:
            kept[section] = changed
    return kept


def with_turn_config(config: Config, recorded: dict[str, dict[str, Any]]) -> Config:
    """`config` with its turn settings those `recorded`: each the recorded value, else the
    default (whatever `config` itself says of them).

    Raises:
        ConfigError: a recorded section, key or value this version does not take.
    """
    changes: dict[str, Any] = {}
    for section, keys in TURN_KEYS.items():
        given = recorded.get(section, {})
        if type(given) is not dict:
            raise ConfigError(f"the recorded [{section}] is not a table")
        value = getattr(config, section)
        raw = unstructure(value)
        usual = unstructure(_default_of(type(value), value))
        for key in keys if keys is not None else usual:
            raw[key] = usual[key]
        for key, item in given.items():
            if key not in raw or (keys is not None and key not in keys):
                raise ConfigError(f"the recorded [{section}] {key} is no setting of this loopd")
            raw[key] = item
        try:
            changes[section] = structure(raw, type(value))
        except Exception as exc:
            raise ConfigError(f"the recorded [{section}] is not valid here: {exc}") from exc
    unknown = set(recorded) - set(TURN_KEYS)
    if unknown:
        raise ConfigError(f"the recorded [{min(unknown)}] is no section a turn reads")
    return attrs.evolve(config, **changes)


def _default_of(cls: type, value: Any) -> Any:
    """A section at its defaults (a required field, such as `[tools] workspace`, kept)."""
    required = {
        a.name: getattr(value, a.name) for a in attrs.fields(cls) if a.default is attrs.NOTHING
    }
    return cls(**required)
