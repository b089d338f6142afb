"""config.toml: defaults, paths, and one test per error a person can make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from boxmaker.config import ConfigError, defaults_text, load_config, parse_config

from ..helpers import make_config

CONFIG = Path("/etc/boxmaker/config.toml")


def parse(text: str, environ: dict[str, str] | None = None) -> Any:
    return parse_config(text, CONFIG, {} if environ is None else environ)


def test_an_empty_file_gives_every_default() -> None:
    config = parse_config("", CONFIG, {"BOXMAKER_HOME": "/home/me/bx"})
    assert config.server.base_url == "http://127.0.0.1:8080"
    assert config.server.api_key_env == ""
    assert (config.server.connect_timeout_s, config.server.first_byte_timeout_s) == (5.0, 600.0)
    assert config.server.idle_timeout_s == 60.0
    assert config.slots == {"main": 0}
    assert config.inference.thinking_cap == 4096
    assert config.inference.max_attempts == 4
    assert (config.inference.backoff_initial_ms, config.inference.backoff_max_ms) == (500, 8000)
    assert config.inference.sampling() == {"max_tokens": 16384}  # always sent
    assert config.inference.completion_timeout_s == 1800.0
    assert config.channel.write_timeout_s == 30.0
    assert config.loop.tool_iterations == 8
    assert config.loop.repeat_detection is True
    assert config.loop.tool_result_cap == 16384
    assert config.paths.home == Path("/home/me/bx")
    assert config.channel.socket == Path("/home/me/bx/run/loop/loop.sock")
    assert config.baseline.system == Path("/etc/boxmaker/system.md")
    assert config.baseline.max_tokens == 3000


def test_home_defaults_to_var_lib_without_boxmaker_home() -> None:
    config = parse_config("", CONFIG, {})
    assert config.paths.home == Path("/var/lib/boxmaker")
    assert config.channel.socket == Path("/var/lib/boxmaker/run/loop/loop.sock")


def test_relative_paths_are_taken_against_the_config_folder() -> None:
    config = parse_config(
        '[paths]\nhome = "data"\n[channel]\nsocket = "run/l.sock"\n[baseline]\nsystem = "p.md"\n',
        CONFIG,
        {"BOXMAKER_HOME": "/elsewhere"},
    )
    assert config.paths.home == Path("/etc/boxmaker/data")
    assert config.channel.socket == Path("/etc/boxmaker/run/l.sock")
    assert config.baseline.system == Path("/etc/boxmaker/p.md")


def test_the_socket_follows_a_configured_home() -> None:
    config = parse_config('[paths]\nhome = "/srv/bx"\n', CONFIG, {})
    assert config.channel.socket == Path("/srv/bx/run/loop/loop.sock")


def test_sampling_keys_pass_through_when_set() -> None:
    config = parse_config("[inference]\ntemperature = 0\nseed = 42\ntop_k = 5\n", CONFIG, {})
    assert config.inference.sampling() == {
        "temperature": 0.0,
        "top_k": 5,
        "seed": 42,
        "max_tokens": 16384,
    }


def test_slots_map_logical_names_to_server_slots() -> None:
    config = parse_config("[slots]\nmain = 2\nbackground = 3\n", CONFIG, {})
    assert config.slots == {"main": 2, "background": 3}


ERRORS = [
    ('[loop]\ntool_iterations = "8"\n', "expected int @ $.loop.tool_iterations"),
    (
        "[loop]\ntool_iteratons = 8\n",
        "unknown field @ $.loop.tool_iteratons; did you mean 'tool_iterations'?",
    ),
    ("[bogus]\nx = 1\n", "unknown field @ $.bogus\n"),
    ("[servr]\nx = 1\n", "unknown field @ $.servr; did you mean 'server'?"),
    ("[inference]\ntemprature = 0.0\n", "unknown field @ $.inference.temprature; did you mean"),
    (
        '[server]\nbase_url = "localhost:8080"\n',
        "'localhost:8080' must start with http:// or https://; did you mean "
        '"http://localhost:8080"? @ $.server.base_url',
    ),
    ('[server]\nbase_url = "ftp://h:21"\n', "'ftp://h:21' must start with http:// or https://"),
    ('[server]\nbase_url = "http://:8080"\n', "'http://:8080' has no host; e.g."),
    ('[server]\nbase_url = "http://h:99999"\n', "'http://h:99999' is not a URL (Port out of"),
    ('[server]\nbase_url = "http://h:x"\n', "'http://h:x' is not a URL"),
    ('[server]\nbase_url = "http://h:"\n', "'http://h:' has no port number"),
    ('[server]\nbase_url = "http://h:1/?q=1"\n', "'http://h:1/?q=1' has a query or fragment"),
    ("loop = 3\n", "expected an object @ $.loop"),
    ("[loop]\ntool_iterations = 0\n", "must be at least 1, got 0 @ $.loop.tool_iterations"),
    ("[loop]\nrepeat_detection = 1\n", "expected bool @ $.loop.repeat_detection"),
    ("[server]\nidle_timeout_s = 0\n", "must be more than 0, got 0.0 @ $.server.idle_timeout_s"),
    ("[server]\nbase_url = 8080\n", "expected str @ $.server.base_url"),
    (
        "[inference]\nbackoff_max_ms = 100\n",
        "is less than backoff_initial_ms (500) @ $.inference.backoff_max_ms",
    ),
    ('[inference]\ntemperature = "hot"\n', "expected float @ $.inference.temperature"),
    ("[inference]\nmax_tokens = 0\n", "must be at least 1, got 0 @ $.inference.max_tokens"),
    (
        "[inference]\ncompletion_timeout_s = 0\n",
        "must be more than 0, got 0.0 @ $.inference.completion_timeout_s",
    ),
    (
        "[channel]\nwrite_timeout_s = -1\n",
        "must be more than 0, got -1.0 @ $.channel.write_timeout_s",
    ),
    ("[slots]\nother = 1\n", "must name the slot 'main' @ $.slots"),
    ("[slots]\nmain = -1\n", "slot 'main' must be 0 or more, got -1 @ $.slots"),
    ('[slots]\nmain = "0"\n', "expected an id or \"<server>:<id>\", got '0' @ $.slots['main']"),
    ("[slots]\nmain = 1.5\n", "expected int @ $.slots['main']"),
    ('[slots]\nmain = "gpu:0"\n', "no server 'gpu' (there are: default) @ $.slots['main']"),
    ('[slots]\nmain = "gpu:-1"\n[servers.gpu]\n', 'expected an id or "<server>:<id>"'),
    ("[servers.default]\n", "'default' names [server] @ $.servers.default"),
    ("[servers.gpu]\nbase_url = 5\n", "expected str @ $.servers['gpu'].base_url"),
    ("[servers.gpu]\nkid = 'openai'\n", "unknown field @ $.servers.gpu.kid; did you mean 'kind'?"),
    ('[server]\nkind = "vllm"\n', "expected one of 'llama-server', 'openai' @ $.server.kind"),
    ("[server]\ncache_block = 0\n", "must be at least 1, got 0 @ $.server.cache_block"),
    ('[model]\nprofile = "gpt"\n', "expected 'auto' or one of fenced, native, "),
    ("[paths]\nhome = 5\n", "expected str @ $.paths.home"),
    ("[channel]\nsocket = 5\n", "expected str @ $.channel.socket"),
    ("[baseline]\nmax_tokens = 1.5\n", "expected int @ $.baseline.max_tokens"),
    ("x = [", "not valid TOML: "),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[e[1] for e in ERRORS])
def test_a_bad_config_names_the_file_the_key_and_the_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert (str(caught.value) + "\n").startswith(f"{CONFIG}: {message}")


def test_load_config_reads_the_file_and_takes_paths_against_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[paths]\nhome = "home"\n')
    config = load_config(path, {})
    assert config.paths.home == tmp_path / "home"
    assert config.baseline.system == tmp_path / "system.md"


def test_load_config_of_a_missing_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=f"{path}: cannot read the config: No such file"):
        load_config(path, {})


def test_tool_choice_is_passed_to_the_server_as_it_is() -> None:
    inference = make_config('[inference]\ntool_choice = "required"\ntemperature = 0\n').inference
    assert inference.sampling() == {
        "temperature": 0.0,
        "max_tokens": 16384,
        "tool_choice": "required",
    }
    with pytest.raises(ConfigError, match=r"expected str @ \$\.inference\.tool_choice"):
        make_config("[inference]\ntool_choice = 1\n")


def test_a_base_url_with_a_path_or_https_is_fine() -> None:
    for url in ("http://127.0.0.1:8080", "https://llama.local/api", "http://[::1]:80"):
        assert parse(f'[server]\nbase_url = "{url}"\n').server.base_url == url


def test_every_key_has_its_default_in_the_text_for_help() -> None:
    text = defaults_text() + "\n"
    config = parse("")
    for section in ("server", "inference", "loop", "baseline"):
        for key, value in attrs.asdict(getattr(config, section)).items():
            if key != "system":
                assert f"\n{key} = " in text, key
                if value is not None and not isinstance(value, bool | str):
                    assert f"\n{key} = {value}\n" in text, key
    assert 'home = "$BOXMAKER_HOME", else "/var/lib/boxmaker"' in text
    assert "SPEC" not in text
