"""The config's sections as attrs classes, each key with its type, default and rule (SPEC
section 3). Pure: what a file says is structured into these by `_parse.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import Attribute, field, frozen

from ..profiles import PROFILE_SAMPLING, profile_names
from ..proto import InvalidValue
from ._brokerd import (
    CALL_MARGIN_S,
    DEFAULT_CORE,
    BrokerConfig,
    CheckpointsConfig,
    McpServerConfig,
    SandboxConfig,
    ToolsConfig,
    mcp_names,
)
from ._checks import at_least, check_url, positive
from ._gateway import GatewayConfig, MatrixConfig

__all__ = [
    "CALL_MARGIN_S",
    "DEFAULT_CORE",
    "DEFAULT_HOME",
    "DEFAULT_SERVER",
    "KINDS",
    "SAMPLING_KEYS",
    "BaselineConfig",
    "BrokerConfig",
    "CacheConfig",
    "ChannelConfig",
    "CheckpointsConfig",
    "Config",
    "ConfigError",
    "ContextConfig",
    "FilesConfig",
    "GatewayConfig",
    "InferenceConfig",
    "LoopConfig",
    "MatrixConfig",
    "McpServerConfig",
    "MemoryConfig",
    "ModelConfig",
    "PathsConfig",
    "SandboxConfig",
    "SchedulesConfig",
    "ServerConfig",
    "ToolsConfig",
]

DEFAULT_HOME = Path("/var/lib/boxmaker")
DEFAULT_SERVER = "default"  # the name of the [server] section's server
KINDS = ("llama-server", "openai")


class ConfigError(Exception):
    """The config cannot be used; the message names the file, the key and the reason."""


def _check_kind(_instance: Any, attribute: Attribute[Any], kind: str) -> None:
    if kind not in KINDS:
        raise InvalidValue(f"expected one of {', '.join(map(repr, KINDS))}", attribute.name)


@frozen
class ServerConfig:
    base_url: str = field(default="http://127.0.0.1:8080", validator=check_url)
    kind: str = field(default="llama-server", validator=_check_kind)
    # Sent as the request's `model`: a server that serves several (Ollama) needs it.
    model: str = ""
    api_key_env: str = ""
    connect_timeout_s: float = field(default=5.0, validator=positive)
    first_byte_timeout_s: float = field(default=600.0, validator=positive)
    idle_timeout_s: float = field(default=60.0, validator=positive)
    cache_block: int | None = field(default=None, validator=at_least(1))

    @property
    def block(self) -> int:
        """Tokens per block of the server's prompt cache: `cache_block`, else 1 for
        llama-server (it reuses any prefix) and 16 for an OpenAI-style one (vLLM's default)."""
        return self.cache_block or (16 if self.kind == "openai" else 1)


# Passed to the server as they are, when set (llama-server's names; an OpenAI-style server
# takes the first seven). A model profile's `[sampling]` sets the ones the config leaves unset.
SAMPLING_KEYS = (*PROFILE_SAMPLING[:5], "max_tokens", "tool_choice", *PROFILE_SAMPLING[5:])


@frozen
class InferenceConfig:
    thinking_cap: int = field(default=4096, validator=at_least(1))
    max_attempts: int = field(default=4, validator=at_least(1))
    backoff_initial_ms: int = field(default=500, validator=at_least(0))
    backoff_max_ms: int = field(default=8000, validator=at_least(0))
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    # Always sent: a server left to its own default (-1) generates until the context is full.
    max_tokens: int = field(default=16384, validator=at_least(1))
    # A wall-clock cap on one completion, however lively its stream (deltas or pings).
    completion_timeout_s: float = field(default=1800.0, validator=positive)
    tool_choice: str | None = None  # "required" makes a tool-weak model call a tool, always
    # The server's samplers against repetition (llama-server: a penalty on the last n tokens;
    # DRY, which penalises repeating a sequence already in the context).
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    dry_multiplier: float | None = None
    dry_base: float | None = None
    dry_allowed_length: int | None = None
    dry_penalty_last_n: int | None = None

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
    tool_iterations: int = field(default=8, validator=at_least(1))
    repeat_detection: bool = True
    tool_result_cap: int = field(default=16384, validator=at_least(64))
    max_completions: int = field(default=32, validator=at_least(1))
    max_predicted_tokens: int = field(default=65536, validator=at_least(1))
    max_seconds: float = field(default=3600.0, validator=positive)
    wrap_up_on_length: bool = False  # ask once for a short closing answer after a `length` cut


def _fraction(_instance: Any, attribute: Attribute[Any], value: float) -> None:
    if not 0 < value < 1:
        raise InvalidValue(f"must be more than 0 and less than 1, got {value}", attribute.name)


@frozen
class ContextConfig:
    """When an epoch is closed and what the next one carries (docs/storage.md, "Epochs")."""

    epoch_at: float = field(default=0.75, validator=_fraction)  # of the slot's context
    carry_fraction: float = field(default=0.25, validator=_fraction)  # newest turns, whole
    summary_max_tokens: int = field(default=512, validator=at_least(16))
    # The summaries of earlier epochs a new one opens with, every level together.
    history_fraction: float = field(default=0.125, validator=_fraction)

    def __attrs_post_init__(self) -> None:
        if self.carry_fraction + self.history_fraction >= self.epoch_at:
            raise InvalidValue(
                f"with history_fraction ({self.history_fraction}) must be less than epoch_at "
                f"({self.epoch_at}), or every epoch would be full from its start",
                "carry_fraction",
            )


@frozen
class MemoryConfig:
    """Memory (SPEC section 17): auto-recall before each turn's first request, within
    `recall_tokens`, of what holds at least `auto_recall_match` of the message's words; and
    how much of a new baseline the pinned notes may take."""

    auto_recall: bool = True
    recall_tokens: int = field(default=256, validator=at_least(16))
    auto_recall_match: float = field(default=0.5, validator=_fraction)
    pinned_tokens: int = field(default=512, validator=at_least(16))


@frozen
class SchedulesConfig:
    """Schedules (SPEC section 19): how many may be live, how many scheduled turns may start
    in an hour (a schedule past it is paused), the longest message one carries, and the zone
    a schedule is read in when it names none ("": the machine's)."""

    max_schedules: int = field(default=1000, validator=at_least(1))
    max_scheduled_turns_per_hour: int = field(default=60, validator=at_least(1))
    max_message_chars: int = field(default=8000, validator=at_least(1))
    tz: str = ""


@frozen
class FilesConfig:
    """Files in a turn (SPEC section 22): the largest file, how many a turn carries, a PDF's
    most pages, and the limits of the worker that takes a PDF's text out (its wall time and
    its address space); `max_text_chars` of a PDF's text are kept, the rest cut and said."""

    max_bytes: int = field(default=20 * 1024**2, validator=at_least(1))
    max_files: int = field(default=8, validator=at_least(1))
    max_pdf_pages: int = field(default=200, validator=at_least(1))
    max_text_chars: int = field(default=400_000, validator=at_least(1000))
    pdf_timeout_s: float = field(default=30.0, validator=positive)
    pdf_memory_mib: int = field(default=1024, validator=at_least(64))


@frozen
class ChannelConfig:
    socket: Path
    # A channel that takes none of its frames for this long is dropped and its turn cancelled.
    write_timeout_s: float = field(default=30.0, validator=positive)


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
    max_tokens: int = field(default=3000, validator=at_least(1))


@frozen
class CacheConfig:
    """Slot states saved across server restarts: `save_dir` must be the folder
    llama-server was started with as `--slot-save-path`; unset, nothing is saved."""

    save_dir: Path | None = None
    max_bytes: int = field(default=4 * 1024**3, validator=at_least(0))


def _check_slots(_instance: Any, attribute: Attribute[Any], slots: dict[str, int]) -> None:
    if "main" not in slots:
        raise InvalidValue("must name the slot 'main'", attribute.name)
    for name, slot in slots.items():
        if slot < 0:
            raise InvalidValue(f"slot {name!r} must be 0 or more, got {slot}", attribute.name)


# The tools that may join a session's baseline by name (`clock` always does): brokerd's, and
# find_tool, call_tool and read_result, which every baseline has but one whose profile names
# its tools (a fenced one) holds only when named here.
@frozen
class Config:
    """Everything `loopd` and `brokerd` read from `config.toml`, with every default filled
    in: one schema for the whole file, each daemon using its own keys."""

    server: ServerConfig
    slots: dict[str, int] = field(validator=_check_slots)
    inference: InferenceConfig
    loop: LoopConfig
    channel: ChannelConfig
    paths: PathsConfig
    baseline: BaselineConfig
    context: ContextConfig
    tools: ToolsConfig
    broker: BrokerConfig
    cache: CacheConfig = CacheConfig()
    sandbox: SandboxConfig = field(factory=SandboxConfig)
    checkpoints: CheckpointsConfig = field(factory=CheckpointsConfig)
    files: FilesConfig = field(factory=FilesConfig)
    memory: MemoryConfig = MemoryConfig()
    schedules: SchedulesConfig = SchedulesConfig()
    gateway: GatewayConfig = field(factory=GatewayConfig)
    model: ModelConfig = field(factory=ModelConfig)
    servers: dict[str, ServerConfig] = field(factory=dict)
    mcp: dict[str, McpServerConfig] = field(factory=dict, validator=mcp_names)
    slot_servers: dict[str, str] = field(factory=dict)  # slot -> server, when not the default
    tiers: dict[str, str] = field(factory=dict)  # purpose -> server (`_tiers.py`)
    tier_slots: dict[str, int] = field(factory=dict)  # purpose -> its own server slot id

    def tier(self, purpose: str) -> str | None:
        """The server `[tiers]` names for `purpose` (`chat`, `summary`, `vision`); None when
        unset."""
        return self.tiers.get(purpose)

    def tier_slot(self, purpose: str) -> int | None:
        """The server slot id `[tiers]` gives `purpose` (`"<server>:<id>"`); None when it
        gives none (no `id_slot` is sent: the server picks)."""
        return self.tier_slots.get(purpose)

    def chat_slots(self) -> list[str]:
        """The slots a new session may be pinned to: those on `[tiers] chat`'s server, else
        every slot, in the order of `[slots]`."""
        chat = self.tier("chat")
        return [slot for slot in self.slots if chat is None or self.server_of(slot) == chat]

    def server_of(self, slot: str) -> str:
        """The name of the server a logical slot is on."""
        return self.slot_servers.get(slot, DEFAULT_SERVER)

    def server_config(self, name: str) -> ServerConfig:
        return self.server if name == DEFAULT_SERVER else self.servers[name]

    def servers_in_use(self) -> list[str]:
        """The servers the slots are on, in the order of the slots, then those of the tiers."""
        names = [*(self.server_of(slot) for slot in self.slots), *self.tiers.values()]
        return list(dict.fromkeys(names))
