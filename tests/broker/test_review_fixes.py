"""Defects a review found, each held by a test: a pattern that would expand to gigabytes when
compiled, an edit whose result is known to be too big before it is built, a path that could
write escapes into the owner's question, an answer too long for one frame, and a relative
path into a root inside the workspace."""

from __future__ import annotations

from pathlib import PurePosixPath

from boxmaker import proto as p
from boxmaker.brokerd.files.file_tools import FileLimits, run_file_tool
from boxmaker.brokerd.files.roots import Located, Root, locate
from boxmaker.channel import MAX_FRAME
from boxmaker.channel import fitted as _fitted

WS = Root("workspace", PurePosixPath("/h/ws"), True, True, p.DataClass.PRIVATE)


def test_a_pattern_whose_repeats_would_expand_to_gigabytes_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = Root("workspace", PurePosixPath(tmp_path), True, True, p.DataClass.PRIVATE)
    for pattern in ("(?:a{65535}){65535}", "x{20001}", "a" * 1001):
        answer = run_file_tool("search_files", {"pattern": pattern}, Located(root, ()))
        assert isinstance(answer, p.FailedResponse), pattern


def test_an_edit_known_to_be_too_big_is_refused_before_it_is_built(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.txt").write_text("a" * 1000)
    root = Root("workspace", PurePosixPath(tmp_path), True, True, p.DataClass.PRIVATE)
    arguments = {"path": "a.txt", "old": "a", "new": "b" * 100, "replace_all": True}
    answer = run_file_tool("edit_file", arguments, Located(root, ("a.txt",)),
                           FileLimits(write_bytes=10_000))  # fmt: skip
    assert isinstance(answer, p.FailedResponse)
    assert answer.message.startswith("the result is 100000 bytes, over the 10000 bytes")
    assert (tmp_path / "a.txt").read_text() == "a" * 1000


def test_a_result_too_long_for_a_frame_is_cut_to_fit_never_dropped() -> None:
    big = p.ResultResponse('"\\' * 600_000, p.DataClass.PRIVATE, True, False)
    fitted = _fitted(p.ResponseFrame(big))
    assert len(p.dumps(fitted)) < MAX_FRAME
    assert isinstance(fitted, p.ResponseFrame)
    assert isinstance(fitted.response, p.ResultResponse)
    assert fitted.response.truncated
    assert big.content.startswith(fitted.response.content)


def test_a_relative_path_into_a_root_inside_the_workspace_gets_that_roots_rules() -> None:
    vault = Root("vault", PurePosixPath("/h/ws/vault"), False, False, p.DataClass.SECRET)
    for path in ("vault/key", "/h/ws/vault/key"):
        located = locate(path, WS, [vault])
        assert isinstance(located, Located)
        assert (located.root.name, located.parts) == ("vault", ("key",))
    assert locate("notes.md", WS, [vault]) == Located(WS, ("notes.md",))
