"""The ExpertQA importer: on invented records in the release's schema, and on the real files when present.

The synthetic records below are INVENTED for the test (questions, answers, claims, annotator ids);
they only copy the shape of ExpertQA's rand_test.jsonl / rand_val.jsonl.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import IMPORTERS, expertqa_case_id, import_expertqa, load_pack
from evolve.errors import PackError

from .conftest import SHARED_DATA

EXPERTQA_DIR = SHARED_DATA / "expertqa"


def _claim(text, correctness="Definitely correct", informativeness="Very relevant", worthiness="Yes", revised=None):
    return {"claim_string": text, "evidence": ["[1] https://example.org\n\ninvented passage"],
            "support": "Complete", "reason_missing_support": "", "informativeness": informativeness,
            "worthiness": worthiness, "correctness": correctness, "reliability": "Reliable",
            "revised_claim": text if revised is None else revised, "revised_evidence": ""}


def _record(question, field, system, annotator, claims):
    return {"question": question, "annotator_id": annotator,
            "metadata": {"question_type": "invented", "field": field, "specific_field": "Invented"},
            "answers": {system: {"answer_string": " ".join(c["claim_string"] or "" for c in claims),
                                 "attribution": [], "claims": claims, "revised_answer_string": "",
                                 "usefulness": "Useful", "annotation_time": "1", "annotator_id": annotator}}}


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    """Two invented medicine questions (one per file), one law question."""
    folder = tmp_path / "expertqa"
    folder.mkdir()
    test = [
        _record("Invented: is drug A safe in pregnancy?", "Healthcare / Medicine", "gpt4", "aaa111", [
            _claim("Invented claim one."),
            _claim("Invented claim two.", correctness="Unsure", informativeness="A bit relevant", worthiness="No"),
            _claim("Invented claim three.", correctness="Likely incorrect", revised="Invented corrected claim three."),
            _claim("", correctness="Definitely incorrect"),  # a claim without text
        ]),
        _record("Invented: a contract question?", "Law", "bing_chat", "bbb222", [_claim("Invented legal claim.")]),
    ]
    val = [
        _record("Invented: how to dose drug B?", "Healthcare / Medicine", "rr_gs_gpt4", "ccc333", [
            _claim("Invented dosing claim.", correctness=None, informativeness="Uninformative", worthiness=None),
        ]),
    ]
    for name, rows in (("rand_test.jsonl", test), ("rand_val.jsonl", val)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_synthetic_medicine_rows_map_as_documented(synthetic):
    assert IMPORTERS["expertqa"] is import_expertqa
    pack = import_expertqa(synthetic)
    assert pack.manifest.name == "expertqa-medicine" and pack.manifest.rubric.id == "expertqa"
    case = pack.cases[0]
    assert case.case_id == expertqa_case_id("Invented: is drug A safe in pregnancy?")
    assert case.text.startswith("Invented: is drug A safe in pregnancy?\n\nANSWER UNDER REVIEW:\nInvented claim one.")
    assert "gpt4" not in case.text  # the answering system is not shown to the judge
    assert [t.target_id for t in pack.targets] == [f"{case.case_id}-agpt4-c01", f"{case.case_id}-agpt4-c02",
                                                   f"{case.case_id}-agpt4-c03", f"{pack.cases[1].case_id}-arrgsgpt4-c01"]
    assert {t.model for t in pack.targets} == {"gpt4", "rr_gs_gpt4"} and {t.component for t in pack.targets} == {"claim"}
    got = {(r.target_id[-3:], r.criterion): (r.score, r.not_evaluable) for r in pack.ratings if r.case_id == case.case_id}
    assert got[("c01", "correctness")] == (3, False)
    assert got[("c02", "correctness")] == (None, True)  # Unsure = not evaluable
    assert got[("c02", "informativeness")] == (2, False) and got[("c02", "worthiness")] == (0, False)
    assert got[("c03", "correctness")] == (1, False)
    revised = [r for r in pack.ratings if r.comment]
    assert [(r.target_id[-3:], r.criterion, r.comment) for r in revised] == [
        ("c03", "correctness", "Expert's revision of the claim: Invented corrected claim three.")]
    # the dosing claim: null correctness and worthiness are skipped, informativeness imported
    dosing = [r for r in pack.ratings if r.case_id == pack.cases[1].case_id]
    assert [(r.criterion, r.score) for r in dosing] == [("informativeness", 0)]
    assert {r.rater_id for r in pack.ratings} == {"aaa111", "ccc333"}
    desc = pack.manifest.description
    assert "2 questions (cases) with 5 claims, 1 of them without text (skipped); 4 claims (targets)" in desc
    assert "12 label cells: 9 scores, 1 'Unsure' (not evaluable), 2 missing labels skipped " \
           "(correctness: 1, worthiness: 1)" in desc
    assert "1 claim revisions" in desc


def test_domains_and_errors(synthetic, tmp_path):
    law = import_expertqa(synthetic, domain="Law")
    assert law.manifest.name == "expertqa-law" and len(law.targets) == 1
    with pytest.raises(PackError) as exc:
        import_expertqa(synthetic, domain="physics")
    assert "unknown ExpertQA domain 'physics'" in str(exc.value)
    assert "['Healthcare / Medicine', 'Law']" in str(exc.value)
    with pytest.raises(PackError, match=r"ExpertQA file\(s\) \['rand_test.jsonl', 'rand_val.jsonl'\] not found"):
        import_expertqa(tmp_path / "nowhere")
    rows = [json.loads(line) for line in (synthetic / "rand_val.jsonl").read_text().splitlines()]
    rows[0]["answers"]["rr_gs_gpt4"]["claims"][0]["informativeness"] = "Somewhat relevant"
    (synthetic / "rand_val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(PackError) as exc:
        import_expertqa(synthetic)
    assert ("rand_val.jsonl, line 1, answer 'rr_gs_gpt4', claim 1, column 'informativeness': 'Somewhat relevant' "
            "is not an integer score") in str(exc.value)


def test_cli_import_expertqa_synthetic(synthetic, tmp_path):
    out = tmp_path / "ratings" / "expertqa"
    res = CliRunner().invoke(app, ["ratings", "import", "expertqa", str(synthetic), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "2 cases, 4 targets, 10 ratings by 2 raters" in res.output
    assert load_pack(out).manifest.name == "expertqa-medicine"
    res = CliRunner().invoke(app, ["ratings", "import", "expertqa", str(synthetic), "--layout", "wide",
                                   "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "does not take --layout" in res.output and not (tmp_path / "x").exists()


@pytest.mark.skipif(not EXPERTQA_DIR.is_dir(), reason=f"ExpertQA data not available at {EXPERTQA_DIR}")
def test_real_medicine_rows_counts_add_up(tmp_path):
    pack = import_expertqa(EXPERTQA_DIR)
    assert len(pack.cases) == 94  # SOURCE.md: 94 questions with 484 rated claims
    raw = [json.loads(line) for name in ("rand_test.jsonl", "rand_val.jsonl")
           for line in (EXPERTQA_DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    claims = [c for r in raw if r["metadata"]["field"] == "Healthcare / Medicine"
              for a in r["answers"].values() for c in a["claims"]]
    assert len(claims) == 484
    with_text = [c for c in claims if (c.get("claim_string") or "").strip()]
    assert len(pack.targets) == len(with_text)
    nulls = Counter(k for c in with_text for k in ("correctness", "informativeness", "worthiness") if c.get(k) is None)
    unsure = sum(c.get("correctness") == "Unsure" for c in with_text)
    # every label cell of a claim with text is a score, an 'Unsure' (not evaluable) or a skipped null
    assert len(pack.ratings) + sum(nulls.values()) == 3 * len(with_text)
    assert sum(r.not_evaluable for r in pack.ratings) == unsure
    per_criterion = Counter(r.criterion for r in pack.ratings)
    assert per_criterion == Counter({k: len(with_text) - nulls[k] for k in ("correctness", "informativeness", "worthiness")})
    # one expert per answer: no target has two raters
    assert max(Counter((r.target_id, r.criterion) for r in pack.ratings).values()) == 1
    assert f"{len(with_text)} claims (targets)" in pack.manifest.description
