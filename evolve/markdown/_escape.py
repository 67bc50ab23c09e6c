"""Escaping text that a report quotes: inline text and fenced code blocks."""

from __future__ import annotations

import re

_NEWLINES = re.compile(r"\r\n|\r|\n")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = frozenset("\\`[]|")
_BACKTICKS = re.compile(r"`+")
_CODE_BREAKERS = re.compile(r"[`|\r\n<>&]")


def md_inline(text: object) -> str:
    """``text`` as one line of Markdown that shows it as written and does nothing else.

    Safe in a paragraph, a list item, a heading and a table cell: line breaks become spaces
    (a cell is one line), ``&``, ``<`` and ``>`` become HTML entities (no tag, no autolink:
    a ``<script>`` or ``<img src=...>`` is shown, never run or fetched), and ``\\``, a backtick,
    ``[``, ``]`` and ``|`` get a backslash (no link, no image, no code span, no cell break).
    Viewers show the text unchanged; the raw file shows the escapes.

    Args:
        text: Any value; ``str(text)`` is escaped.

    Returns:
        The escaped text, one line.

    Example:
        >>> md_inline('![t](http://x.example/t.png) <b>|</b>')
        '!\\\\[t\\\\](http://x.example/t.png) &lt;b&gt;\\\\|&lt;/b&gt;'
    """
    out = []
    for ch in _NEWLINES.sub(" ", str(text)):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MARKDOWN:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def md_code_block(text: str, info: str = "text") -> str:
    """``text`` in a fenced code block that it cannot close, as Markdown lines.

    The fence is one backtick longer than the longest run of backticks in ``text`` (at least
    three), so no line of the text ends the block early; inside it nothing is interpreted
    (tags, links, images and emphasis are shown as written) and line breaks are kept. Suited
    to long multi-line model output such as a guidance prompt.

    Args:
        text: The text to quote (line breaks ``\\r\\n`` and ``\\r`` become ``\\n``).
        info: The fence's info string (a language name; ``text`` for prose).

    Returns:
        ``fence + info``, the text, and the closing fence, joined by line breaks (no trailing one).
    """
    body = _NEWLINES.sub("\n", text)
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def md_code(text: object) -> str:
    """``text`` as an inline code span (an id, a file name), or as :func:`md_inline` text when
    a code span cannot hold it safely.

    Inside a code span every character but the backtick is shown as written; a backtick, ``|``
    (a table cell break in some viewers even there) or a line break would escape it, and a
    text with ``<``, ``>`` or ``&`` is kept out of the raw file's tags too, so such a text is
    escaped as plain text instead.

    Args:
        text: Any value; ``str(text)`` is quoted.

    Returns:
        ``"`text`"``, or ``md_inline(text)``.
    """
    value = str(text)
    if _CODE_BREAKERS.search(value) or not value.strip():
        return md_inline(value)
    return f"`{value}`"
