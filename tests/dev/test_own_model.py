"""Your own model for `make run` (`bxdev.own_model`): a GGUF file checked before anything
starts, a running server asked what it is, the run's config written from the person's; and
`make run SERVER=` and `MODEL=` as typed, against the fake server on TCP."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bxdev.own_model import Refused, Served, check_gguf, probe, served_by, write_run_config

from ..processes import Process

BIN = Path(sys.executable).parent
REPO = Path(__file__).parents[2]
HEADER = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)  # no tensors, no metadata
PROPS = {"default_generation_settings": {"n_ctx": 4096}, "model_path": "/m/Own-7B.Q4.gguf"}


def running(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def models(*ids: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model"} for name in ids]}


# --- a GGUF file ------------------------------------------------------------------------------


def test_a_gguf_header_passes(tmp_path: Path) -> None:
    model = tmp_path / "own.gguf"
    model.write_bytes(HEADER + b"\0" * 100)
    check_gguf(model, "MODEL=own.gguf")
    model.write_bytes(b"GGUF" + (2).to_bytes(4, "little") + bytes(16))  # version 2 is read too
    check_gguf(model, "MODEL=own.gguf")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "there is no file {path}"),
        (b"hello world, this is text\n", "{path} is not a GGUF model file: it starts with b'hell'"),
        (b"version https://git-lfs.github.com/spec/v1\n", "(a Git LFS pointer: fetch the file"),
        (b"", "{path} is not a GGUF model file: it starts with b''"),
        (b"GGUF\x03\0\0\0", "{path} is cut short: 8 bytes, less than a GGUF header"),
        (b"GGUF" + (1).to_bytes(4, "little") + bytes(16), "GGUF version 1, and llama-server"),
        (b"GGUF" + (9).to_bytes(4, "little") + bytes(16), "GGUF version 9, and llama-server"),
        (b"GGUF" + (3).to_bytes(4, "big") + bytes(16), "{path} is written big-endian"),
    ],
)
def test_what_is_not_a_readable_gguf_is_refused_in_words(
    tmp_path: Path, content: bytes | None, said: str
) -> None:
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(Refused) as refused:
        check_gguf(path, "MODEL=model.gguf")
    assert str(refused.value).startswith("MODEL=model.gguf: ")
    assert said.format(path=path) in str(refused.value)


def within(seconds: float, code: str) -> str:
    """What `code` prints, run in a process of its own that may take `seconds` at most (a
    call that would wait forever fails the test instead of hanging it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=seconds)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def refusal(call: str) -> str:
    """Python that prints the `Refused` message of `call` (bxdev.own_model's names in scope)."""
    return (f"from pathlib import Path\nfrom bxdev.own_model import *\ntry:\n    {call}\n"
            "except Refused as e:\n    print(e)\nelse:\n    print('not refused')")  # fmt: skip


def test_a_folder_a_fifo_and_a_path_through_a_file_are_refused_without_waiting(
    tmp_path: Path,
) -> None:
    with pytest.raises(Refused, match=r"is a folder; name the \.gguf file in it"):
        check_gguf(tmp_path, "MODEL=.")
    fifo = tmp_path / "fifo.gguf"
    os.mkfifo(fifo)  # nobody writes to it: opening it to read must not wait for a writer
    said = within(30, refusal(f"check_gguf(Path({str(fifo)!r}), 'MODEL=fifo.gguf')"))
    assert "fifo.gguf is not a regular file" in said
    (tmp_path / "file").write_bytes(HEADER)
    with pytest.raises(Refused, match="cannot be read: Not a directory"):
        check_gguf(tmp_path / "file" / "x.gguf", "MODEL=file/x.gguf")


# --- what a server is ---------------------------------------------------------------------------

URL = "http://h:1"


def test_llama_server_is_told_by_its_props_and_an_openai_style_server_by_its_models() -> None:
    assert served_by(URL, "", {"/props": (200, PROPS)}) == Served(URL, "llama-server",
                                                                  "Own-7B.Q4.gguf")  # fmt: skip
    ollama = {"/props": (404, None), "/v1/models": (200, models("qwen3:8b"))}
    assert served_by(URL, "", ollama) == Served(URL, "openai", "qwen3:8b")
    several = {"/props": (404, None), "/v1/models": (200, models("a:1b", "b:8b"))}
    assert served_by(URL, "b:8b", several) == Served(URL, "openai", "b:8b")
    # A `/props` that is not llama-server's (another server's page) does not make it one.
    other = {"/props": (200, {"title": "x"}), "/v1/models": (200, models("m"))}
    assert served_by(URL, "", other).kind == "openai"


