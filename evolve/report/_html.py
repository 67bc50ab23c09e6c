"""Self-contained HTML pages: figures as embedded PNG, tables from the Markdown report.

A page needs nothing but itself: no script, no stylesheet or font from the network, every
figure a ``data:`` image. The tables are the Markdown report's own, converted with
Python-Markdown, so the HTML and Markdown reports cannot disagree.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evolve.report._settings import FIGURES_OFF_NOTE

if TYPE_CHECKING:  # matplotlib loads (half a second) only when a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #212121; }
h1, h2, h3 { line-height: 1.2; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem; }
figure { margin: 0; flex: 1 1 420px; max-width: 100%; }
figure.wide { flex-basis: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #e0e0e0; }
figcaption { font-size: 0.85rem; color: #616161; }
p.note { flex-basis: 100%; color: #616161; font-style: italic; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #e0e0e0; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
code, pre { background: #f5f5f5; }
pre { padding: 0.5rem; overflow-x: auto; white-space: pre-wrap; }
"""


def figure_html(draw: Callable[[Axes], object], caption: str, *, size: tuple[float, float] = (6.0, 4.0),
                dpi: int = 100) -> str:
    """Draw one figure and return it as an HTML ``<figure>`` with an embedded PNG.

    Args:
        draw: Called with a fresh Axes (one of the functions of :mod:`evolve.report._figures`).
        caption: What the figure shows (also the image's ``alt`` text).
        size: Inches (width, height).
        dpi: Pixels per inch of the PNG.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    draw(fig.add_subplot())
    return _png_figure(fig, caption, dpi, wide=size[0] > 8)


def grid_html(draws: Sequence[Callable[[Axes], object]], caption: str, *, cell: tuple[float, float] = (4.5, 3.5),
              columns: int = 3, dpi: int = 100) -> str:
    """Several panels in one figure (small multiples), ``columns`` to a row; with no panel, a
    note (:func:`note_html`) saying there is nothing to draw, never an empty image."""
    if not draws:
        return note_html(f"{caption}: nothing to draw.")
    rows = -(-len(draws) // columns)
    cols = min(columns, len(draws))
    from matplotlib.figure import Figure

    fig = Figure(figsize=(cell[0] * cols, cell[1] * rows), layout="constrained")
    for i, draw in enumerate(draws):
        draw(fig.add_subplot(rows, cols, i + 1))
    return _png_figure(fig, caption, dpi, wide=cols > 1)


def note_html(text: str) -> str:
    """A sentence standing where a figure would be (why there is none)."""
    return f'<p class="note">{html.escape(text)}</p>'


def _png_figure(fig: Figure, caption: str, dpi: int, *, wide: bool) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    text = html.escape(caption)
    attrs = ' class="wide"' if wide else ""
    return (f'<figure{attrs}><img class="figure" src="data:image/png;base64,{data}" alt="{text}">'
            f"<figcaption>{text}</figcaption></figure>")


def markdown_html(text: str) -> str:
    """A Markdown report as HTML (tables, code blocks), with Python-Markdown.

    Raw HTML in the text is shown as text, never interpreted: reports quote model output
    (guidance, rationales) and case texts, and a ``<script>`` or ``<img src=http...>`` in them
    must neither run nor reach the network.
    """
    import markdown

    # toc's baselevel moves the report's own headings one level down, under the page's title
    converter = markdown.Markdown(extensions=["tables", "fenced_code", "sane_lists", "toc"],
                                  extension_configs={"toc": {"baselevel": 2}})
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    return converter.convert(text)


def tables(markdown_text: str) -> str:
    """The Markdown report's text and tables, as the last part of a page."""
    return f"<section class=\"tables\">{markdown_html(markdown_text)}</section>"


def section(title: str, figures: Sequence[str], intro: str = "") -> str:
    """A titled block of figures (each from :func:`figure_html`)."""
    para = f"<p>{html.escape(intro)}</p>" if intro else ""
    return f"<section><h2>{html.escape(title)}</h2>{para}<div class=\"figures\">{''.join(figures)}</div></section>"


def tables_page(title: str, markdown_text: str) -> str:
    """A page without figures (``ReportSettings(figures=False)``): a note saying they were turned
    off, then the Markdown report's tables."""
    return page(title, [note_html(FIGURES_OFF_NOTE), tables(markdown_text)])


def page(title: str, parts: Sequence[str]) -> str:
    """A whole HTML document: ``title``, then ``parts`` (HTML fragments) in order."""
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")
