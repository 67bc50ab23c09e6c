"""Every Markdown file a run writes quotes model-written and user text inertly (issue 24, item 7).

Markdown viewers render raw HTML and fetch images: a guidance prompt, a rationale or a role name
holding ``<script>``, ``<img src=http://...>`` or ``![t](http://...)`` must be shown, never
run or fetched, and a ``|`` or a line break must not break a table. Each report is rendered
here the way a permissive viewer would (CommonMark with raw HTML on, GFM tables: markdown-it)
and searched for tags, images and links, then for the quoted text, shown as written.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from evolve.audit import audit_run
from evolve.config import resolve_config
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.markdown import md_code, md_code_block, md_inline
from evolve.outputs import BenchReport
from evolve.report import build_bench_report, render_bench_markdown, write_comparison
from evolve.report._html import markdown_html
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import run_calibration
from tests.conftest import fake_endpoint

HOSTILE = ('<script>alert(1)</script> <img src="http://evil.example/x.png"> ![t](http://evil.example/t.png) '
           '[click](javascript:alert(1)) a|b `tick` & \\\nsecond line')
SHOWN = ["<script>alert(1)</script>", '<img src="http://evil.example/x.png">', "![t](http://evil.example/t.png)",
         "[click](javascript:alert(1))", "a|b", "`tick` &"]
"""What a reader sees of :data:`HOSTILE` (a line break in a table cell or a line becomes a space)."""


class _Rendered(HTMLParser):
    """What a viewer makes of a Markdown file: its active elements, its text, its tables."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.active: list[str] = []  # script, img, iframe, links...
        self.text: list[str] = []
        self.rows: list[list[int]] = []  # per table: cells of each row
        self._cells = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "img", "iframe", "object", "embed", "a", "link", "style", "svg"):
            self.active.append(f"<{tag} {dict(attrs)}>")
        if tag == "table":
            self.rows.append([])
        if tag == "tr":
            self._cells = 0
        if tag in ("td", "th"):
            self._cells += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows[-1].append(self._cells)

    def handle_data(self, data):
        self.text.append(data)


def rendered(markdown_text: str) -> _Rendered:
    """``markdown_text`` rendered like a permissive viewer would (raw HTML allowed)."""
    page = _Rendered()
    page.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown_text))
    return page


def assert_inert(markdown_text: str, *, shown: list[str] = SHOWN) -> None:
    """No tag, image or link survives in the raw file (outside fenced code blocks, which show
    their text as written) or in its rendering; tables keep their shape; the quoted text reads
    as written."""
    outside_code = re.sub(r"^(`{3,})[^\n]*\n.*?\n\1$", "", markdown_text, flags=re.M | re.S)
    assert not re.search(r"<\s*(script|img)", outside_code, re.I)
    assert not re.search(r"(?<!\\)\]\((https?|javascript):", outside_code)
    page = rendered(markdown_text)
    assert page.active == []
    assert all(len(set(rows)) == 1 for rows in page.rows), page.rows  # every row as wide as the header
    text = " ".join(" ".join(page.text).split())
    for piece in shown:
        assert piece in text, piece
    python_markdown = markdown_html(markdown_text)  # report.html's renderer: inert too
    assert "<script" not in python_markdown and "<img" not in python_markdown and "<a " not in python_markdown


# -- the helpers ---------------------------------------------------------------------------------


def test_inline_text_is_shown_as_written_in_a_paragraph_and_a_table_cell() -> None:
    text = md_inline(HOSTILE)
    assert "\n" not in text
    assert_inert(f"Guidance: {text}\n\n| before | quoted | after |\n|---|---|---|\n| 1 | {text} | 2 |\n")
    assert md_inline("entailment") == "entailment" and md_inline(3) == "3"  # plain words stay plain


def test_a_code_span_is_used_only_when_it_can_hold_the_text() -> None:
    assert md_code("judge-guided") == "`judge-guided`"
    for text in ("a|b", "x`y", "<b>", "two\nlines", " "):
        assert md_code(text) == md_inline(text)
    assert_inert(f"| id |\n|---|\n| {md_code(HOSTILE)} |\n")


@pytest.mark.parametrize("text", [HOSTILE, "```\nclosed?\n```\n<script>alert(1)</script>", "````` <img src=x>"])
def test_a_code_block_cannot_be_closed_by_its_text(text: str) -> None:
    block = md_code_block(text)
    page = rendered(f"{block}\n\n<script>after the block</script>\n")
    assert page.active == ["<script {}>"]  # only the tag after the block: the block held all of its text
    code = rendered(block)
    assert code.active == [] and "".join(code.text).rstrip("\n") == text.replace("\r\n", "\n")
    assert "<script" not in markdown_html(block) and "<img" not in markdown_html(block)


