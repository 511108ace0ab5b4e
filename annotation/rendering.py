"""Render untrusted model answers (markdown) to HTML that is safe to show to workers.

Two layers: markdown-it renders with raw HTML switched off (so `<script>` in an answer is shown
as text), then nh3, an HTML sanitiser, keeps only a short list of tags and attributes. Images are
dropped (a remote image would be fetched by the worker's browser); links keep only http, https
and mailto targets. The worker pages also send a Content-Security-Policy as a third layer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

ALLOWED_TAGS: frozenset[str] = frozenset(
    {
        "p",
        "br",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "strong",
        "em",
        "s",
        "del",
        "code",
        "pre",
        "blockquote",
        "ul",
        "ol",
        "li",
        "a",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
    }
)
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES: frozenset[str] = frozenset({"http", "https", "mailto"})

_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _image_as_text(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """Show an image as its description: a remote image would be fetched by the browser."""
    alt = "".join(child.content for child in tokens[idx].children or [])
    return f"[image: {nh3.clean_text(alt)}]" if alt else "[image]"


_markdown.add_render_rule("image", _image_as_text)


_LINK = re.compile(r'<a href="([^"]*)"[^>]*>(.*?)</a>', re.DOTALL)


def _link_as_text(match: re.Match[str]) -> str:
    href, label = match.group(1), match.group(2)
    return label if label == href else f"{label} ({href})"


def markdown_render_safe(text: str, *, links_as_text: bool = False) -> str:
    """Return sanitised HTML for a markdown text written by a model or a person.

    With `links_as_text` (a study option for workers), a link is shown as its text followed by
    its target in brackets, and nothing is clickable.
    """
    html = _markdown.render(text or "")
    tags = set(ALLOWED_TAGS)
    if links_as_text:
        html = _LINK.sub(_link_as_text, html)
        tags.discard("a")
    return nh3.clean(
        html,
        tags=tags,
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
    )
