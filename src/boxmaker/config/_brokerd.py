"""brokerd's sections of `config.toml`: `[tools]` (the core set, the workspace, the timeouts of
a call), `[sandbox]` (its limits: the one place their defaults are written), `[mcp.<name>]` and
`[broker]`. loopd reads `[tools]` too: the core set and the call timeout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from attrs import Attribute, field, frozen

from ..proto import InvalidValue, Mode
from ..tools import BUILTIN_TOOLS, CLOCK, CORE_TOOLS, FILE_TOOLS, MEMORY_TOOLS, SANDBOXED_TOOLS
from ._checks import at_least, positive

__all__ = [
    "CALL_MARGIN_S",
    "DEFAULT_CORE",
    "BrokerConfig",
    "CheckpointsConfig",
    "McpServerConfig",
    "SandboxConfig",
    "ToolsConfig",
    "mcp_names",
]


_MAY_BE_CORE = tuple(tool.name for tool in (*CORE_TOOLS, *BUILTIN_TOOLS) if tool is not CLOCK)
DEFAULT_CORE = tuple(tool.name for tool in (*FILE_TOOLS, *SANDBOXED_TOOLS, *MEMORY_TOOLS))


def _check_core(_instance: Any, attribute: Attribute[Any], names: tuple[str, ...]) -> None:
    for name in names:
        if name not in _MAY_BE_CORE:
            raise InvalidValue(
                f"{name!r} is not a tool that can be core; expected some of "
                f"{', '.join(map(repr, _MAY_BE_CORE))}",
                attribute.name,
            )
    if len(set(names)) != len(names):
        raise InvalidValue("names a tool twice", attribute.name)


CALL_MARGIN_S = 10.0  # of loopd's call timeout beyond the longest a sandboxed run may take


def _within_call(instance: Any, attribute: Attribute[Any], value: float) -> None:
    positive(instance, attribute, value)
    if value + CALL_MARGIN_S > instance.call_timeout_s:
        raise InvalidValue(
            f"must be at least {CALL_MARGIN_S:g} s less than call_timeout_s "
            f"({instance.call_timeout_s:g}), which covers the longest run, got {value:g}",
            attribute.name,
        )


def _not_over_max(instance: Any, attribute: Attribute[Any], value: float) -> None:
    positive(instance, attribute, value)
    if value > instance.shell_max_timeout_s:
        raise InvalidValue(f"must not pass shell_max_timeout_s, got {value:g}", attribute.name)


@frozen
class ToolsConfig:
    """The tools, for both daemons: brokerd's workspace; which of its tools a new session's
    baseline holds (`core`, besides the four every baseline has); how long loopd waits for
    a call (longer than the longest `shell` or cell), and for the owner's answer to one that
    asks; how long a command and a cell may run; how long an idle interpreter is kept."""

    workspace: Path
    core: tuple[str, ...] = field(default=DEFAULT_CORE, validator=_check_core)
    call_timeout_s: float = field(default=120.0, validator=positive)
    approval_timeout_s: float = field(default=300.0, validator=positive)
    shell_timeout_s: float = field(default=30.0, validator=_not_over_max)
    shell_max_timeout_s: float = field(default=100.0, validator=_within_call)
    cell_timeout_s: float = field(default=60.0, validator=_within_call)
    kernel_idle_s: float = field(default=1800.0, validator=positive)
    mode: Mode = Mode.AUTO  # a new session's mode (SPEC section 21)


_USER = re.compile(r"|[0-9]{1,10}(:[0-9]{1,10})?|[a-z_][a-z0-9_.-]{0,31}")


def _user(_instance: Any, attribute: Attribute[Any], value: str) -> None:
    if not _USER.fullmatch(value):
        raise InvalidValue(
            f'must be an account name, a uid or "uid:gid", got {value!r}', attribute.name
        )


@frozen
class CheckpointsConfig:
    """What brokerd keeps to undo a call (SPEC section 21): a root past `max_root_bytes` or
    `max_files` is not checkpointed (its calls say so); what is kept is at most `keep_bytes`,
    the oldest dropped first."""

    max_root_bytes: int = field(default=1 << 30, validator=at_least(1))
    max_files: int = field(default=100_000, validator=at_least(1))
    keep_bytes: int = field(default=2 << 30, validator=at_least(1))


@frozen
class SandboxConfig:
    """What one `shell` command or interpreter may use, and how many run at once; how long a
    value of a cell's digest may be before it is kept in the interpreter and shown as a stub
    (`digest_value_tokens`, estimated from bytes as the epochs' sizes are)."""

    cpu_s: int = field(default=60, validator=at_least(1))
    memory_mb: int = field(default=512, validator=at_least(16))
    processes: int = field(default=64, validator=at_least(4))
    open_files: int = field(default=256, validator=at_least(16))
    file_mb: int = field(default=256, validator=at_least(1))
    tmp_mb: int = field(default=256, validator=at_least(1))
    output_mb: int = field(default=16, validator=at_least(1))
    concurrency: int = field(default=4, validator=at_least(1))
    digest_value_tokens: int = field(default=2000, validator=at_least(16))
    # Under root, who every run is (an account, a uid or "uid:gid"); "" is the default:
    # "boxmaker-sandbox" where that account exists, else uid 65533 (brokerd/sandbox/ownership.py).
    user: str = field(default="", validator=_user)


def _words(_instance: Any, attribute: Attribute[Any], value: tuple[str, ...]) -> None:
    if not value or not all(type(word) is str and word for word in value):
        raise InvalidValue("must be the server's command as a list of words", attribute.name)


@frozen
class McpServerConfig:
    """An MCP server brokerd starts over stdio (`[mcp.<name>]`, SPEC section 16)."""

    command: tuple[str, ...] = field(validator=_words)  # the program and its arguments
    env: tuple[str, ...] = ()  # names of brokerd's variables passed on; nothing else is
    cwd: Path | None = None  # where it starts outside the sandbox (default `/`; inside, `/`)
    timeout_s: float = field(default=60.0, validator=positive)  # a call's answer
    start_timeout_s: float = field(default=30.0, validator=positive)  # initialize and listing
    sandbox: bool | None = None  # None: in bubblewrap where it works; True: only there
    network: bool = False  # it reaches the network: all its tools are egress
    read: tuple[Path, ...] = ()  # folders the sandbox shows it read-only (where it lives)
    message_mb: int = field(default=4, validator=at_least(1))  # the largest line it may send


@frozen
class BrokerConfig:
    """brokerd's own keys: its socket (loopd connects to it) and its policy file."""

    socket: Path
    policy: Path


def mcp_names(_instance: Any, _attribute: Attribute[Any], value: dict[str, Any]) -> None:
    for name in value:
        if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
            raise InvalidValue(
                f"an MCP server's name is letters, digits, - and _ (its tools are "
                f"<name>.<tool>), got {name!r}",
                "mcp",
            )
