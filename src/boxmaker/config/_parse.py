"""`config.toml` read: TOML, then every section and key checked, then the classes of
`_sections.py` (SPEC section 3). Pure but for `load_config`, which reads the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from attrs import fields

from .. import layout
from ..proto import DecodeError, structure
from ._gateway import GatewayConfig, MatrixConfig
from ._mistakes import unknown_field
from ._sections import (
    DEFAULT_HOME,
    DEFAULT_SERVER,
    BaselineConfig,
    BrokerConfig,
    CacheConfig,
    ChannelConfig,
    CheckpointsConfig,
    Config,
    ConfigError,
    ContextConfig,
    FilesConfig,
    InferenceConfig,
    LoopConfig,
    McpServerConfig,
    MemoryConfig,
    ModelConfig,
    PathsConfig,
    SandboxConfig,
    SchedulesConfig,
    ServerConfig,
    ToolsConfig,
)
from ._tiers import PURPOSES, check_tiers, split_tiers

__all__ = ["defaults_text", "load_config", "parse_config"]

_SECTIONS: dict[str, type[Any] | None] = {  # None: any key (slot names, server names)
    "server": ServerConfig,
    "servers": None,
    "slots": None,
    "tiers": None,
    "model": ModelConfig,
    "inference": InferenceConfig,
    "loop": LoopConfig,
    "channel": ChannelConfig,
    "paths": PathsConfig,
    "baseline": BaselineConfig,
    "cache": CacheConfig,
    "context": ContextConfig,
    "tools": ToolsConfig,
    "broker": BrokerConfig,
    "sandbox": SandboxConfig,
    "checkpoints": CheckpointsConfig,
    "files": FilesConfig,
    "memory": MemoryConfig,
    "schedules": SchedulesConfig,
    "gateway": GatewayConfig,
    "mcp": None,
}


# Defaults that depend on where loopd runs, as `defaults_text` says them.
_COMPUTED = {
    ("slots", "main"): "0",
    ("server", "cache_block"): "(unset: 1 for llama-server, 16 for openai)",
    ("channel", "socket"): '"<home>/run/loop/loop.sock"',
    ("paths", "home"): '"$BOXMAKER_HOME", else "/var/lib/boxmaker"',
    ("baseline", "system"): '"system.md" (beside the config file)',
    ("cache", "save_dir"): "(unset: no slot is saved)",
    ("tools", "workspace"): '"$BOXMAKER_WORKSPACE", else "<home>/workspace"',
    ("broker", "socket"): '"<home>/run/broker/broker.sock"',
    ("broker", "policy"): '"policy.toml" (beside the config file)',
    ("sandbox", "user"): '"" (under root: the account "boxmaker-sandbox", else uid 65533)',
}


_MCP_SHOWN = {
    "command": '["program", "argument"]  (required)',
    "env": "[]  (names of brokerd's variables it gets)",
    "cwd": '(unset: "/"; never the workspace, where a command could plant what it imports)',
    "sandbox": "(unset: in the sandbox where one works; true: only there)",
    "network": "false",
    "read": "[]",
}


_TIERS_SHOWN = {
    "chat": '(unset: any slot of [slots]; "<server>": new sessions take its slots)',
    "summary": "(unset: each session's own server, on its slot)",
    "vision": "(unset: the session's own server, when it takes images)",
}


_MATRIX_SHOWN = {
    "homeserver": '"https://matrix.example.org"  (required)',
    "user_id": '"@boxmaker:example.org"  (required: the bot\'s account)',
    "owners": '["@you:example.org"]  (required: who may speak)',
    "access_token_env": '""  (or password_env: the variable holding the secret)',
    "password_env": '""',
    "device_name": '"Boxmaker gateway"',
    "allow_shared_rooms": "false",
}


def defaults_text() -> str:
    """Every key of the config file with its default, as TOML a person reads (`--help`)."""
    lines: list[str] = []
    for name, kind in _SECTIONS.items():
        lines.append(f"[{name}]")
        if name == "servers":
            lines[-1] = "# [servers.<name>]: another server, with the keys of [server]"
            continue
        if name == "gateway":
            lines += [f"{key.name} = {key.default}" for key in fields(GatewayConfig)[:-1]]
            lines.append("# [gateway.matrix]: gatewayd's Matrix account (docs: README, Gateway)")
            lines += [f"# {key.name} = {_MATRIX_SHOWN.get(key.name, key.default)}"
                      for key in fields(MatrixConfig)]  # fmt: skip
            continue
        if name == "tiers":
            lines[-1] = '# [tiers]: the server of a purpose, "<server>" or "<server>:<id>"'
            lines += [f"# {purpose} = {_TIERS_SHOWN[purpose]}" for purpose in PURPOSES]
            continue
        if name == "mcp":
            lines[-1] = "# [mcp.<name>]: an MCP server brokerd starts; its tools are <name>.<tool>"
            for mcp_key in fields(McpServerConfig):
                lines.append(f"# {mcp_key.name} = {_MCP_SHOWN.get(mcp_key.name, mcp_key.default)}")
            continue
        keys = [(f.name, f.default) for f in fields(kind)] if kind is not None else [("main", 0)]
        for key, default in keys:
            if (name, key) in _COMPUTED:
                shown = _COMPUTED[name, key]
            elif default is None:
                shown = "(unset: the server's own)"
            elif isinstance(default, bool):
                shown = str(default).lower()
            elif isinstance(default, tuple):
                shown = "[" + ", ".join(f'"{item}"' for item in default) + "]"
            elif isinstance(default, str):
                shown = f'"{default}"'
            elif isinstance(default, Enum):
                shown = f'"{default.value}"  ({", ".join(m.value for m in type(default))})'
            else:
                shown = str(default)
            lines.append(f"{key} = {shown}")
    return "\n".join(lines)


def _unknown_keys(sections: dict[str, Any]) -> str | None:
    """The first unknown section or key, as the converter would report it, with the nearest
    known name when one is close: `unknown field @ $.loop.tool_iteratons; did you mean
    'tool_iterations'?`. None when every key is known (the converter checks the rest)."""
    for name, section in sections.items():
        if name not in _SECTIONS:
            return unknown_field(f"$.{name}", name, _SECTIONS)
        kind = _SECTIONS[name]
        tables = {f"$.{name}": section}
        if name in ("servers", "mcp") and type(section) is dict:
            kind = ServerConfig if name == "servers" else McpServerConfig
            tables = {f"$.{name}.{k}": v for k, v in section.items()}
        if name == "gateway" and type(section) is dict and type(section.get("matrix")) is dict:
            tables[f"$.{name}.matrix"] = section["matrix"]
        for path, table in tables.items():
            if path == "$.gateway.matrix":
                kind = MatrixConfig
            if type(table) is dict and kind is not None:
                known = [f.name for f in fields(kind)]
                for key in table:
                    if key not in known:
                        return unknown_field(f"{path}.{key}", key, known)
    return None


def _resolve(value: Any, folder: Path) -> Any:
    """A path string taken against the config file's folder (`~` expanded); others as is."""
    if type(value) is not str:
        return value  # the converter reports the wrong type with its path
    return str(folder / Path(value).expanduser())


