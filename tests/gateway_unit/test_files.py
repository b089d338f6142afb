"""Files and images the owner sends (`gatewayd.matrix.media`, `gatewayd.speakers`,
`gatewayd.sent_files`, `gatewayd.attaching.media_type_for`): an `mxc://` URI taken only
exactly as the spec draws it, and never able to step out of the download path; a caption told
apart from a file's name; every other part of the event a claim read only in its right shape;
a file larger than loopd takes refused before it is fetched."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.gatewayd.attaching import media_type_for
from boxmaker.gatewayd.matrix import batch_of, download_paths, mxc_parts
from boxmaker.gatewayd.port import Said, Sent, Unreadable
from boxmaker.gatewayd.sent_files import WAIT_MS, SentFile, taken_by
from boxmaker.gatewayd.speakers import Attach, Refuse, TellStranger, decide
from boxmaker.proto import FileOffer

ME, OWNER = "@bot:hs", "@o:hs"
URL = "mxc://hs/AbC_12-x"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20


@pytest.mark.parametrize(
    ("uri", "parts"),
    [
        ("mxc://localhost/kAtSDDEzJaMWQfgGfrsnURYE", ("localhost", "kAtSDDEzJaMWQfgGfrsnURYE")),
        ("mxc://matrix.example.org:8448/A_b-9", ("matrix.example.org:8448", "A_b-9")),
        ("mxc://10.0.0.1/x", ("10.0.0.1", "x")),
        ("mxc://[2001:db8::1]:65535/x", ("[2001:db8::1]:65535", "x")),
    ],
)
def test_an_mxc_uri_as_the_spec_draws_it(uri: str, parts: tuple[str, str]) -> None:
    assert mxc_parts(uri) == parts


@pytest.mark.parametrize(
    "uri",
    [
        "", "mxc://", "mxc://hs", "mxc://hs/", "mxc:///id", "mxc://hs/a/b", "mxc://hs//a",
        "mxc://../id", "mxc://./id", "mxc://.hs/id", "mxc://-hs/id", "mxc://hs/..",
        "mxc://hs/a.b", "mxc://hs/%2e%2e", "mxc://h s/id", "mxc://hs:/id", "mxc://hs:65536/id",
        "mxc://hs:123456/id", "mxc://::1/id", "mxc://[::1/id", "mxc://a@hs/id", "mxc://hs/id?x",
        "mxc://hs/id#x", "mxc://hs/id\n", "\nmxc://hs/id", " mxc://hs/id", "MXC://hs/id",
        "https://hs/id", "mxc://hós/id", "mxc://hs/ïd", "mxc://hs/" + "a" * 256,
        "mxc://" + "h" * 256 + "/id", "mxc://hs\\x/id", "mxc://hs/id/",
    ],
)  # fmt: skip
def test_anything_else_is_no_mxc_uri(uri: str) -> None:
    assert mxc_parts(uri) is None
    assert download_paths(uri) is None


@given(st.text(alphabet=st.sampled_from("mxc:/.[]%?#@-_a0 \n\\é"), max_size=30))
def test_no_uri_steps_out_of_the_download_path(tail: str) -> None:
    for uri in (tail, "mxc://" + tail, "mxc://hs/" + tail):
        paths = download_paths(uri)
        if paths is None:
            continue
        for path, base in zip(paths, ("client/v1/media", "media/v3"), strict=True):
            assert path.startswith(f"/_matrix/{base}/download/")
            server, media = path.removeprefix(f"/_matrix/{base}/download/").split("/")
            assert "/".join(map(unquote, (server, media))) == uri.removeprefix("mxc://")
            assert not {server, media} & {".", ".."}
            assert not set(path) & set("?#\\ \n")


def event(content: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "m.room.message", "sender": OWNER, "event_id": "$f", **more,
            "content": content}  # fmt: skip


def heard(*contents: dict[str, Any], **more: Any) -> tuple[Any, ...]:
    body = {
        "next_batch": "s2",
        "rooms": {"join": {"!r": {"timeline": {"events": [event(c, **more) for c in contents]}}}},
    }
    batch = batch_of(body, ME)
    assert batch is not None
    return batch.heard


def test_a_file_its_name_its_caption_and_its_claims() -> None:
    info = {"size": 1234, "mimetype": "text/markdown"}
    [plain] = heard({"msgtype": "m.file", "body": "notes.md", "url": URL, "info": info},
                    origin_server_ts=1_700_000_000_000)  # fmt: skip
    assert plain == Sent("!r", OWNER, "$f", URL, "notes.md", None, "text/markdown", 1234,
                         at=1_700_000_000_000)  # fmt: skip
    [same] = heard({"msgtype": "m.image", "body": "cat.png", "filename": "cat.png", "url": URL})
    assert (same.name, same.caption) == ("cat.png", None)  # type: ignore[union-attr]
    [captioned] = heard(
        {"msgtype": "m.image", "body": "What is this?", "filename": "IMG_1.jpg", "url": URL}
    )
    assert (captioned.name, captioned.caption) == ("IMG_1.jpg", "What is this?")  # type: ignore[union-attr]
    [blank] = heard({"msgtype": "m.image", "body": "  ", "filename": "a.png", "url": URL})
    assert (blank.name, blank.caption) == ("a.png", None)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "name", "media_type", "size"),
    [
        ({"body": "../../etc/passwd"}, "passwd", None, None),
        ({"body": "C:\\Users\\me\\a.txt"}, "a.txt", None, None),
        ({"body": "a\nb\x00c\u007f.txt"}, "a_b_c_.txt", None, None),
        ({"body": "/"}, "file", None, None),
        ({"body": 5}, "file", None, None),
        ({"body": "x" * 300}, "x" * 255, None, None),
        ({"body": "a", "info": {"size": "12", "mimetype": 7}}, "a", None, None),
        ({"body": "a", "info": {"size": True, "mimetype": ""}}, "a", None, None),
        ({"body": "a", "info": {"size": -1}}, "a", None, None),
        ({"body": "a", "info": "big"}, "a", None, None),
        ({"body": "a", "info": {"size": 0, "mimetype": "TEXT/Plain"}}, "a", "TEXT/Plain", 0),
    ],
)
def test_each_claim_is_read_only_in_its_shape(
    content: dict[str, Any], name: str, media_type: str | None, size: int | None
) -> None:
    [sent] = heard({"msgtype": "m.file", "url": URL, **content})
    assert isinstance(sent, Sent)
    assert (sent.name, sent.media_type, sent.size) == (name, media_type, size)
    FileOffer(sent.name, "text/plain", 0, "0" * 64)  # a name a FileOffer takes


def test_an_encrypted_file_or_one_without_an_mxc_address_is_unreadable() -> None:
    encrypted = {"msgtype": "m.image", "body": "x.png", "file": {"url": URL, "key": {}}}
    assert heard(encrypted) == (
        Unreadable("!r", OWNER, "$f", "an encrypted file, which it cannot decrypt"),
    )
    for url in (None, 5, "https://evil.example/x.png", "mxc://../x"):
        content = {"msgtype": "m.file", "body": "x", "url": url}
        assert heard(content) == (
            Unreadable("!r", OWNER, "$f", "a file whose address is not an mxc:// URI"),
        )
    edit = {"msgtype": "m.image", "body": "* new caption",
            "m.new_content": {"msgtype": "m.image", "body": "new caption", "url": URL},
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$old"}}  # fmt: skip
    assert heard(edit) == (Said("!r", OWNER, "$f", "new caption", edits="$old"),)


def act(sent: Sent, max_file_bytes: int = 1000) -> object:
    return decide(
        sent, frozenset({OWNER}), ME, questions=frozenset(), shared_rooms=False, max_bytes=20,
        max_file_bytes=max_file_bytes,
    )  # fmt: skip


def test_a_file_over_the_limit_is_refused_before_it_is_fetched() -> None:
    sent = Sent("!r", OWNER, "$f", URL, "big.pdf", size=1001)
    refused = act(sent)
    assert isinstance(refused, Refuse)
    assert "`big.pdf` is 1,001 bytes, over the 1,000" in refused.why
    assert "not fetched" in refused.why
    at_most = Sent("!r", OWNER, "$f", URL, "big.pdf", size=1000)
    assert act(at_most) == Attach("!r", "$f", at_most)
    unsaid = Sent("!r", OWNER, "$f", URL, "big.pdf")  # its download is bounded instead
    assert act(unsaid) == Attach("!r", "$f", unsaid)
    assert act(Sent("!r", "@eve:hs", "$f", URL, "x", size=10**12)) == TellStranger("!r")
    long = Sent("!r", OWNER, "$f", URL, "a.png", caption="é" * 11)
    refused = act(long)
    assert isinstance(refused, Refuse)
    assert "22 bytes, over the 20" in refused.why


def sent_file(event_id: str, at: int) -> SentFile:
    return SentFile(event_id, URL, FileOffer("a.txt", "text/plain", 1, "0" * 64), at)


def test_a_message_takes_the_files_that_waited_at_most_an_hour() -> None:
    old, edge, new, untimed = (
        sent_file("$1", 1_000), sent_file("$2", 2_000), sent_file("$3", 5_000),
        sent_file("$4", 0),
    )  # fmt: skip
    waiting = (old, edge, new, untimed)
    assert taken_by(waiting, 2_000 + WAIT_MS) == ((edge, new, untimed), (old,))
    assert taken_by(waiting, 0) == (waiting, ())
    assert taken_by((), 5) == ((), ())


@pytest.mark.parametrize(
    ("declared", "name", "data", "media_type"),
    [
        ("Image/JPEG; q=1", "a.jpg", b"", "image/jpeg"),
        ("text/plain; charset=latin-1", "a.txt", b"", "text/plain"),  # loopd checks UTF-8
        (None, "x", PNG, "image/png"),
        ("application/octet-stream", "notes.md", b"# hi", "text/markdown"),
        ("not a type", "notes", b"plain words", "text/plain"),
        ("image/", "x.gif", b"", "image/gif"),
        ("text/plain\n", "x", b"\x00\x01", "text/plain"),
    ],
)
def test_the_declared_type_in_lower_case_else_a_guess(
    declared: str | None, name: str, data: bytes, media_type: str
) -> None:
    assert media_type_for(declared, name, data) == media_type
