"""Your own model for `make run`: a GGUF file for the llama-server it starts (`MODEL=`, or
`model =` in `.boxmaker/llama-server.toml`), or a server that already runs (`SERVER=`), used
as it is, with no build and no download.

Both are checked before anything starts, and a refusal says which file or address and why.
A GGUF file is opened and its header read: the magic `GGUF` and a version llama-server reads
(2 or 3), so a text file, a half download or a Git LFS pointer named `.gguf` is refused here
rather than in llama-server's log. A server is asked what it is, within `PROBE_S` in all:
llama-server answers `GET /props`; any other server answers `GET /v1/models` as an
OpenAI-style one does (vLLM, SGLang, Ollama) and is used as the `openai` kind, with the one
model it lists (or the one `MODEL=` names: Ollama lists every model pulled). The run's config
is then the person's `config.toml` with `[server]` pointed there (`write_run_config`),
written beside it so that its relative paths mean the same.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import tomlkit
import trio
from attrs import frozen

from boxmaker.config import ServerConfig
from boxmaker.proto import DecodeError, InvalidValue, parse_json

__all__ = ["PROBE_S", "Refused", "Served", "check_gguf", "probe", "served_by", "write_run_config"]

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)  # what llama.cpp reads: version 1 is no longer, 3 is the newest
HEADER = 24  # magic, version (u32), tensor count (u64), metadata count (u64)
PROBE_S = 10.0  # the whole probe of a server: both routes, connecting and reading
ANSWER_BYTES = 1 << 20  # `/props` holds the chat template: tens of KB
RUN_CONFIG = "server-config.toml"


class Refused(Exception):
    """What `make run` will not use; the message names the file or the address and why."""


@frozen
class Served:
    """A running server, as it says it is: its address, its kind (`llama-server` or
    `openai`) and the model: llama-server's file (said, not sent), or the id an OpenAI-style
    server is asked for."""

    url: str
    kind: str
    model: str


def check_gguf(path: Path, given: str) -> None:
    """Refuse `path` unless it is a regular file that reads as a GGUF model; `given` says
    where it was named (`MODEL=x`), to open the message with.

    Raises:
        Refused: missing, not a file, unreadable, too short, or the magic or version wrong.
    """
    try:  # non-blocking: a FIFO named as the model must not hang the run
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Refused(f"{given}: there is no file {path}") from None
    except OSError as error:
        raise Refused(f"{given}: {path} cannot be read: {error.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise Refused(f"{given}: {path} is a folder; name the .gguf file in it")
        if not stat.S_ISREG(mode):
            raise Refused(f"{given}: {path} is not a regular file")
        head = b""
        while len(head) < HEADER and (more := os.read(fd, HEADER - len(head))):
            head += more
    except OSError as error:
        raise Refused(f"{given}: {path} cannot be read: {error.strerror}") from None
    finally:
        os.close(fd)
    if not head.startswith(GGUF_MAGIC):
        what = " (a Git LFS pointer: fetch the file itself)" if head.startswith(b"version ") else ""
        raise Refused(
            f"{given}: {path} is not a GGUF model file: it starts with {head[:4]!r}, not "
            f"{GGUF_MAGIC!r}{what}"
        )
    if len(head) < HEADER:
        raise Refused(f"{given}: {path} is cut short: {len(head)} bytes, less than a GGUF header")
    version = int.from_bytes(head[4:8], "little")
    if version not in GGUF_VERSIONS:
        swapped = int.from_bytes(head[4:8], "big")
        why = (
            "written big-endian, which llama-server does not read here"
            if swapped in GGUF_VERSIONS
            else f"GGUF version {version}, and llama-server reads versions 2 and 3"
        )
        raise Refused(f"{given}: {path} is {why}")


def probe(url: str, wanted: str = "", api_key: str = "", timeout: float = PROBE_S) -> Served:
    """What runs at `url`: llama-server, or an OpenAI-style server and its model (`wanted`,
    else the one it lists). Nothing is sent but two GETs, and nothing waits past `timeout`.

    Raises:
        Refused: `url` is not an address, nothing answers there in time, or what answers is
            neither kind (each in words, with what to do).
    """
    try:
        ServerConfig(base_url=url)  # the config's own rule for an address
    except InvalidValue as error:
        raise Refused(f"SERVER={url}: {error}") from None
    if urlsplit(url).path.rstrip("/").endswith("/v1"):
        root = url.rstrip("/").removesuffix("/v1")
        raise Refused(f"SERVER={url}: give the server's address without /v1 ({root}); loopd "
                      "asks /v1/chat/completions there")  # fmt: skip
    answers: dict[str, tuple[int, Any]] = {}

    async def ask() -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as client:
            for route in ("/props", "/v1/models"):
                answers[route] = await _get(client, route)
                if _is_props(answers[route]):
                    return  # llama-server: /v1/models is not asked

    async def bounded() -> bool:
        with trio.move_on_after(timeout) as scope:
            await ask()
        return scope.cancelled_caught

    try:
        if trio.run(bounded):
            raise Refused(f"SERVER={url}: nothing answered there within {timeout:g} s; check "
                          "the address, and that the server is running")  # fmt: skip
    except httpx.ConnectError as error:
        raise Refused(f"SERVER={url}: nothing answers there ({error}); start the server "
                      "first, or check the address") from None  # fmt: skip
    except httpx.HTTPError as error:
        raise Refused(f"SERVER={url}: what answers there does not speak HTTP as a server "
                      f"should ({type(error).__name__}: {error})") from None  # fmt: skip
    return served_by(url, wanted, answers)


async def _get(client: httpx.AsyncClient, route: str) -> tuple[int, Any]:
    """The status and the JSON of an answer (None when it is not JSON), read to a bound."""
    async with client.stream("GET", route) as answer:
        body = b""
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > ANSWER_BYTES:
                return answer.status_code, None
    try:
        return answer.status_code, parse_json(body)
    except DecodeError:
        return answer.status_code, None


def _is_props(answer: tuple[int, Any]) -> bool:
    status, body = answer
    return status == 200 and isinstance(body, dict) and "default_generation_settings" in body


def _names(ids: list[str], most: int = 8) -> str:
    shown = ", ".join(repr(name[:80]) for name in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def served_by(url: str, wanted: str, answers: dict[str, tuple[int, Any]]) -> Served:
    """What the server is, from what it answered (`answers`: the status and the JSON, or
    None, by route): llama-server by its `/props`, else an OpenAI-style server by the models
    `/v1/models` lists, `wanted` among them. Pure.

    Raises:
        Refused: neither kind; a key asked for; still loading; no model, or not one model
            without `wanted`, or `wanted` not among them.
    """
    props = answers.get("/props", (0, None))
    if _is_props(props):
        said = props[1].get("model_alias") or props[1].get("model_path") or "its model"
        model = str(said).replace("\\", "/").rsplit("/", 1)[-1]
        if wanted:
            raise Refused(f"SERVER={url} is a llama-server, which serves the model it was "
                          f"started with ({model!r:.80}); MODEL= with SERVER= names one of the "
                          "models an OpenAI-style server lists")  # fmt: skip
        return Served(url, "llama-server", model)
    statuses = {route: status for route, (status, _body) in answers.items()}
    if {401, 403} & set(statuses.values()):
        raise Refused(f"SERVER={url} asks for an API key: put the name of the environment "
                      "variable that holds it in [server] api_key_env of config.toml")  # fmt: skip
    if 503 in statuses.values():
        raise Refused(f"SERVER={url} answers 503: is it still loading its model? Run again "
                      "once it is ready")  # fmt: skip
    status, listed = answers.get("/v1/models", (0, None))
    data = listed.get("data") if status == 200 and isinstance(listed, dict) else None
    if not isinstance(data, list):
        said = ", ".join(f"GET {route}: {code}" for route, code in statuses.items())
        raise Refused(f"SERVER={url} is neither a llama-server (its /props) nor an OpenAI-style "
                      f"server (its /v1/models) by what it answered ({said})")  # fmt: skip
    ids = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    if not ids:
        raise Refused(f"SERVER={url} lists no model at /v1/models; give it one first")
    if wanted and wanted not in ids:
        raise Refused(f"SERVER={url} serves no model {wanted!r:.80}; it lists {_names(ids)}")
    if not wanted and len(ids) > 1:
        raise Refused(f"SERVER={url} lists {len(ids)} models ({_names(ids)}); name the one to "
                      "use with MODEL=<name>")  # fmt: skip
    return Served(url, "openai", wanted or ids[0])


def write_run_config(config: Path, served: Served) -> Path:
    """The run's config: `config`'s text with `[server]` pointed at `served` (and no slot
    saves: the folder is the one `make run`'s own llama-server would write), written beside
    it; its path."""
    lines = config.read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith("#"):  # its own header: this one's replaces it
        lines.pop(0)
    doc = tomlkit.parse("".join(lines))
    server = doc.setdefault("server", tomlkit.table())
    server["base_url"] = served.url
    server["kind"] = served.kind
    if served.kind == "openai":
        server["model"] = served.model
    elif "model" in server:
        del server["model"]
    cache = doc.get("cache")
    if cache is not None and "save_dir" in cache:
        del cache["save_dir"]
    path = config.with_name(RUN_CONFIG)
    partial = path.with_suffix(".partial")
    head = (f"# Written by `make run SERVER={served.url}` from {config.name}, each such run: "
            f"edit {config.name}, not this.\n")  # fmt: skip
    partial.write_text(head + tomlkit.dumps(doc), encoding="utf-8")
    partial.replace(path)
    return path
