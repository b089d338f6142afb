"""`make bench`: its pure parts exactly, and one quick run of every row that needs no real
server (tiny sizes, so the code of each row runs; its figures mean nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bxdev.bench.report import BEGIN, END, Row, render, splice
from bxdev.bench.stats import growth_exponent, spread

REPO = Path(__file__).parents[1]  # bxdev/ runs from the checkout


def test_a_spread_is_the_median_with_the_least_and_the_most() -> None:
    figure = spread([3.0, 1.0, 2.0, 10.0])
    assert (figure.median, figure.low, figure.high, figure.n) == (2.5, 1.0, 10.0, 4)
    assert figure.show("ms", digits=1) == "2.5 ms (min 1.0, max 10.0, n=4)"
    with pytest.raises(ValueError, match="no measurements"):
        spread([])


@pytest.mark.parametrize(("power", "expected"), [(1.0, 1.0), (2.0, 2.0), (0.5, 0.5)])
def test_the_growth_exponent_of_a_power_law_is_its_power(power: float, expected: float) -> None:
    sizes = [100, 1_000, 10_000, 100_000]
    assert growth_exponent(sizes, [3e-6 * s**power for s in sizes]) == pytest.approx(expected)


ROW = Row("resume", "0.8 s", "≤ 1 s", met=True, details=("a line",))


def test_the_report_keeps_what_is_written_around_it() -> None:
    generated = render([ROW], machine_lines=["a machine"], command="make bench", when="today")
    document = f"# Benchmarks\n\nIntro.\n\n{BEGIN}\nold figures\n{END}\n\n## History\n\nKept.\n"
    spliced = splice(document, generated)
    assert spliced.startswith("# Benchmarks\n\nIntro.\n\n" + BEGIN)
    assert spliced.endswith(END + "\n\n## History\n\nKept.\n")
    assert "old figures" not in spliced
    assert "| resume | 0.8 s | ≤ 1 s | yes |" in spliced
    assert splice(spliced, generated) == spliced  # a second run changes nothing else
    assert splice("# Benchmarks\n", generated) == "# Benchmarks\n\n" + generated


def test_a_missed_bar_is_marked() -> None:
    missed = Row("resume", "1.3 s", "≤ 1 s", met=False)
    generated = render([missed], machine_lines=[], command="make bench", when="today")
    assert "| resume | 1.3 s | ≤ 1 s | **no** |" in generated


def test_a_quick_run_of_every_row_writes_the_document(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nWritten by hand.\n")
    result = subprocess.run(
        [sys.executable, "-m", "bxdev.bench", "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = out.read_text()
    assert document.startswith("# Benchmarks\n\nWritten by hand.\n")
    for figure in ("loop overhead", "event throughput", "resume", "request building",
                   "concurrency", "session listing", "epoch switch",
                   "resume of epochs"):  # fmt: skip
        assert f"\n| {figure} | " in document
        assert f"\n### {figure}\n" in document
        assert f"{figure}: " in result.stdout
    assert "8/8 finished, FIFO, `queued.ahead` exact" in document


def test_an_unknown_row_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bxdev.bench", "speed"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2
    assert "no row speed; the rows are overhead, throughput" in result.stderr
