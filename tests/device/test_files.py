"""A PDF's text asked about on the real server (SPEC section 22): `bxctl chat --attach` with a
PDF made by a real PDF library, its text taken out by loopd's worker and given to SmolLM2
after the question. Reported, not asserted: what the model answered and whether it named the
figure the PDF holds. Asserted: the turn ends done, the `user` record names the file with its
text kept by hash, the request carried the PDF's words, and `bxctl verify` passes."""

from __future__ import annotations

import json
import subprocess

import pytest
from bxdev.processes import WAIT_S
from fpdf import FPDF

from ..processes import BIN
from .conftest import DeviceStack, figure

QUESTION = "How many euros is the budget in the attached report? Answer with the number."


def test_a_pdfs_text_is_asked_about_on_the_real_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("files")
    report = FPDF()
    report.set_font("helvetica", size=12)
    report.add_page()
    report.cell(text="Quarterly report. The budget is 4200 euros.")
    report.add_page()
    report.cell(text="The team met on Tuesday.")
    path = tmp_path_factory.mktemp("pdf") / "report.pdf"
    report.output(str(path))
    stack = DeviceStack(root)
    try:
        said = subprocess.run(
            [str(BIN / "bxctl"), "chat", "--session", "pdf1", "--attach", str(path),
             "--say", QUESTION],
            env=stack.env, capture_output=True, text=True, timeout=WAIT_S,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        log = stack.log("pdf1")
        [user] = [r for r in log if r["type"] == "user"]
        [file] = user["files"]
        assert (file["name"], file["media_type"]) == ("report.pdf", "application/pdf")
        kept = stack.home / "sessions" / "pdf1" / "files" / file["text"]
        assert "The budget is 4200 euros." in kept.read_text()
        assert "--- page 2 of 2 ---" in user["attached"]
        assert log[-1]["type"] == "turn_end"
        assert log[-1]["outcome"] == "done"
        verify = subprocess.run([str(BIN / "bxctl"), "verify", "pdf1"], env=stack.env,
                                capture_output=True, text=True, timeout=WAIT_S)  # fmt: skip
        assert verify.returncode == 0, verify.stdout
        answer = said.stdout.strip()
        usage = [r for r in log if r["type"] == "usage"][-1]
        figure(
            f"files: a PDF asked about: the answer {json.dumps(answer[:160])} "
            f"{'names' if '4200' in answer else 'does not name'} the budget (4200); "
            f"prompt {usage['prompt_n'] + usage['cache_n']} tokens"
        )
    finally:
        stack.stop()
