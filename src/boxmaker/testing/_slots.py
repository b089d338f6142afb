"""The fake server's `POST /slots/<id>?action=save|restore|erase` as
llama-server answers them (tools/server/server-context.cpp: post_slots, handle_slots_save,
handle_slots_restore, handle_slots_erase; server-task.cpp for the answers;
common/common.cpp fs_validate_filename for the names). Pure but for the file it reads or
writes.

A save file holds what the slot's cache holds (its tokens) behind the real file's magic and
version (`ggsq`, 4), so a file that is not one is refused as the server refuses it.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from ._wire import error_body

__all__ = ["NOT_SUPPORTED", "SlotAnswer", "slot_action"]

MAGIC = b"ggsq"
VERSION = 4
NOT_SUPPORTED = (
    501,
    error_body(
        501,
        "This server does not support slots action. Start it with `--slot-save-path`",
        "not_supported_error",
    ),
)
_RESTORE_FAILED = "Unable to restore slot: No available space in KV cache or invalid slot save file"
# fs_validate_filename with allow_subdirs=false, for the characters a test can send.
_BAD_NAME = re.compile(r'[\x00-\x1f\x7f-\x9f/\\:*?"<>|\ufeff\ufffd\uff0e\u2215\u2216]')

SlotAnswer = tuple[int, Any]  # status and body (a JSON value, or error bytes)


def _valid_name(name: str) -> bool:
    return (
        0 < len(name.encode()) <= 255
        and name == name.strip(" ")
        and not name.endswith(".")
        and ".." not in name
        and name != "."
        and _BAD_NAME.search(name) is None
    )


def _invalid(message: str) -> SlotAnswer:
    return 400, error_body(400, message, "invalid_request_error")


def slot_action(
    save_path: Path | None,
    slot_text: str,
    action: str,
    body: Any,
    tokens: dict[int, list[str]],
    n_slots: int,
    n_ctx: int,
) -> SlotAnswer:
    """Answer one slot action; `tokens` is the fake's per-slot cache, changed in place."""
    if save_path is None:
        return NOT_SUPPORTED
    try:
        slot = int(slot_text) % n_slots  # std::stoi, then a size_t modulo: no id is refused
    except ValueError:
        return _invalid("Invalid slot ID")
    if action == "erase":
        erased = len(tokens.pop(slot, []))
        return 200, {"id_slot": slot, "n_erased": erased}
    if action not in ("save", "restore"):
        return _invalid("Invalid action")
    if not isinstance(body, dict) or "filename" not in body:
        return _invalid("[json.exception.out_of_range.403] key 'filename' not found")
    name = body["filename"]
    if not isinstance(name, str) or not _valid_name(name):
        return _invalid("Invalid filename")
    path = save_path / name
    if action == "save":
        held = tokens.get(slot, [])
        blob = json.dumps(held).encode()
        try:
            path.write_bytes(MAGIC + struct.pack("<II", VERSION, len(held)) + blob)
        except OSError:
            return 500, error_body(500, "Unable to save slot", "server_error")
        return 200, {
            "id_slot": slot,
            "filename": name,
            "n_saved": len(held),
            "n_written": path.stat().st_size,
            "timings": {"save_ms": 0.5},
        }
    tokens.pop(slot, None)  # a restore clears the slot first, whatever follows
    try:
        raw = path.read_bytes()
        if raw[:4] != MAGIC or struct.unpack("<I", raw[4:8])[0] != VERSION:
            raise ValueError("not a slot file")
        restored = json.loads(raw[12:])
        if not isinstance(restored, list) or not all(isinstance(t, str) for t in restored):
            raise ValueError("not a token list")
    except (OSError, ValueError, struct.error):
        return 400, error_body(400, _RESTORE_FAILED, "invalid_request_error")
    if len(restored) > n_ctx:
        message = "Unable to restore slot: Restored prompt does not fit in the slot context"
        return 400, error_body(400, message, "invalid_request_error")
    tokens[slot] = restored
    return 200, {
        "id_slot": slot,
        "filename": name,
        "n_restored": len(restored),
        "n_read": len(raw),
        "timings": {"restore_ms": 0.5},
    }
