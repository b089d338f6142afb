"""An answer's Markdown as a Matrix `formatted_body` (`gatewayd/markdown.py`): the formatting
kept, and nothing a reader's client would run or fetch. Two walls: markdown-it writes raw HTML
as text, and the sanitizer removes what markdown-it does make (a Markdown image, a link to a
scheme Matrix does not permit). Each security test also gives the sanitizer its hostile HTML
directly, so it fails without the sanitizer; the script and handler tests also check the text
comes out escaped, so they fail without the first wall."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.gatewayd.markdown import TAGS, URL_SCHEMES, sanitize, to_html

from ..test_layering import io_imports

HANDLER = re.compile(r"\son\w+\s*=", re.IGNORECASE)


class StartTags(HTMLParser):
    """Each start tag of a piece of HTML as the browser reads it: name, text, attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, self.get_starttag_text() or "", attrs))


def dangers(html: str) -> list[str]:
    """The tags of `html` a browser would run or fetch something for: one outside the Matrix
    list (`script`, `img`...), an event handler (`onerror=`), a `javascript:` value, a link
    with a scheme other than http, https or mailto. Text is not looked at: there `<` is
    `&lt;`, and an `onclick=` or `javascript:` the model wrote is harmless words."""
    parser = StartTags()
    parser.feed(html)
    parser.close()
    found = []
    for tag, text, attrs in parser.found:
        values = {name: re.sub(r"\s", "", value or "").lower() for name, value in attrs}
        if (
            tag not in TAGS
            or HANDLER.search(text)
            or any(name.startswith("on") for name in values)
            or any("javascript:" in value for value in values.values())
            or ("href" in values and urlsplit(values["href"]).scheme not in URL_SCHEMES)
        ):
            found.append(text)
    return found


def test_the_check_sees_each_danger() -> None:
    assert dangers('<p>onclick=x javascript: &lt;script&gt;</p><a href="https://x.org">a</a>') == []
    hostile = ["<img src=x>", '<b onclick="x()">', "<i\nonerror=x>", '<a href=" JavaScript:x">',
               '<a href="data:text/html,x">', '<a href="/x">', "<script>"]  # fmt: skip
    assert dangers("".join(hostile)) == hostile


def test_a_heading() -> None:
    assert to_html("# Title") == "<h1>Title</h1>"
    assert to_html("Title\n===\n\n### Part") == "<h1>Title</h1>\n<h3>Part</h3>"


def test_lists() -> None:
    assert to_html("- a\n- **b**") == "<ul>\n<li>a</li>\n<li><strong>b</strong></li>\n</ul>"
    assert to_html("3. c\n4. d") == '<ol start="3">\n<li>c</li>\n<li>d</li>\n</ol>'


def test_a_code_block_keeps_its_language() -> None:
    fence = "```python\nif a < b:\n    pass\n```"
    assert to_html(fence) == (
        '<pre><code class="language-python">if a &lt; b:\n    pass\n</code></pre>'
    )
    assert to_html('```"><b x=y\nz\n```') == "<pre><code>z\n</code></pre>"  # no language
    assert sanitize('<code class="language-py x">z</code>') == "<code>z</code>"
    assert sanitize('<p class="language-py">z</p>') == "<p>z</p>"


def test_a_table() -> None:
    assert to_html("| a | b |\n|:--|--:|\n| 1 | `2` |") == (
        "<table>\n<thead>\n<tr>\n<th>a</th>\n<th>b</th>\n</tr>\n</thead>\n"
        "<tbody>\n<tr>\n<td>1</td>\n<td><code>2</code></td>\n</tr>\n</tbody>\n</table>"
    )  # the alignment is a `style`: dropped


