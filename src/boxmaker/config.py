"""`config.toml` -> `Config` (SPEC section 3).

Read with `tomllib`, structured by the one converter, so unknown keys and wrong types are
refused with the file, the key and the expectation: `config.toml: expected int @
$.loop.tool_iterations` (an unknown key near a known one adds "did you mean ...?"; `base_url`
must be `http(s)://host:port`, checked here rather than on the first request). Relative paths
are taken against the config file's folder; `[paths] home` defaults to `$BOXMAKER_HOME`, else
`/var/lib/boxmaker`, and `[channel] socket` to `<home>/run/loop/loop.sock`. `[server]` is
the server named `default`; more may be named in `[servers.<name>]`, and a slot is either an
id on the default server (`main = 0`) or `"<server>:<id>"`. `parse_config` is pure;
`load_config` reads the file; `defaults_text` says every default (`loopd serve --help`).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from attrs import Attribute, field, fields, frozen

from . import layout
from .config_slots import split_slots
from .profiles import profile_names
from .proto import DecodeError, InvalidValue, structure

__all__ = [
    "DEFAULT_HOME",
    "DEFAULT_SERVER",
    "KINDS",
    "BaselineConfig",
    "CacheConfig",
    "ChannelConfig",
    "Config",
    "ConfigError",
    "ContextConfig",
    "InferenceConfig",
    "LoopConfig",
    "ModelConfig",
    "PathsConfig",
    "ServerConfig",
    "defaults_text",
    "load_config",
    "parse_config",
]

DEFAULT_HOME = Path("/var/lib/boxmaker")
DEFAULT_SERVER = "default"  # the name of the [server] section's server
KINDS = ("llama-server", "openai")


class ConfigError(Exception):
    """The config cannot be used; the message names the file, the key and the reason."""


def _at_least(bound: float) -> Callable[[Any, Attribute[Any], Any], None]:
    def check(_instance: Any, attribute: Attribute[Any], value: Any) -> None:
        if value is not None and value < bound:
            raise InvalidValue(f"must be at least {bound}, got {value}", attribute.name)

    return check


def _positive(_instance: Any, attribute: Attribute[Any], value: float) -> None:
    if value <= 0:
        raise InvalidValue(f"must be more than 0, got {value}", attribute.name)


def _check_url(_instance: Any, attribute: Attribute[Any], url: str) -> None:
    """`http://host:port` or `https://...`, with a path at most: what httpx can connect to."""
    example = 'e.g. "http://127.0.0.1:8080"'
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number from 0 to 65535
    except ValueError as exc:
        raise InvalidValue(f"{url!r} is not a URL ({exc}); {example}", attribute.name) from exc
    if parts.scheme not in ("http", "https"):
        hint = f'; did you mean "http://{url}"?' if "://" not in url else f"; {example}"
        raise InvalidValue(f"{url!r} must start with http:// or https://{hint}", attribute.name)
    if not parts.hostname:
        raise InvalidValue(f"{url!r} has no host; {example}", attribute.name)
    if port == 0 or (parts.port is None and parts.netloc.endswith(":")):
        raise InvalidValue(f"{url!r} has no port number; {example}", attribute.name)
    if parts.query or parts.fragment:
        raise InvalidValue(f"{url!r} has a query or fragment; {example}", attribute.name)


def _check_kind(_instance: Any, attribute: Attribute[Any], kind: str) -> None:
    if kind not in KINDS:
        raise InvalidValue(f"expected one of {', '.join(map(repr, KINDS))}", attribute.name)


@frozen
class ServerConfig:
    base_url: str = field(default="http://127.0.0.1:8080", validator=_check_url)
    kind: str = field(default="llama-server", validator=_check_kind)
    api_key_env: str = ""
    connect_timeout_s: float = field(default=5.0, validator=_positive)
    first_byte_timeout_s: float = field(default=600.0, validator=_positive)
    idle_timeout_s: float = field(default=60.0, validator=_positive)
    cache_block: int | None = field(default=None, validator=_at_least(1))

    @property
    def block(self) -> int:
        """Tokens per block of the server's prompt cache: `cache_block`, else 1 for
        llama-server (it reuses any prefix) and 16 for an OpenAI-style one (vLLM's default)."""
        return self.cache_block or (16 if self.kind == "openai" else 1)


# Passed to the server as they are, when set.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "tool_choice")


@frozen
class InferenceConfig:
    thinking_cap: int = field(default=4096, validator=_at_least(1))
    max_attempts: int = field(default=4, validator=_at_least(1))
    backoff_initial_ms: int = field(default=500, validator=_at_least(0))
    backoff_max_ms: int = field(default=8000, validator=_at_least(0))
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    # Always sent: a server left to its own default (-1) generates until the context is full.
    max_tokens: int = field(default=16384, validator=_at_least(1))
    # A wall-clock cap on one completion, however lively its stream (deltas or pings).
    completion_timeout_s: float = field(default=1800.0, validator=_positive)
    tool_choice: str | None = None  # "required" makes a tool-weak model call a tool, always

    def __attrs_post_init__(self) -> None:
        if self.backoff_max_ms < self.backoff_initial_ms:
            raise InvalidValue(
                f"is less than backoff_initial_ms ({self.backoff_initial_ms})", "backoff_max_ms"
            )

    def sampling(self) -> dict[str, int | float | str]:
        """The sampling keys that are set, passed to the server as they are."""
        values = {key: getattr(self, key) for key in SAMPLING_KEYS}
        return {key: value for key, value in values.items() if value is not None}


@frozen
class LoopConfig:
    tool_iterations: int = field(default=8, validator=_at_least(1))
    repeat_detection: bool = True
    tool_result_cap: int = field(default=16384, validator=_at_least(64))
    max_completions: int = field(default=32, validator=_at_least(1))
    max_predicted_tokens: int = field(default=65536, validator=_at_least(1))
    max_seconds: float = field(default=3600.0, validator=_positive)
    wrap_up_on_length: bool = False  # ask once for a short closing answer after a `length` cut


def _fraction(_instance: Any, attribute: Attribute[Any], value: float) -> None:
    if not 0 < value < 1:
        raise InvalidValue(f"must be more than 0 and less than 1, got {value}", attribute.name)


@frozen
class ContextConfig:
    """When an epoch is closed and what the next one carries (docs/storage.md, "Epochs")."""

    epoch_at: float = field(default=0.75, validator=_fraction)  # of the slot's context
    carry_fraction: float = field(default=0.25, validator=_fraction)  # newest turns, whole
    summary_max_tokens: int = field(default=512, validator=_at_least(16))

    def __attrs_post_init__(self) -> None:
        if self.carry_fraction >= self.epoch_at:
            raise InvalidValue(
                f"must be less than epoch_at ({self.epoch_at}), or every epoch would be full "
                "from its start",
                "carry_fraction",
            )


@frozen
class ChannelConfig:
    socket: Path
    # A channel that takes none of its frames for this long is dropped and its turn cancelled.
    write_timeout_s: float = field(default=30.0, validator=_positive)


@frozen
class PathsConfig:
    home: Path


def _check_profile(_instance: Any, attribute: Attribute[Any], name: str) -> None:
    if name != "auto" and name not in profile_names():
        raise InvalidValue(
            f"expected 'auto' or one of {', '.join(profile_names())}", attribute.name
        )


@frozen
class ModelConfig:
    profile: str = field(default="auto", validator=_check_profile)


@frozen
class BaselineConfig:
    system: Path
    max_tokens: int = field(default=3000, validator=_at_least(1))


@frozen
class CacheConfig:
    """Slot states saved across server restarts: `save_dir` must be the folder
    llama-server was started with as `--slot-save-path`; unset, nothing is saved."""

    save_dir: Path | None = None
    max_bytes: int = field(default=4 * 1024**3, validator=_at_least(0))


def _check_slots(_instance: Any, attribute: Attribute[Any], slots: dict[str, int]) -> None:
    if "main" not in slots:
        raise InvalidValue("must name the slot 'main'", attribute.name)
    for name, slot in slots.items():
        if slot < 0:
            raise InvalidValue(f"slot {name!r} must be 0 or more, got {slot}", attribute.name)


@frozen
class Config:
    """Everything `loopd` reads from `config.toml`, with every default filled in."""

    server: ServerConfig
    slots: dict[str, int] = field(validator=_check_slots)
    inference: InferenceConfig
    loop: LoopConfig
    channel: ChannelConfig
    paths: PathsConfig
    baseline: BaselineConfig
    context: ContextConfig
    cache: CacheConfig = CacheConfig()
    model: ModelConfig = field(factory=ModelConfig)
    servers: dict[str, ServerConfig] = field(factory=dict)
    slot_servers: dict[str, str] = field(factory=dict)  # slot -> server, when not the default

    def server_of(self, slot: str) -> str:
        """The name of the server a logical slot is on."""
        return self.slot_servers.get(slot, DEFAULT_SERVER)

    def server_config(self, name: str) -> ServerConfig:
        return self.server if name == DEFAULT_SERVER else self.servers[name]

    def servers_in_use(self) -> list[str]:
        """The servers the slots are on, in the order of the slots."""
        return list(dict.fromkeys(self.server_of(slot) for slot in self.slots))


_SECTIONS: dict[str, type[Any] | None] = {  # None: any key (slot names, server names)
    "server": ServerConfig,
    "servers": None,
    "slots": None,
    "model": ModelConfig,
    "inference": InferenceConfig,
    "loop": LoopConfig,
    "channel": ChannelConfig,
    "paths": PathsConfig,
    "baseline": BaselineConfig,
    "cache": CacheConfig,
    "context": ContextConfig,
}


# Defaults that depend on where loopd runs, as `defaults_text` says them.
_COMPUTED = {
    ("slots", "main"): "0",
    ("server", "cache_block"): "(unset: 1 for llama-server, 16 for openai)",
    ("channel", "socket"): '"<home>/run/loop/loop.sock"',
    ("paths", "home"): '"$BOXMAKER_HOME", else "/var/lib/boxmaker"',
    ("baseline", "system"): '"system.md" (beside the config file)',
    ("cache", "save_dir"): "(unset: no slot is saved)",
}


def defaults_text() -> str:
    """Every key of the config file with its default, as TOML a person reads (`--help`)."""
    lines: list[str] = []
    for name, kind in _SECTIONS.items():
        lines.append(f"[{name}]")
        if name == "servers":
            lines[-1] = "# [servers.<name>]: another server, with the keys of [server]"
            continue
        keys = [(f.name, f.default) for f in fields(kind)] if kind is not None else [("main", 0)]
        for key, default in keys:
            if (name, key) in _COMPUTED:
                shown = _COMPUTED[name, key]
            elif default is None:
                shown = "(unset: the server's own)"
            elif isinstance(default, bool):
                shown = str(default).lower()
            elif isinstance(default, str):
                shown = f'"{default}"'
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
            return _unknown(f"$.{name}", name, list(_SECTIONS))
        kind = _SECTIONS[name]
        tables = {f"$.{name}": section}
        if name == "servers" and type(section) is dict:
            kind = ServerConfig
            tables = {f"$.servers.{k}": v for k, v in section.items()}
        for path, table in tables.items():
            if type(table) is dict and kind is not None:
                known = [f.name for f in fields(kind)]
                for key in table:
                    if key not in known:
                        return _unknown(f"{path}.{key}", key, known)
    return None


def _unknown(path: str, name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"unknown field @ {path}" + (f"; did you mean {close[0]!r}?" if close else "")


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
    paths, channel, baseline = (sections[name] for name in ("paths", "channel", "baseline"))
    if type(paths) is dict:
        if type(paths.get("home", "")) is not str:  # the socket's default hangs on it
            raise ConfigError(f"{path}: expected str @ $.paths.home")
        if "home" not in paths:
            paths["home"] = str(Path(environ.get("BOXMAKER_HOME") or DEFAULT_HOME).absolute())
        paths["home"] = _resolve(paths["home"], folder)
        if type(channel) is dict and type(paths["home"]) is str:
            channel.setdefault("socket", str(layout.loop_socket(Path(paths["home"]))))
    if type(channel) is dict and "socket" in channel:
        channel["socket"] = _resolve(channel["socket"], folder)
    if type(baseline) is dict:
        baseline["system"] = _resolve(baseline.get("system", "system.md"), folder)
    if type(cache := sections["cache"]) is dict and "save_dir" in cache:
        cache["save_dir"] = _resolve(cache["save_dir"], folder)
    if (unknown := _unknown_keys(sections)) is not None:
        raise ConfigError(f"{path}: {unknown}")
    if type(sections["servers"]) is dict and DEFAULT_SERVER in sections["servers"]:
        raise ConfigError(f"{path}: {DEFAULT_SERVER!r} names [server] @ $.servers.{DEFAULT_SERVER}")
    if type(sections["slots"]) is dict:
        try:
            sections["slots"], sections["slot_servers"] = split_slots(
                sections["slots"], sections["servers"], DEFAULT_SERVER
            )
        except ValueError as error:
            raise ConfigError(f"{path}: {error}") from error
    try:
        return structure(sections, Config)
    except DecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


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
