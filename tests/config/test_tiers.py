"""`[tiers]`: a purpose's server read from config.toml, each mistake said in words, and the
chat tier deciding which slots new sessions take (a session keeps its own for life)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.config import ConfigError, defaults_text, parse_config
from boxmaker.loopd.service import slot_for

from ..helpers import make_config

CONFIG = Path("/etc/boxmaker/config.toml")
SERVERS = """
[servers.small]
base_url = "http://small.local:8080"
[servers.gpu]
base_url = "http://gpu.local:8000"
kind = "openai"
[slots]
main = 0
second = 1
big = "gpu:0"
"""


def test_no_tiers_leave_every_purpose_to_the_sessions_servers() -> None:
    config = make_config(SERVERS)
    assert [config.tier(purpose) for purpose in ("chat", "summary", "vision")] == [None] * 3
    assert config.chat_slots() == ["main", "second", "big"]
    assert config.servers_in_use() == ["default", "gpu"]  # small serves nothing: no client


def test_each_purpose_resolves_to_its_server_and_its_own_slot() -> None:
    config = make_config(
        SERVERS + '[tiers]\nchat = "gpu"\nsummary = "small"\nvision = "default:2"\n'
    )
    assert config.tier("chat") == "gpu"
    assert (config.tier("summary"), config.tier_slot("summary")) == ("small", None)
    assert (config.tier("vision"), config.tier_slot("vision")) == ("default", 2)
    assert config.servers_in_use() == ["default", "gpu", "small"]  # the tiers' too
    # On an OpenAI-style server, which has no slots to take, no slot of its own is needed.
    assert make_config(SERVERS + '[tiers]\nsummary = "gpu"\n').tier("summary") == "gpu"


def test_the_chat_tier_decides_the_slots_new_sessions_take() -> None:
    config = make_config(SERVERS + '[tiers]\nchat = "default"\n')
    assert config.chat_slots() == ["main", "second"]
    chosen = {slot_for(p.SessionId(f"chat-{n}"), config) for n in range(200)}
    assert chosen == {"main", "second"}
    on_gpu = make_config(SERVERS + '[tiers]\nchat = "gpu"\n')
    assert {slot_for(p.SessionId(f"chat-{n}"), on_gpu) for n in range(50)} == {"big"}
    # Unset, every slot shares the new sessions, as before tiers.
    assert {slot_for(p.SessionId(f"chat-{n}"), make_config(SERVERS)) for n in range(200)} == {
        "main",
        "second",
        "big",
    }


ERRORS = [
    ("[tiers]\nsumary = 'small'\n", "unknown field @ $.tiers.sumary; did you mean 'summary'?"),
    ("[tiers]\nimages = 'small'\n", "unknown field @ $.tiers.images"),
    ("[tiers]\nsummary = 1\n", "expected str @ $.tiers.summary"),
    (
        "[tiers]\nsummary = 'small:x'\n",
        'expected "<server>" or "<server>:<id>", got \'small:x\' @ $.tiers.summary',
    ),
    ("[tiers]\nvision = ':1'\n", 'expected "<server>" or "<server>:<id>", got \':1\''),
    ("[tiers]\nvision = 'small:-1'\n", 'expected "<server>" or "<server>:<id>"'),
    (
        "[tiers]\nsummary = 'tiny'\n",
        "no server 'tiny' (there are: default, gpu, small) @ $.tiers.summary",
    ),
    (
        "[tiers]\nchat = 'gpu:0'\n",
        "expected a server, got 'gpu:0': new sessions take the slots [slots] puts on it "
        '("gpu") @ $.tiers.chat',
    ),
    (
        "[tiers]\nchat = 'small'\n",
        "no slot of [slots] is on server 'small', so a new session would have none to take; "
        'add one (name = "small:0") @ $.tiers.chat',
    ),
    (
        "[tiers]\nsummary = 'default'\n",
        "server 'default' holds sessions' slots (main, second): give the summary a slot of its "
        'own, such as "default:2", or its requests could push a session\'s prompt out of its '
        "slot @ $.tiers.summary",
    ),
    (
        "[tiers]\nvision = 'default:1'\n",
        "slot 1 of server 'default' is [slots] second's: give the vision a slot no session "
        'holds, such as "default:2" @ $.tiers.vision',
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[e[1] for e in ERRORS])
def test_a_bad_tier_is_said_with_its_key_and_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(SERVERS + text, CONFIG, {})
    assert str(caught.value).startswith(f"{CONFIG}: {message}")


def test_tiers_that_are_not_a_table_are_said() -> None:
    with pytest.raises(ConfigError, match=r"expected an object @ \$\.tiers$"):
        parse_config("tiers = 3\n" + SERVERS, CONFIG, {})


def test_the_defaults_text_shows_the_tiers() -> None:
    text = defaults_text()
    assert '# [tiers]: the server of a purpose, "<server>" or "<server>:<id>"' in text
    for purpose in ("chat", "summary", "vision"):
        assert f"\n# {purpose} = (unset: " in text