@pytest.mark.parametrize(
    ("wanted", "answers", "said"),
    [
        ("", {"/props": (404, None), "/v1/models": (404, None)},
         "is neither a llama-server (its /props) nor an OpenAI-style server (its /v1/models) by "
         "what it answered (GET /props: 404, GET /v1/models: 404)"),
        ("", {"/props": (404, None), "/v1/models": (200, {"data": "x"})}, "is neither"),
        ("", {"/props": (401, None), "/v1/models": (401, None)}, "asks for an API key"),
        ("", {"/props": (503, None), "/v1/models": (503, None)}, "answers 503: is it still"),
        ("", {"/props": (404, None), "/v1/models": (200, models())}, "lists no model"),
        ("", {"/props": (404, None), "/v1/models": (200, models("a:1b", "b:8b"))},
         "lists 2 models ('a:1b', 'b:8b'); name the one to use with MODEL=<name>"),
        ("y", {"/props": (404, None), "/v1/models": (200, models("a", "z"))},
         "serves no model 'y'; it lists 'a', 'z'"),
        ("q", {"/props": (404, None), "/v1/models": (200, models(*"abcdefghij"))},
         "it lists 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' and 2 more"),
        ("m", {"/props": (200, PROPS)}, "is a llama-server, which serves the model it was "
         "started with ('Own-7B.Q4.gguf')"),
    ],
)  # fmt: skip
def test_a_server_that_cannot_be_used_is_refused_in_words(
    wanted: str, answers: dict[str, tuple[int, Any]], said: str
) -> None:
    with pytest.raises(Refused) as refused:
        served_by(URL, wanted, answers)
    assert str(refused.value).startswith(f"SERVER={URL}")
    assert said in str(refused.value)


def fake(*args: str) -> tuple[Process, str]:
    """The fake server on a free port, and its address."""
    process = Process([str(BIN / "python"), "-m", "boxmaker.testing", *args], dict(os.environ),
                      REPO)  # fmt: skip
    return process, process.out.wait_for("listening on").split()[-1]


def test_a_probe_asks_the_fake_in_either_kind_and_refuses_what_is_not_an_address() -> None:
    llama, llama_url = fake("--model", "/m/Own-7B.gguf")
    ollama, ollama_url = fake("--kind", "openai", "--ollama", "--model", "qwen3:8b")
    try:
        assert probe(llama_url) == Served(llama_url, "llama-server", "Own-7B.gguf")
        assert probe(ollama_url) == Served(ollama_url, "openai", "qwen3:8b")
    finally:
        llama.stop()
        ollama.stop()
    with pytest.raises(Refused, match="nothing answers there"):
        probe(llama_url)  # stopped: its port is closed
    with pytest.raises(Refused, match='must start with http:// or https://; did you mean "http'):
        probe("localhost:8080")
    with pytest.raises(Refused, match=r"without /v1 \(http://h:1\)"):
        probe("http://h:1/v1/")


def test_a_server_that_never_answers_is_given_up_on_in_bounded_time() -> None:
    with socket.socket() as silent:  # connections wait in its backlog; nothing answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        said = within(30, refusal(f"probe({url!r}, timeout=0.5)"))
    assert f"SERVER={url}: nothing answered there within 0.5 s" in said


# Answers every request with a JSON body that never ends, until the client hangs up.
ENDLESS = """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print("listening on http://127.0.0.1:%d" % s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    try:
        c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n\\r\\n")
        while True:
            c.sendall(b"[" * 65536)
    except OSError:
        c.close()
"""


def test_an_answer_without_end_is_read_to_a_bound_not_to_the_deadline() -> None:
    endless = Process([sys.executable, "-c", ENDLESS], dict(os.environ), REPO)
    try:
        url = endless.out.wait_for("listening on").split()[-1]
        said = within(60, refusal(f"probe({url!r}, timeout=30)"))
    finally:
        endless.stop()
    assert "is neither a llama-server (its /props) nor an OpenAI-style server" in said
    assert "(GET /props: 200, GET /v1/models: 200)" in said  # each read to 1 MiB, then left


def test_the_run_s_config_is_the_person_s_pointed_at_the_server(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '# the person\'s header\n[server]\nbase_url = "http://127.0.0.1:9"\n'
        'api_key_env = "KEY"  # kept\nmodel = "old"\n[cache]\nsave_dir = "slots"\n'
        "max_bytes = 10\n[loop]\ntool_iterations = 3\n"
    )
    path = write_run_config(config, Served("http://h:1", "openai", "qwen3:8b"))
    text = path.read_text()
    assert path == tmp_path / "server-config.toml"
    assert text.startswith("# Written by `make run SERVER=http://h:1` from config.toml")
    assert "the person's header" not in text
    assert 'base_url = "http://h:1"\napi_key_env = "KEY"  # kept\nmodel = "qwen3:8b"\n' in text
    assert 'kind = "openai"' in text
    assert "save_dir" not in text  # the folder `make run`'s own llama-server would write
    assert "max_bytes = 10\n[loop]\ntool_iterations = 3\n" in text
    again = write_run_config(config, Served("http://h:2", "llama-server", "x.gguf"))
    assert "model" not in again.read_text()  # llama-server serves its own
    assert config.read_text().startswith("# the person's header")  # untouched