def parse_config(text: str, path: Path, environ: Mapping[str, str]) -> Config:
    """Parse the text of the config file at `path`.

    Raises:
        ConfigError: "<path>: <what> @ <key>" for bad TOML, unknown keys, wrong types or values.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    folder = path.parent
    sections: dict[str, Any] = {name: raw.get(name, {}) for name in _SECTIONS}
    sections |= {name: value for name, value in raw.items() if name not in sections}
    if type(sections["slots"]) is dict and not sections["slots"]:
        sections["slots"] = {"main": 0}
    paths, baseline = sections["paths"], sections["baseline"]
    if type(paths) is dict:
        if type(paths.get("home", "")) is not str:  # the socket's default hangs on it
            raise ConfigError(f"{path}: expected str @ $.paths.home")
        if "home" not in paths:
            paths["home"] = str(Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME).absolute())
        paths["home"] = _resolve(paths["home"], folder)
        if type(paths["home"]) is str:
            home = Path(paths["home"])
            for name, key, default in (
                ("channel", "socket", layout.loop_socket(home)),
                ("broker", "socket", layout.broker_socket(home)),
                ("tools", "workspace", environ.get("BOXMAKER_WORKSPACE") or layout.workspace(home)),
            ):
                if type(sections[name]) is dict:
                    sections[name].setdefault(key, str(default))
    for name, key in (("channel", "socket"), ("broker", "socket"), ("tools", "workspace")):
        if type(sections[name]) is dict and key in sections[name]:
            sections[name][key] = _resolve(sections[name][key], folder)
    if type(broker := sections["broker"]) is dict:
        broker["policy"] = _resolve(broker.get("policy", "policy.toml"), folder)
    if type(baseline) is dict:
        baseline["system"] = _resolve(baseline.get("system", "system.md"), folder)
    if type(cache := sections["cache"]) is dict and "save_dir" in cache:
        cache["save_dir"] = _resolve(cache["save_dir"], folder)
    for server in sections["mcp"].values() if type(sections["mcp"]) is dict else ():
        if type(server) is dict:
            if "cwd" in server:
                server["cwd"] = _resolve(server["cwd"], folder)
            if type(server.get("read")) is list:
                server["read"] = [_resolve(each, folder) for each in server["read"]]
    if (unknown := _unknown_keys(sections)) is not None:
        raise ConfigError(f"{path}: {unknown}")
    if type(sections["servers"]) is dict and DEFAULT_SERVER in sections["servers"]:
        raise ConfigError(f"{path}: {DEFAULT_SERVER!r} names [server] @ $.servers.{DEFAULT_SERVER}")
    if type(sections["slots"]) is dict:
        try:
            sections["slots"], sections["slot_servers"] = _split_slots(
                sections["slots"], sections["servers"], DEFAULT_SERVER
            )
        except ValueError as error:
            raise ConfigError(f"{path}: {error}") from error
    try:
        sections["tiers"], sections["tier_slots"] = split_tiers(
            sections["tiers"], sections["servers"]
        )
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from error
    try:
        config = structure(sections, Config)
    except DecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    try:
        check_tiers(config)
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from error
    return config


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and parse the config file at `path`.

    Raises:
        ConfigError: when the file cannot be read or is not a valid config.
    """
    path = path.absolute()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"{path}: cannot read the config: {reason}") from exc
    return parse_config(text, path, os.environ if environ is None else environ)


def _split_slots(
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
