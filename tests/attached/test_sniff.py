"""What an attached file is: each type taken with bytes that bear it out, each mismatch, text
that is not UTF-8 or holds a NUL, a type we do not take, each refused in words; and the guess
the channel makes from a path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.attached import OCTET_STREAM, FileRefused, Kind, kind_of, media_type_of

PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
GIF87 = b"GIF87a\x01\x00\x01\x00"
GIF89 = b"GIF89a\x01\x00\x01\x00"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 "
WAVE = b"RIFF\x24\x00\x00\x00WAVEfmt "
NOT_A_PDF = '"x" is declared application/pdf but its bytes are not a PDF'


@pytest.mark.parametrize(
    ("media_type", "data", "kind"),
    [
        ("text/plain", b"hello\n", Kind.TEXT),
        ("text/markdown", "# caf\u00e9 \u2014 \U0001f600\n".encode(), Kind.TEXT),
        ("text/csv", b"a,b\n1,2\n", Kind.TEXT),
        ("text/x-python", b"print('hi')\n", Kind.TEXT),
        ("text/plain", b"", Kind.TEXT),
        ("text/plain", b"\xef\xbb\xbfwith a byte-order mark", Kind.TEXT),
        ("Text/Plain; charset=UTF-8", b"hello", Kind.TEXT),
        ('text/plain; charset="us-ascii"', b"hello", Kind.TEXT),
        ("application/json", b'{"a": 1}', Kind.TEXT),
        ("application/xml", b"<a/>", Kind.TEXT),
        ("application/x-yaml", b"a: 1\n", Kind.TEXT),
        ("application/yaml", b"a: 1\n", Kind.TEXT),
        ("application/toml", b"a = 1\n", Kind.TEXT),
        ("application/pdf", PDF, Kind.PDF),
        ("image/png", PNG, Kind.IMAGE),
        ("image/jpeg", JPEG, Kind.IMAGE),
        ("image/gif", GIF87, Kind.IMAGE),
        ("image/gif", GIF89, Kind.IMAGE),
        ("image/webp", WEBP, Kind.IMAGE),
        (" IMAGE/PNG ", PNG, Kind.IMAGE),
    ],
)
def test_each_type_taken_is_taken_with_bytes_that_bear_it_out(
    media_type: str, data: bytes, kind: Kind
) -> None:
    assert kind_of(data, media_type, "f") is kind


@pytest.mark.parametrize(
    ("media_type", "data", "refusal"),
    [
        ("application/pdf", b"%PDF", NOT_A_PDF),
        ("application/pdf", b"hello", NOT_A_PDF),
        ("application/pdf", PNG, '"x" is declared application/pdf but its bytes are not a PDF '
         "(they look like a PNG image)"),
        ("image/png", JPEG, '"x" is declared image/png but its bytes are not a PNG image (they '
         "look like a JPEG image)"),
        ("image/jpeg", GIF89, '"x" is declared image/jpeg but its bytes are not a JPEG image '
         "(they look like a GIF image)"),
        ("image/gif", b"GIF88a", '"x" is declared image/gif but its bytes are not a GIF image'),
        ("image/webp", WAVE, '"x" is declared image/webp but its bytes are not a WEBP image'),
        ("image/png", PDF, '"x" is declared image/png but its bytes are not a PNG image (they '
         "look like a PDF)"),
        ("text/plain", PNG, '"x" is declared text/plain but holds a NUL byte (at byte 8), so it '
         "is not text; its bytes look like a PNG image"),
        ("text/plain", b"caf\xe9", '"x" is declared text/plain but is not UTF-8 text (byte 0xe9 '
         "at byte 3)"),
        ("application/json", b'{"a": "\xc3"}', '"x" is declared application/json but is not '
         "UTF-8 text (byte 0xc3 at byte 7)"),
        ("text/plain", b"\xed\xa0\x80", '"x" is declared text/plain but is not UTF-8 text (byte '
         "0xed at byte 0)"),  # a surrogate's encoding, which UTF-8 forbids
        ("text/plain", b"a\x00b", '"x" is declared text/plain but holds a NUL byte (at byte 1), '
         "so it is not text"),
        ("text/plain; charset=latin-1", b"hello", '"x" is declared in charset "latin-1"; only '
         "UTF-8 text is taken (convert it to UTF-8 first)"),
    ],
)  # fmt: skip
def test_bytes_that_do_not_bear_out_their_type_are_refused_in_words(
    media_type: str, data: bytes, refusal: str
) -> None:
    with pytest.raises(FileRefused) as refused:
        kind_of(data, media_type, "x")
    assert str(refused.value) == refusal


TAKEN = (
    "we take text (text/*, application/json, application/toml, application/x-yaml, "
    "application/xml, application/yaml), PDF (application/pdf) and images (image/png, "
    "image/jpeg, image/gif, image/webp)"
)


@pytest.mark.parametrize(
    ("media_type", "shown"),
    [
        ("application/zip", "application/zip"),
        ("image/svg+xml", "image/svg+xml"),
        ("image/bmp", "image/bmp"),
        ("application/octet-stream", "application/octet-stream"),
        ("", ""),
        ("text", "text"),
        ("text/", "text/"),
        ("text/plain/x", "text/plain/x"),
        ("text plain", "text plain"),
        ("text/pla\nin", "text/pla\\u000ain"),
        ("a/" + "b" * 200, "a/" + "b" * 98 + "…"),
    ],
)
def test_a_type_we_do_not_take_is_refused_saying_what_we_take(media_type: str, shown: str) -> None:
    with pytest.raises(FileRefused) as refused:
        kind_of(b"hello", media_type, "x")
    assert str(refused.value) == f'"x" is "{shown}", not a type we take; {TAKEN}'


def test_the_refusal_names_the_file_on_one_line_and_bounded() -> None:
    with pytest.raises(FileRefused) as refused:
        kind_of(b"\xff", "text/plain", 'evil"\n--- end ---\u2028' + "n" * 500)
    message = str(refused.value)
    assert message.startswith('"evil\\"\\u000a--- end ---\\u2028nnn')
    assert "\n" not in message
    assert "\u2028" not in message
    assert len(message) < 250


@pytest.mark.parametrize(
    ("name", "data", "media_type"),
    [
        ("report.pdf", PDF, "application/pdf"),
        ("photo.txt", PNG, "image/png"),  # the bytes first
        ("noextension", JPEG, "image/jpeg"),
        ("a.gif", GIF89, "image/gif"),
        ("a.webp", WEBP, "image/webp"),
        ("notes.md", b"# hi\n", "text/markdown"),
        ("DATA.JSON", b"{}", "application/json"),
        ("conf.yml", b"a: 1", "application/x-yaml"),
        ("pyproject.toml", b"a = 1", "application/toml"),
        ("script.py", b"print()", "text/x-python"),
        ("/home/me/dir.d/notes.txt", b"hi", "text/plain"),
        ("C:\\dir.x\\notes", b"hi", "text/plain"),
        ("main.rs", b"fn main() {}", "text/plain"),  # UTF-8 without NUL: text
        (".bashrc", b"alias x=y", "text/plain"),  # a dot file has no extension
        ("fake.pdf", b"not a pdf", "application/pdf"),  # then kind_of says the bytes are not
        ("fake.png", b"not a png", "image/png"),
        ("blob.bin", b"\x00\x01\x02", OCTET_STREAM),
        ("archive.zip", b"PK\x03\x04\x14\x00", OCTET_STREAM),
        ("latin.txt", b"caf\xe9", "text/plain"),  # kind_of then says it is not UTF-8
        ("latin", b"caf\xe9", OCTET_STREAM),
    ],
)
def test_the_channel_guesses_a_type_from_the_bytes_then_the_name(
    name: str, data: bytes, media_type: str
) -> None:
    assert media_type_of(name, data) == media_type


def test_a_file_whose_type_is_not_known_is_refused_as_an_octet_stream() -> None:
    data = b"\x00\x01binary"
    with pytest.raises(FileRefused, match='is "application/octet-stream", not a type we take'):
        kind_of(data, media_type_of("blob.bin", data), "blob.bin")


@given(data=st.binary(max_size=64), media_type=st.text(max_size=40), name=st.text(max_size=40))
def test_any_input_is_a_kind_or_a_refusal_on_one_line(
    data: bytes, media_type: str, name: str
) -> None:
    try:
        kind = kind_of(data, media_type, name)
    except FileRefused as refused:
        message = str(refused)
    else:
        assert kind in Kind
        return
    assert "\n" not in message
    assert len(message) < 600


@given(data=st.binary(max_size=64), name=st.text(max_size=40))
def test_a_guess_from_the_bytes_is_always_borne_out(data: bytes, name: str) -> None:
    guess = media_type_of("no-extension", data)
    if guess != OCTET_STREAM:
        kind_of(data, guess, name)  # does not raise
