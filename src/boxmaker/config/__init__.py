"""`config.toml` -> `Config` (SPEC section 3).

Read with `tomllib`, structured by the one converter, so unknown keys and wrong types are
refused with the file, the key and the expectation: `config.toml: expected int @
$.loop.tool_iterations` (an unknown key near a known one adds "did you mean ...?"; `base_url`
must be `http(s)://host:port`, checked here rather than on the first request). Relative paths
are taken against the config file's folder; `[paths] home` defaults to `$BOXMAKER_HOME`, else
`/var/lib/boxmaker`, and `[channel] socket` to `<home>/run/loop/loop.sock`. `[server]` is
the server named `default`; more may be named in `[servers.<name>]`, and a slot is either an
id on the default server (`main = 0`) or `"<server>:<id>"`; `[tiers]` names the server of a
purpose (`chat`, `summary`, `vision`: `_tiers.py`). `parse_config` is pure;
`load_config` reads the file; `defaults_text` says every default (`loopd serve --help`).
`mistakes` says what the converter refused in a TOML file, and where: policy.toml's errors
read as this file's.
"""

from ._gateway import MATRIX_EVENT_BYTES, GatewayConfig, MatrixConfig
from ._mistakes import key_name, key_path, mistakes, unknown_field
from ._parse import defaults_text, load_config, parse_config
from ._recorded import TURN_KEYS, turn_config, with_turn_config
from ._sections import (
    CALL_MARGIN_S,
    DEFAULT_CORE,
    DEFAULT_HOME,
    DEFAULT_SERVER,
    KINDS,
    SAMPLING_KEYS,
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
from ._tiers import PURPOSES

__all__ = [
    "CALL_MARGIN_S",
    "DEFAULT_CORE",
    "DEFAULT_HOME",
    "DEFAULT_SERVER",
    "KINDS",
    "MATRIX_EVENT_BYTES",
    "PURPOSES",
    "SAMPLING_KEYS",
    "TURN_KEYS",
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
    "defaults_text",
    "key_name",
    "key_path",
    "load_config",
    "mistakes",
    "parse_config",
    "turn_config",
    "unknown_field",
    "with_turn_config",
]
