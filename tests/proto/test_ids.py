"""Session ids and timestamps."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto import InvalidValue, SessionId, Timestamp

from ..strategies import ID_ALPHABET, session_ids, timestamps

REFUSED = {
    "empty": "",
    "129 characters": "a" * 129,
    "dot": ".",
    "dot dot": "..",
    "hidden": ".profile",
    "slash": "a/b",
    "backslash": "a\\b",
    "NUL": "a\x00b",
    "newline": "a\nb",
    "leading dash": "-rf",
    "space": "a b",
    "non-ASCII letter": "café",
    "colon": "a:b",
    "absolute": "/etc",
}


@pytest.mark.parametrize("value", list(REFUSED.values()), ids=list(REFUSED))
def test_session_id_refuses(value: str) -> None:
    with pytest.raises(InvalidValue):
        SessionId(value)


def test_session_id_messages_name_the_value_and_the_rule() -> None:
    with pytest.raises(InvalidValue, match=r"session id 'a/b' has a '/'; allowed: letters"):
        SessionId("a/b")
    with pytest.raises(InvalidValue, match="at most 128"):
        SessionId("a" * 129)
    with pytest.raises(InvalidValue, match="starts with '-'"):
        SessionId("-x")


@pytest.mark.parametrize("value", ["a", "A" * 128, "chat-20261129-a1b2", "x.y_z-1", "0", "a.."])
def test_session_id_accepts(value: str) -> None:
    assert str(SessionId(value)) == value


@given(st.text(ID_ALPHABET + "/\\\x00\n .:~é", max_size=140))
def test_no_accepted_id_joined_under_a_folder_resolves_outside_it(value: str) -> None:
    base = Path("/srv/home/sessions")
    try:
        session = SessionId(value)
    except InvalidValue:
        return
    joined = base / str(session)
    assert Path(os.path.normpath(joined)).parent == base
    assert joined.resolve().parent == base.resolve()


@given(session_ids)
def test_every_id_of_the_alphabet_not_starting_with_dot_or_dash_is_accepted(value: str) -> None:
    assert SessionId(value).value == value


def test_timestamp_format_has_microseconds_and_z() -> None:
    moment = datetime(2026, 11, 29, 21, 31, 34, 123456, tzinfo=UTC)
    assert str(Timestamp(moment)) == "2026-11-29T21:31:34.123456Z"
    assert str(Timestamp(moment.replace(microsecond=0))) == "2026-11-29T21:31:34.000000Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T21:31:34Z",
        "2026-11-29T21:31:34.123Z",
        "2026-11-29T21:31:34.123456+00:00",
        "2026-11-29T21:31:34.123456z",
        "2026-11-29 21:31:34.123456Z",
        "2026-02-30T21:31:34.123456Z",
        "2026-11-29T21:31:34.123456Z\n",
        "",
    ],
)
def test_timestamp_refuses_other_forms(text: str) -> None:
    with pytest.raises(InvalidValue):
        Timestamp.parse(text)


def test_timestamp_refuses_naive_and_non_utc_datetimes() -> None:
    with pytest.raises(InvalidValue):
        Timestamp(datetime(2026, 11, 29))
    with pytest.raises(InvalidValue):
        Timestamp(datetime(2026, 11, 29, tzinfo=timezone(timedelta(hours=1))))


@given(timestamps)
def test_timestamp_parse_and_format_are_inverse(moment: Timestamp) -> None:
    assert Timestamp.parse(str(moment)) == moment