# --- make run, as typed ---------------------------------------------------------------------------


def make(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`make` as a person types it in the checkout, its state in `root` and the build cache an
    empty folder there (what a run builds or fetches would land in it). pip may reach no
    index: a run that wrongly builds fails at once, downloading nothing. On its deadline the
    whole process group is killed, whatever it started."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env |= {"BOXMAKER_RUN_DIR": str(root / "run"), "BOXMAKER_CACHE": str(root / "cache"),
            "XDG_STATE_HOME": str(root / "state"), "NO_COLOR": "1",
            "PIP_NO_INDEX": "1"}  # fmt: skip
    (root / "cache").mkdir(exist_ok=True)
    args = ["make", "--no-print-directory", *args]
    pipe = subprocess.PIPE
    with subprocess.Popen(args, cwd=REPO, env=env, stdin=pipe, stdout=pipe, stderr=pipe,
                          text=True, start_new_session=True) as run:  # fmt: skip
        try:
            out, err = run.communicate(stdin, timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            out, err = run.communicate()
            for pid in started(err).values():  # the servers it said it started, each in a
                with contextlib.suppress(ProcessLookupError):  # session of its own
                    os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"make {' '.join(args[2:])} took over 120 s:\n{err}") from None
    return subprocess.CompletedProcess(args, run.returncode, out, err)


def started(said: str) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", said)}


@pytest.mark.parametrize(
    ("kind", "args", "model", "using"),
    [
        ("llama-server", (), "", "using the llama-server at {url} (model 'fake.gguf'"),
        # As Ollama with two models pulled: the one named is used, and told to loopd.
        ("openai", ("--kind", "openai", "--ollama", "--model", "qwen3:8b", "--also-list",
                    "llama3.2:3b"), "qwen3:8b",
         "using the OpenAI-style server at {url} (model 'qwen3:8b'"),
    ],
)  # fmt: skip
def test_make_run_server_uses_the_running_server_and_builds_nothing(
    tmp_path: Path, kind: str, args: tuple[str, ...], model: str, using: str
) -> None:
    server, url = fake("--reply", "Hello from your own server.", *args)
    try:
        named = (f"MODEL={model}",) if model else ()
        ran = make(tmp_path, "run", f"SERVER={url}", *named, stdin="Hi\n")
        assert ran.returncode == 0, ran.stderr
        assert "Hello from your own server." in ran.stdout  # the chat's first answer
        assert f"make run: {using.format(url=url)}" in ran.stderr
        pids = started(ran.stderr)
        assert sorted(pids) == ["brokerd", "loopd"]  # no llama-server of its own
        assert [name for name, pid in pids.items() if running(pid)] == []
        assert server.popen.poll() is None  # the server is not its to stop
        assert list((tmp_path / "cache").iterdir()) == []  # nothing built or downloaded
        assert not (tmp_path / "run" / "servers.json").exists()
        config = (tmp_path / "run" / "server-config.toml").read_text()
        assert f'base_url = "{url}"\nkind = "{kind}"' in config
        said = (tmp_path / "run" / "loopd.log").read_text()
        served = model or "fake.gguf"  # auto chose by the model used, with its context
        assert f"no profile matches the model {served};" in said
        assert "context 4096 tokens (the server's)" in said
    finally:
        server.stop()


def test_make_serve_server_leaves_the_daemons_running_until_make_stop(tmp_path: Path) -> None:
    server, url = fake("--reply", "Served.")
    try:
        served = make(tmp_path, "serve", f"SERVER={url}")
        try:
            assert served.returncode == 0, served.stderr
            said = subprocess.run(f"{served.stdout.strip()} --say Hello", shell=True, text=True,
                                  capture_output=True, timeout=60)  # fmt: skip
            assert (said.returncode, said.stdout.strip()) == (0, "Served."), said.stderr
        finally:
            stopped = make(tmp_path, "stop")
        pids = started(served.stderr)
        assert sorted(pids) == ["brokerd", "loopd"]
        assert f"make stop: stopped loopd (pid {pids['loopd']})" in stopped.stderr
        assert [name for name, pid in pids.items() if running(pid)] == []
        assert server.popen.poll() is None
    finally:
        server.stop()


def test_make_run_model_refuses_a_file_that_is_not_a_gguf_before_anything_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.gguf").write_text("my notes\n")
    ran = make(tmp_path, "run", f"MODEL={tmp_path}/notes.gguf")
    assert ran.returncode == 2  # make's, for a recipe that failed
    assert ran.stderr.startswith(f"make run: MODEL={tmp_path}/notes.gguf: {tmp_path}/notes.gguf "
                                 "is not a GGUF model file: it starts with b'my n'")  # fmt: skip
    assert "started" not in ran.stderr
    assert list((tmp_path / "cache").iterdir()) == []  # refused before the build
    assert not list((tmp_path / "run").glob("*.log"))  # no server ever wrote its log
