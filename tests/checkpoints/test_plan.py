"""The plan of an undo, decided from manifests alone: only what the session's calls touched,
removals children first and creations parents first, conflicts for what others changed or
what cannot be done whole, and a token that names exactly what it was made from."""

from __future__ import annotations

from boxmaker.brokerd.checkpoints import Entry, Manifest, Step, plan_restore

A = "a" * 64
B = "b" * 64
DIR = Entry("dir", 0o755)


def file(sha: str = A, mode: int = 0o644) -> Entry:
    return Entry("file", mode, size=1, sha256=sha)


def test_removals_go_children_first_and_creations_parents_first() -> None:
    start: Manifest = {"d": DIR, "d/e": DIR, "d/e/f": file(), "x": file()}
    made: Manifest = {"n": DIR, "n/m": DIR, "n/m/f": file(), "x": Entry("link", 0o777, target="y")}
    plan = plan_restore(start, [Step(start, made, ours=True)], made)
    assert [(a.verb, a.path) for a in plan.actions] == [
        ("remove", "n/m/f"), ("remove", "n/m"), ("remove", "n"),
        ("mkdir", "d"), ("mkdir", "d/e"), ("write", "d/e/f"), ("write", "x"),
    ]  # fmt: skip
    assert plan.conflicts == ()


def test_a_mode_or_owner_change_alone_is_a_chmod_or_chown() -> None:
    start: Manifest = {"d": DIR, "d/f": file()}
    after: Manifest = {"d": Entry("dir", 0o700, uid=5), "d/f": file(mode=0o600)}
    plan = plan_restore(start, [Step(start, after, ours=True)], after)
    assert [(a.verb, a.path) for a in plan.actions] == [
        ("chmod", "d/f"), ("chmod", "d"), ("chown", "d"),
    ]  # fmt: skip


def test_what_the_session_never_touched_is_never_in_the_plan() -> None:
    start: Manifest = {"ours": file(), "theirs": file()}
    after: Manifest = {"ours": file(B), "theirs": file()}
    now: Manifest = {"ours": file(B), "owner's": file(), "theirs": file(B)}
    plan = plan_restore(start, [Step(start, after, ours=True)], now)
    assert [(a.verb, a.path) for a in plan.actions] == [("write", "ours")]
    assert plan.conflicts == ()


def test_what_others_changed_since_is_a_conflict_in_words() -> None:
    start: Manifest = {"a": file(), "b": file(), "c": file()}
    ours: Manifest = {}
    theirs: Manifest = {"a": file(B)}  # another session made "a" again
    now: Manifest = {"a": file(B), "c": file(B)}  # and the owner made "c" after
    steps = [Step(start, ours, ours=True), Step(ours, theirs, ours=False)]
    plan = plan_restore(start, steps, now)
    assert [(c.path, c.reason) for c in plan.conflicts] == [
        ("a", "made since by someone else"), ("c", "made since by someone else"),
    ]  # fmt: skip
    assert [(a.verb, a.path) for a in plan.actions] == [("write", "b")]
    assert plan.stops
    forced = plan_restore(start, steps, now, force=True)
    assert not forced.stops
    assert [(a.verb, a.path) for a in forced.actions] == [("write", "a"), ("write", "b"),
                                                          ("write", "c")]  # fmt: skip


def test_a_file_whose_folder_is_gone_is_left_out() -> None:
    start: Manifest = {"d": DIR, "d/f": file()}
    after: Manifest = {"d": DIR}
    plan = plan_restore(start, [Step(start, after, ours=True)], {})  # the owner removed d
    assert [(c.path, c.reason) for c in plan.conflicts] == [("d/f", "its folder d is gone")]
    assert plan.actions == ()
    link = {"d": Entry("link", 0o777, target="/elsewhere")}
    plan = plan_restore(start, [Step(start, after, ours=True)], link, force=True)
    assert [(c.path, c.reason) for c in plan.conflicts] == [("d/f", "its folder d is a link now")]


def test_a_folder_that_was_a_fifo_is_not_made_again() -> None:
    start: Manifest = {"p": Entry("other", 0o644)}
    plan = plan_restore(start, [Step(start, {}, ours=True)], {})
    assert [c.path for c in plan.conflicts] == ["p"]
    assert plan.actions == ()


def test_the_token_names_what_the_plan_was_made_from() -> None:
    start: Manifest = {"a": file()}
    after: Manifest = {"a": file(B)}
    steps = [Step(start, after, ours=True)]
    token = plan_restore(start, steps, after).token
    assert plan_restore(dict(start), list(steps), dict(after)).token == token
    assert plan_restore(start, steps, {**after, "x": file()}).token != token  # the root moved on
    assert plan_restore(start, steps, after, force=True).token != token


def test_nothing_to_do_when_no_call_was_ours() -> None:
    start: Manifest = {"a": file()}
    plan = plan_restore(start, [Step(start, {}, ours=False)], {})
    assert (plan.actions, plan.conflicts) == ((), ())
