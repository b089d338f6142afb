"""`[gateway]` and `[gateway.matrix]` (SPEC section 18): the owners are required and never the
bot itself, one secret's variable is named, unknown keys are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.config import ConfigError, MatrixConfig, defaults_text, parse_config

MATRIX = '[gateway.matrix]\nhomeserver = "http://127.0.0.1:8008"\nuser_id = "@bot:hs"\n'


def parse(text: str) -> object:
    return parse_config(text, Path("/c/config.toml"), {})


def test_a_gateway_section_is_read() -> None:
    config = parse(MATRIX + 'owners = ["@me:hs"]\npassword_env = "PW"\n')
    assert config.gateway.matrix == MatrixConfig(  # type: ignore[attr-defined]
        "http://127.0.0.1:8008", "@bot:hs", ("@me:hs",), password_env="PW"
    )
    assert parse("").gateway.matrix is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('owners = ["@bot:hs"]\npassword_env = "PW"', "holds the gateway's own id"),
        ('owners = []\npassword_env = "PW"', "at least one owner"),
        ('owners = ["me"]\npassword_env = "PW"', "not a Matrix user id"),
        ('owners = ["@me:hs"]', "set access_token_env or password_env"),
        ('owners = ["@me:hs"]\npassword_env = "no spaces"', "not an environment variable"),
        (
            'owners = ["@me:hs"]\npassword_env = "PW"\nowner = 1',
            "unknown field @ $.gateway.matrix.owner",
        ),
    ],
)
def test_a_wrong_gateway_section_is_refused_by_name(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(MATRIX + text)
    assert said in str(refused.value)


def test_the_homeserver_is_a_url_and_sizes_fit_an_event() -> None:
    with pytest.raises(ConfigError, match="must start with http"):
        parse(
            MATRIX.replace("http://127.0.0.1:8008", "matrix.org")
            + 'owners = ["@a:b"]\npassword_env = "P"'
        )
    with pytest.raises(ConfigError, match="less than a Matrix event"):
        parse("[gateway]\nmax_message_bytes = 70000\n")


def test_the_defaults_text_shows_the_gateway() -> None:
    text = defaults_text()
    assert "max_message_bytes = 16384" in text
    assert "# owners = " in text
