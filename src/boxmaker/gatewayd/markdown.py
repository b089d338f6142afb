"""An answer's Markdown as the HTML of a Matrix message's `formatted_body`, or None when the
plain `body` says it all.

Two walls, each a kept library rather than our own parser or escaper. `markdown-it-py` reads
the text as CommonMark (and GitHub's tables and `~~strikethrough~~`) with raw HTML off, so a
`<script>` the model wrote comes out as text, escaped. `nh3` (the Rust sanitizer ammonia) then
keeps only the tags the Matrix spec suggests for `m.room.message` and the attributes it
permits on them: an `a`'s `href` when it is absolute http, https or mailto (no
`javascript:`), an `ol`'s `start`, a `code`'s `class` when it names a language
(`language-python`); no `style`, no event handler. `img` is dropped outright, Markdown images
too: a message that makes the reader's client fetch a remote URL tells its owner who read it
and when. A `script` or `style` goes with its content.

No I/O: text in, text out.
"""

from __future__ import annotations

import re
from typing import Final

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

_MARKDOWN: Final = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

# The spec's list (client-server API, `m.room.message` msgtypes) less `img`; `font` and
# `strike` are its names before v1.10, `s` the one after (markdown-it writes `s`).
TAGS: Final = frozenset(
    {"font", "del", "s", "strike", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "p", "a",
     "ul", "ol", "sup", "sub", "li", "b", "i", "u", "strong", "em", "code", "hr", "br", "div",
     "table", "thead", "tbody", "tr", "th", "td", "caption", "pre", "span", "details", "summary"}
)  # fmt: skip
ATTRIBUTES: Final = {"a": {"href"}, "ol": {"start"}, "code": {"class"}}
URL_SCHEMES: Final = frozenset({"http", "https", "mailto"})
_LANGUAGE = re.compile(r"language-[\w+#.-]+")


def to_html(text: str) -> str | None:
    """`text`'s Markdown as sanitized HTML, or None when it makes nothing (blank text) or only
    a paragraph of the same text, when the gateway sends `body` alone."""
    rendered = _MARKDOWN.render(text)
    if rendered in ("", f"<p>{escapeHtml(text.strip())}</p>\n"):
        return None
    return sanitize(rendered).strip()


def sanitize(html: str) -> str:
    """`html` with only the Matrix tags and attributes above: the rest dropped, their text
    kept, but a `script`'s or a `style`'s content dropped with it."""
    return nh3.clean(
        html,
        tags=TAGS,
        clean_content_tags={"script", "style"},
        attributes=ATTRIBUTES,
        attribute_filter=_language_class_only,
        strip_comments=True,
        link_rel=None,  # not a permitted attribute: the reader's client adds its own
        generic_attribute_prefixes=set(),
        url_schemes=URL_SCHEMES,
        url_relative="deny",  # the spec: an `href` is absolute
    )


def _language_class_only(tag: str, attribute: str, value: str) -> str | None:
    """A `code`'s `class` kept only as one `language-…` (a fence's info word); the other
    attributes the sanitizer allowed, as they are."""
    if (tag, attribute) == ("code", "class"):
        return value if _LANGUAGE.fullmatch(value) else None
    return value
