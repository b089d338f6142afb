"""A cell's digest without a sandbox (`brokerd/sandbox/digest.py`): its outputs numbered, its
last value, its error, a long value kept as a stub naming its call, what a cell printed kept
within bounds; and the interpreter's own side of `values` (`cell_kernel.py`), bounded, each
value it does not hold said why."""

from __future__ import annotations

import pytest

from boxmaker.brokerd.sandbox import cell_kernel
from boxmaker.brokerd.sandbox.cell_kernel import NoValue, Values
from boxmaker.brokerd.sandbox.digest import (
    MOST_SH_LAST,
    Kept,
    Outputs,
    budget_of,
    digest,
    sh_last,
)
from boxmaker.config import SandboxConfig

CELL = "3@5f0c1a"


def printed(*outputs: bytes, keep: int = 1000, most: int = 100) -> Outputs:
    """What a cell printed, as the interpreter cuts it: each of `outputs` ended by a cut."""
    said = Outputs(keep=keep, most=most)
    for output in outputs:
        for byte in range(0, len(output), 7):  # in pieces, as a pipe gives them
            said.add(output[byte : byte + 7])
        said.cut()
    return said


def test_each_statements_output_is_numbered_then_the_last_value() -> None:
    outputs = printed(b"hi\n", b"", b"0\n1\n2\n", b"no newline")
    said = digest(outputs, {"value": "42", "type": "int"}, cell=CELL, budget=100, keeping=True)
    assert said.text == "[1] hi\n[2] 0\n1\n2\n[3] no newline\nLast value: 42"
    assert said.kept == ()
    none = digest(printed(), {}, cell=CELL, budget=100, keeping=True)
    assert none.text == ""  # the kernel says "(no output)" or that it is new


def test_an_error_digest_follows_the_outputs_before_it() -> None:
    trace = 'Traceback (most recent call last):\n  File "<cell 3>", line 2\nZeroDivisionError\n'
    said = digest(printed(b"before\n"), {"error": trace}, cell=CELL, budget=100, keeping=True)
    assert said.text == "[1] before\nError:\n" + trace.rstrip("\n")


def test_a_value_over_the_budget_is_kept_and_shown_as_a_stub_naming_its_call() -> None:
    long = b"".join(b"line %d\n" % n for n in range(100))
    value = "'" + "z" * 300 + "'"
    end = {"value": value, "type": "str"}
    said = digest(printed(b"short\n", long), end, cell=CELL, budget=200, keeping=True)
    assert said.kept == (Kept(CELL, 2, long.decode()), Kept(CELL, "last", value))
    first, second, last = said.text.split("\n[", 2)[0], *said.text.split("\n[", 2)[1:]
    assert first == "[1] short"
    assert second.startswith(
        '2] (790 bytes, over the digest\'s 200: kept; values.get("3@5f0c1a", 2) returns it '
        "whole in a later cell.) It begins:\nline 0\nline 1\n"
    )
    assert "line 9\n" not in second  # a beginning of a quarter of the budget, whole lines
    assert last.startswith("...]\nLast value: (a str; 302 bytes, over the digest's 200: kept; ")
    assert 'values.get("3@5f0c1a", "last") returns it whole' in last
    whole = digest(printed(b"short\n", long), end, cell=CELL, budget=200, keeping=False)
    assert whole.kept == ()  # the interpreter is gone: nothing to name, all of it shown
    assert whole.text == f"[1] short\n[2] {long.decode()}Last value: {value}"


def test_the_budget_is_in_bytes_at_the_projects_estimate_of_tokens() -> None:
    assert budget_of(300) == 1000  # 0.3 tokens a byte, as the epochs estimate
    assert budget_of(SandboxConfig().digest_value_tokens) == 6666
    wide = "é" * 60  # 120 bytes
    said = digest(printed(), {"value": wide}, cell=CELL, budget=100, keeping=True)
    assert said.kept == (Kept(CELL, "last", wide),)


