"""loopd's self-test says which server each tier resolves to, and whether the summary tier's
context holds an epoch of the sessions' servers (else that the session's server is used); a
tier's server is checked as a slot's is, but makes no session's baseline."""

from __future__ import annotations

from pathlib import Path

import trio

from boxmaker.loopd.selftest import SelfTest, self_test, tier_words
from boxmaker.testing.fake_server import FakeLlamaServer

from ..helpers import make_config

SERVERS = """
[servers.small]
base_url = "http://small.local:8080"
[servers.eye]
base_url = "http://eye.local:8080"
"""


async def run_self_test(tmp_path: Path, n_ctx: int, small_ctx: int, tiers: str) -> SelfTest:
    """The self-test of a config whose `default` server (a fake of context `n_ctx`) holds the
    slot and whose `small` (a fake of `small_ctx`) is the tiers' server, over real sockets."""
    (tmp_path / "system.md").write_text("You are Boxmaker, in a test.\n")
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            default = await nursery.start(FakeLlamaServer(n_ctx=n_ctx).serve_tcp)
            small = await nursery.start(FakeLlamaServer(n_ctx=small_ctx, seed=1).serve_tcp)
            config = tmp_path / "config.toml"
            config.write_text(
                f'[server]\nbase_url = "http://127.0.0.1:{default}"\n'
                f'[servers.small]\nbase_url = "http://127.0.0.1:{small}"\n'
                f'[paths]\nhome = "{tmp_path}/home"\n{tiers}'
            )
            result = await self_test(config, {})
            nursery.cancel_scope.cancel()
    if result.lock is not None:
        result.lock.release()
    return result


def said(result: SelfTest) -> dict[str, str]:
    return {check.name: check.line() for check in result.checks}


async def test_the_self_test_says_each_tier_s_server_and_that_the_summary_tier_holds_an_epoch(
    tmp_path: Path,
) -> None:
    tiers = '[tiers]\nsummary = "small"\nvision = "small"\n'
    result = await run_self_test(tmp_path, 4096, 8192, tiers)
    lines = said(result)
    assert result.ok, lines
    assert lines["tier chat"] == (
        "ok   tier chat: unset: a new session takes any slot of [slots] (main on default), and "
        "keeps it, and its server, for life"
    )
    assert lines["tier summary"] == (
        "ok   tier summary: server small, no slot named (the server picks): its context (8,192 "
        "tokens) holds an epoch (up to 3,072 tokens at [context] epoch_at, and a 512-token "
        "summary)"
    )
    assert lines["tier vision"] == (
        "ok   tier vision: server small, no slot named (the server picks): an image goes "
        "there, a conversation of its own"
    )
    assert lines["llama-server small"].startswith("ok   llama-server small: http://127.0.0.1:")
    assert "model profile small" in lines
    assert "baseline budget small" not in lines  # no session's baseline is made there
    assert "baseline budget" in lines


async def test_a_summary_tier_too_small_for_an_epoch_is_said_and_not_a_failure(
    tmp_path: Path,
) -> None:
    result = await run_self_test(tmp_path, 4096, 2048, '[tiers]\nsummary = "small"\n')
    lines = said(result)
    assert result.ok, lines
    assert lines["tier summary"] == (
        "ok   tier summary: server small, no slot named (the server picks): its context (2,048 "
        "tokens) does not hold an epoch (up to 3,072 tokens at [context] epoch_at, and a "
        "512-token summary): the session's server is used for a summary that does not fit"
    )
    assert lines["tier vision"] == (
        "ok   tier vision: unset: an image goes to the session's own server, when it takes images"
    )


def test_the_tiers_words_for_each_case() -> None:
    config = make_config(SERVERS + '[slots]\nmain = 0\nother = "small:0"\n'
                         '[tiers]\nchat = "small"\nsummary = "default:1"\n')  # fmt: skip
    assert tier_words(config, "chat", {}) == (
        "server small: a new session takes one of its slots (other on small), and keeps it, "
        "and its server, for life"
    )
    assert tier_words(config, "summary", {}) == (
        "server default, its slot 1: it did not say its context, so the session's server is used"
    )
    assert tier_words(config, "summary", {"default": 8192}) == (
        "server default, its slot 1: its context is 8,192 tokens, but not every session's "
        "server said its own, so whether it holds an epoch is not known (the session's server "
        "is used for a summary that does not fit)"
    )
    assert "holds an epoch (up to 3,072" in tier_words(
        config, "summary", {"default": 8192, "small": 4096}
    )
    alone = make_config('[tiers]\nsummary = "default:1"\n')
    assert tier_words(alone, "summary", {"default": 4096}) == (
        "server default, its slot 1: every slot is on it, so each session makes its summaries "
        "on its slot"
    )
    assert tier_words(alone, "summary", {}).startswith("server default, its slot 1: it did not")
    assert tier_words(make_config(), "summary", {}) == (
        "unset: each session's own server makes its summaries, on its own slot"
    )