# -- the reports of runs -------------------------------------------------------------------------


def hostile_endpoint(request: ChatRequest) -> str:
    """:func:`fake_endpoint` whose mutations propose guidance holding :data:`HOSTILE` (still
    'calibrated', so it wins) and whose drift checks give it as their rationale."""
    if request.tag == "mutation":
        return json.dumps({"analysis": "a", "guidance": f"calibrated rule {request.seed}: {HOSTILE}"})
    if request.tag == "audit":
        return json.dumps({"rationale": HOSTILE, "about_criterion": True, "contradicts_protocol": False,
                           "drift": "none"})
    return fake_endpoint(request)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, tiny_frame) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    pack, splits = tiny_frame
    config = resolve_config(preset="quick", overrides={
        "run_id": "hostile", "pack": pack, "splits": splits, "archives_dir": root / "archives",
        "cache_path": root / "cache.sqlite", "endpoint": {"provider": "fake"}, "judge": {"model": "judge-guided"},
        "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2},
    }, environ={})
    with Client(FakeProvider(hostile_endpoint), cache=ResponseCache(root / "cache.sqlite"), backoff_initial=0.01) as client:
        run = run_calibration(config, client=client).run_dir
        audit_run(run, client=client)
    return run


def test_the_calibration_report_and_the_audit_quote_a_hostile_guidance_inertly(hostile_run: Path) -> None:
    winner = json.loads((hostile_run / "report.json").read_text())["criteria"]["entailment"]["winner"]["text"]
    assert HOSTILE in winner  # the winning guidance really holds the tags
    report = (hostile_run / "report.md").read_text("utf-8")
    assert_inert(report, shown=SHOWN)
    blocks = MarkdownIt("commonmark", {"html": True}).parse(report)
    assert [t.content.rstrip("\n") for t in blocks if t.type == "fence"] == [winner]  # shown whole, line breaks kept
    audit = (hostile_run / "audit.md").read_text("utf-8")
    assert_inert(audit, shown=SHOWN[:2])  # the drift check's rationale, cut to 160 characters in its cell
    html = (hostile_run / "report.html").read_text("utf-8")
    assert "<script>alert" not in html and '<img src="http://evil' not in html


def test_a_comparison_quotes_its_runs_inertly(hostile_run: Path, calibration_runs, tmp_path) -> None:
    out = tmp_path / "reports" / "cmp"
    write_comparison([hostile_run, calibration_runs[0]], out, n_boot=20)
    assert_inert((out / "report.md").read_text("utf-8"), shown=["hostile", "guided"])


def test_bench_tables_quote_model_written_role_names_and_models_inertly(bench_run: Path) -> None:
    data = build_bench_report(bench_run, n_boot=20).model_dump()  # the report a hostile file would hold
    for r in data["roles"]["categories"]:
        r["category"], r["exact_labels"] = HOSTILE, HOSTILE
    for r in data["tables"]["table4"]:
        r["role"] = HOSTILE
    for r in data["tables"]["table3"]:
        r["model"] = HOSTILE
    data["notes"] = [HOSTILE]
    assert_inert(render_bench_markdown(BenchReport.model_validate(data)))


def test_an_otb_run_with_a_hostile_model_name_writes_an_inert_report(tmp_path: Path) -> None:
    from evolve.cli import app
    from tests.otb.test_cli_otb import EXAMPLE, respond

    name = 'm<img src="http://evil.example/m.png">|x'
    with LoopbackChatServer(respond) as server:
        result = CliRunner().invoke(app, [
            "otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--base-url", server.base_url,
            "--model", name, "--max-items", "3", "--run-id", "otb", "--archives-dir", str(tmp_path / "archives")],
            env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    md = (tmp_path / "archives" / "otb" / "otb_report.md").read_text("utf-8")
    assert_inert(md, shown=['m<img src="http://evil.example/m.png">|x'])


def test_a_scoring_report_quotes_the_judge_model_and_the_targets_inertly(hostile_run: Path, tiny_frame, tmp_path) -> None:
    import evolve
    from evolve.report import build_scoring_report, scoring_markdown

    pack, _ = tiny_frame
    with Client(FakeProvider(hostile_endpoint), cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        run_dir = evolve.load_judge(hostile_run).score(pack, client=client, run_dir=tmp_path / "scored").run_dir
    assert_inert((run_dir / "report.md").read_text("utf-8"), shown=["entailment"])
    report = build_scoring_report(run_dir, n_boot=20)
    cid, entry = next(iter(report.criteria.items()))
    report = report.model_copy(update={"judge": report.judge.model_copy(update={"model": HOSTILE}), "targets": HOSTILE,
                                       "criteria": {cid: entry.model_copy(update={"name": HOSTILE})}})
    assert_inert(scoring_markdown(report))
