"""The policy file's words (its decisions), its error, and how a key and a value are shown in
that error, as config.toml's are: `<what was expected> @ $.<key>` (`config.key_path`). Pure."""

from __future__ import annotations

import enum
import json
from typing import Any

from ...config import key_name as name
from ...config import key_path as key
from ..errors import PolicyError

__all__ = ["Decision", "PolicyError", "key", "name", "shown"]


class Decision(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"  # the owner is asked each time
    DENY = "deny"


def shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