def test_what_a_cell_printed_is_kept_at_its_start_and_end_each_output_numbered() -> None:
    outputs = printed(b"a" * 30, b"b" * 100, b"c" * 50, b"d" * 100, b"e" * 30, keep=100)
    numbered = dict(outputs.texts())
    assert list(numbered) == [1, 2, 4, 5]  # the third wholly in what was not kept
    assert numbered[1] == "a" * 30
    assert numbered[2] == "b" * 70 + "\n[... 30 bytes of this output not kept ...]\n"
    assert numbered[4] == "\n[... 30 bytes of this output not kept ...]\n" + "d" * 70
    assert numbered[5] == "e" * 30
    said = digest(outputs, {}, cell=CELL, budget=1000, keeping=True).text
    assert "\n[... outputs 3 to 3 not kept ...]\n[4] \n[... 30 bytes" in said
    assert len(outputs.head) + len(outputs.tail) == 200
    assert outputs.total == 310


def test_past_the_most_outputs_the_last_holds_the_rest() -> None:
    outputs = printed(*[b"%d\n" % n for n in range(10)], most=4)
    assert outputs.texts() == [(1, "0\n"), (2, "1\n"), (3, "2\n"), (4, "3\n4\n5\n6\n7\n8\n9\n")]
    said = digest(outputs, {}, cell=CELL, budget=1000, keeping=True).text
    assert said.endswith("(Only 4 are numbered: the last holds what followed.)")


def test_sh_last_is_the_output_and_exit_bounded_at_its_start_and_end() -> None:
    assert sh_last("out\n", 0) == {"stdout": "out\n", "stderr": "", "exit": 0}
    assert sh_last("", None)["exit"] is None  # stopped: no exit code
    long = "a" * MOST_SH_LAST + "b" * 1000
    bound = sh_last(long, 1)["stdout"]
    assert len(bound) < MOST_SH_LAST + 100
    assert bound.startswith("a" * 1000)
    assert bound.endswith("b" * 1000)
    assert "[... 1,000 characters not kept ...]" in bound


def test_values_holds_at_most_its_characters_the_oldest_dropped_and_said() -> None:
    values = Values()
    values.take({"cell": f"1@{CELL.split('@')[1]}", "most": 25})
    for n in range(1, 4):
        values.keep(f"{n}@5f0c1a", 1, str(n) * 10)
    assert values.get("3@5f0c1a", 1) == "3" * 10
    assert values.get("2@5f0c1a", 1) == "2" * 10
    with pytest.raises(NoValue, match="dropped: values holds at most 25 characters"):
        values.get("1@5f0c1a", 1)
    values.keep("4@5f0c1a", "last", "x" * 30)  # alone over the most: not held either
    with pytest.raises(NoValue, match="dropped"):
        values.get("4@5f0c1a", "last")
    assert "0 kept, 0 of 25 characters" in repr(values)


@pytest.mark.parametrize(
    ("cell", "index", "said"),
    [
        ("1@000000", 1, "gone: the interpreter that kept it has ended"),
        ("1@5f0c1a", 2, "no such value: only an output or a last value too long"),
        ("3", 1, "not a cell's name"),
        (3, 1, "not a cell's name"),
    ],
)
def test_a_value_not_held_is_said_why(cell: object, index: object, said: str) -> None:
    values = Values()
    values.take({"cell": "1@5f0c1a", "most": 100, "keep": [["1@5f0c1a", 1, "kept"]]})
    assert values.get("1@5f0c1a", 1) == "kept"
    with pytest.raises(NoValue, match=said):
        values.get(cell, index)  # type: ignore[arg-type]


def test_dropped_values_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cell_kernel, "MOST_DROPPED", 2)
    values = Values()
    values.take({"cell": "1@5f0c1a", "most": 1})
    for n in range(1, 5):
        values.keep(f"{n}@5f0c1a", 1, "xx")
    assert len(values._dropped) == 2
    with pytest.raises(NoValue, match="dropped"):
        values.get("4@5f0c1a", 1)
    with pytest.raises(NoValue, match="no such value"):
        values.get("1@5f0c1a", 1)  # forgotten: said as a value never kept
