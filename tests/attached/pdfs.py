"""PDFs the tests make: with fpdf2 (a real PDF library, for text, encryption and drawings), and
by hand for the few a library will not write (a page whose content is a great many operators,
to take a reader past its limits)."""

from __future__ import annotations

import zlib

from fpdf import FPDF
from fpdf.enums import EncryptionMethod

__all__ = ["cpu_heavy", "drawn", "encrypted", "inflating", "memory_bomb", "raw_pdf", "written"]


def written(texts: list[str]) -> bytes:
    """A PDF with a page for each of `texts`, in Helvetica."""
    pdf = _pages(texts)
    return bytes(pdf.output())


def encrypted(text: str, *, user_password: str | None) -> bytes:
    """A one-page PDF encrypted with AES-256: opened only with `user_password`, or by anyone
    when it is None (only the owner's permissions are protected)."""
    pdf = _pages([text])
    pdf.set_encryption(
        owner_password="owner", user_password=user_password or "",
        encryption_method=EncryptionMethod.AES_256,
    )  # fmt: skip
    return bytes(pdf.output())


def drawn(pages: int) -> bytes:
    """A PDF of `pages` pages with a filled rectangle on each and no text: a scan, as a reader
    of text sees one."""
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 100, 100, style="F")
    return bytes(pdf.output())


def _pages(texts: list[str]) -> FPDF:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in texts:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return pdf


def memory_bomb() -> bytes:
    """One page whose 4 KB content stream inflates to 900,000 text operators: a reader holds
    each as objects, some 330 MB in all (measured with pypdf 7.1.1), whatever the machine's
    speed; under pypdf's own budget of 2,000,000 parsed elements a stream."""
    return raw_pdf([b"BT /F1 12 Tf 72 700 Td\n" + b"(a) Tj\n" * 900_000 + b"ET\n"])


def inflating() -> bytes:
    """One page whose 78 KB content stream inflates to 80 MB, past pypdf's own bound on a
    stream (75 MB)."""
    return raw_pdf([b"BT /F1 12 Tf 72 700 Td (x) Tj ET\n" + b" " * 80_000_000])


def cpu_heavy() -> bytes:
    """40 pages sharing one content stream of 300,000 text operators: about 3.5 s of CPU a
    page here (140 s in all), never more than one page's objects (some 120 MB) held at once."""
    return raw_pdf([b"BT /F1 12 Tf 72 700 Td\n" + b"(a) Tj\n" * 300_000 + b"ET\n"] * 40)


def raw_pdf(contents: list[bytes]) -> bytes:
    """A PDF with a page for each content stream of `contents` (Flate-compressed; a stream
    repeated is written once and shared), in Helvetica, with a correct cross-reference table."""
    objects: list[bytes] = [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    streams: dict[bytes, int] = {}
    kids = []
    for content in contents:
        if content not in streams:
            packed = zlib.compress(content, 9)
            objects.append(
                b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream"
                % (len(packed), packed)
            )
            streams[content] = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % streams[content]
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref,
    )  # fmt: skip
    return bytes(out)