def test_the_rest_of_the_formatting() -> None:
    assert to_html("~~no~~ *yes*") == "<p><s>no</s> <em>yes</em></p>"
    assert to_html("> said\n\n---") == "<blockquote>\n<p>said</p>\n</blockquote>\n<hr>"
    assert to_html("[docs](https://example.org/a?b=1&c=2)") == (
        '<p><a href="https://example.org/a?b=1&amp;c=2">docs</a></p>'
    )
    assert to_html("<mailto:me@example.org>") == (
        '<p><a href="mailto:me@example.org">mailto:me@example.org</a></p>'
    )


@pytest.mark.parametrize(
    "text", ["Hi.", "a & b < c > d \"e\" 'f'", "two\nlines", " x \n", "", " \n"]
)
def test_plain_text_gives_none(text: str) -> None:
    assert to_html(text) is None


def test_formatting_in_one_paragraph_is_html() -> None:
    assert to_html("**bold**") == "<p><strong>bold</strong></p>"
    assert to_html("a &amp; b") == "<p>a &amp; b</p>"  # the body shows `&amp;`, the HTML `&`


def test_a_script_is_never_a_tag() -> None:
    html = to_html("**hi** <script>alert(1)</script>")
    assert html == "<p><strong>hi</strong> &lt;script&gt;alert(1)&lt;/script&gt;</p>"  # text
    assert to_html("<script>alert(1)</script>") is None  # only text: the body alone
    assert sanitize("<p>hi<script>alert(1)</script><style>p{}</style></p>") == "<p>hi</p>"


def test_an_event_handler_is_never_an_attribute() -> None:
    html = to_html("**hi** <img src=x onerror=alert(1)>") or ""
    assert html == "<p><strong>hi</strong> &lt;img src=x onerror=alert(1)&gt;</p>"  # text
    assert "<img" not in html
    assert dangers(html) == []
    html = sanitize('<p><img src=x onerror=alert(1)><b onclick="alert(1)">b</b></p>')
    assert html == "<p><b>b</b></p>"
    assert "onerror" not in html
    assert "onclick" not in html


def test_a_markdown_image_is_dropped() -> None:
    html = to_html("see ![x](http://evil/x.png) here") or ""
    assert html == "<p>see  here</p>"  # no request to evil when the reader opens the room
    assert "<img" not in html
    assert "onerror" not in html


def test_a_link_is_http_https_or_mailto_only() -> None:
    assert to_html("[a](javascript:alert(1))") is None  # markdown-it makes no link of it
    assert "javascript:" not in sanitize('<a href="javascript:alert(1)">a</a>')
    assert "javascript:" not in sanitize('<a href=" JaVaScRiPt:alert(1)">a</a>')
    assert to_html("[a](data:image/png;base64,AAAA)") == "<p><a>a</a></p>"  # markdown-it's ok
    assert to_html("[a](/etc/passwd)") == "<p><a>a</a></p>"  # the spec: no relative link


FRAGMENTS = [
    "<script>", "</script>", "alert(1)", "<img src=x onerror=alert(1)>", "![x](http://e/x.png)",
    "[a](", "javascript:alert(1)", " JaVaScRiPt:", "&#106;avascript:", ")", '<a href="', '">',
    "<svg onload=alert(1)>", "<style>", " onclick=", "**", "`", "```", "\n", "# ", "- ", "> ",
    "| a |\n|---|\n", "<", ">", '"', "'", "data:text/html,x", "<http://e/>",
]  # fmt: skip
hostile_texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=16).map("".join)


@given(st.text() | hostile_texts)
def test_no_text_makes_anything_run_or_fetched(text: str) -> None:
    html = to_html(text)
    if html is not None:
        assert "<script" not in html
        assert "<img" not in html
        assert dangers(html) == []


@given(st.text() | hostile_texts)
def test_the_sanitizer_leaves_nothing_to_run_or_fetch(html: str) -> None:
    assert dangers(sanitize(html)) == []


def test_the_module_imports_no_io_library() -> None:
    assert io_imports("boxmaker.gatewayd.markdown") == set()
