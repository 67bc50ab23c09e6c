"""Importers on tiny invented source files (runs without the real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evolve.data import IMPORTERS, import_expertqa, import_kqa, import_savage, kqa_case_id, savage_swapped_case_ids
from evolve.errors import PackError

KQA_ROWS = [
    # question, llm, answer, claim, category, labels
    ("Is fake syndrome X contagious?", "gpt4", "Synthetic answer A.", "Synthetic claim 1.", "Must_have",
     ("Entailment", "Entailment", "Neutral")),
    ("Is fake syndrome X contagious?", "bard", "Synthetic answer B.", "Synthetic claim 1.", "Nice_to_have",
     ("Contradiction", "Neutral", "Contradiction")),
    ("Can I take invented drug Y at night?", "gpt35", "Synthetic answer C.", "Synthetic claim 2.", "Must_have",
     ("Neutral", "Neutral", "Neutral")),
]


def _write_kqa(folder: Path, labels_override: dict[tuple[int, int], str] | None = None,
               with_refs: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (q, llm, ans, claim, cat, labels) in enumerate(KQA_ROWS):
        labels = list(labels)
        for (r, k), value in (labels_override or {}).items():
            if r == i:
                labels[k] = value
        rows.append({"": i, "Question": q, "llm_x": llm, "answer": ans, "claim": claim, "category_x": cat,
                     "majority_label": "ignored", "label_0": labels[0], "label_1": labels[1], "label_2": labels[2]})
    pd.DataFrame(rows).to_csv(folder / "NLI_medical_annotator.csv", index=False)
    if with_refs:
        refs = [{"Question": "Is fake syndrome X contagious?\n", "Free_form_answer": "Synthetic reference."},
                {"Question": "Unrelated", "Free_form_answer": "Other."}]
        (folder / "questions_w_answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs))
    return folder


def test_kqa_import_layout(tmp_path: Path) -> None:
    pack = import_kqa(_write_kqa(tmp_path / "kqa"))
    q1, q2 = KQA_ROWS[0][0], KQA_ROWS[2][0]
    assert pack.case_ids == (kqa_case_id(q1), kqa_case_id(q2))
    assert kqa_case_id(q1).startswith("kqa-") and len(kqa_case_id(q1)) == 14
    assert pack.case(kqa_case_id(q1)).reference_answer == "Synthetic reference."  # matched after stripping
    assert pack.case(kqa_case_id(q2)).reference_answer is None
    assert [t.target_id for t in pack.targets] == ["kqa-r000", "kqa-r001", "kqa-r002"]
    t = pack.target("kqa-r001")
    assert (t.component, t.model, t.condition, t.statement, t.text) == (
        "answer", "bard", "Nice_to_have", "Synthetic claim 1.", "Synthetic answer B.")
    assert pack.raters == ("kqa-physician-1", "kqa-physician-2", "kqa-physician-3")
    assert [r.score for r in pack.ratings_of_target("kqa-r001")] == [0, 1, 0]
    assert pack.manifest.rubric.id == "kqa-entailment"
    assert pack.manifest.importer == "evolve.data.import_kqa/1"
    assert set(pack.manifest.source_sha256) == {"NLI_medical_annotator.csv", "questions_w_answers.jsonl"}
    assert "arXiv:2401.14493" in pack.manifest.source and "MIT" in pack.manifest.source
    assert pack.path is None
    assert not (tmp_path / "kqa" / "pack.json").exists()  # importers write nothing


def test_kqa_without_reference_file_and_from_csv_path(tmp_path: Path) -> None:
    folder = _write_kqa(tmp_path / "kqa", with_refs=False)
    pack = import_kqa(folder / "NLI_medical_annotator.csv")
    assert all(c.reference_answer is None for c in pack.cases)
    assert list(pack.manifest.source_sha256) == ["NLI_medical_annotator.csv"]


def test_kqa_unknown_label_names_row_and_column(tmp_path: Path) -> None:
    folder = _write_kqa(tmp_path / "kqa", {(1, 2): "Maybe", (2, 0): "neutral"})
    with pytest.raises(PackError) as info:
        import_kqa(folder)
    msg = str(info.value)
    assert "NLI_medical_annotator.csv, row 3, field 'label_2': unknown label 'Maybe'" in msg
    assert "NLI_medical_annotator.csv, row 4, field 'label_0': unknown label 'neutral'" in msg


def test_kqa_missing_file_or_column(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="not found"):
        import_kqa(tmp_path)
    (tmp_path / "NLI_medical_annotator.csv").write_text("a,Question\n0,hi\n")
    with pytest.raises(PackError, match=r"row 1, field 'header': missing column"):
        import_kqa(tmp_path)


SAVAGE_HEADER = ["index", "question", "answer", "Prompt Style", "Model answer", "rationale", "Correct?",
                 "Reviewer # 1 Number of errors", "Explaining the errors found", "Reviewer # 2Number of errors",
                 "Explaining the errors found"]
LONG = "Synthetic rationale that is clearly longer than the final answer it leads to."


def _write_savage(path: Path, rows: list[list], header: list[str] = SAVAGE_HEADER) -> Path:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.append(header)
    for row in rows:
        ws.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    return path


def _savage_rows() -> list[list]:
    return [
        [3, "Synthetic vignette three?", "Gold A", "DR", "Answer A", LONG, "Y", 0, None, 1, "one error"],
        [7.0, "Synthetic vignette seven?", "Gold B", "DR", LONG + " (swapped)", "Answer B", "N", 5, "many", 0, None],
        [None, None, None, None, "N", 11, 18, 0.8, 7, 0.6, None],  # summary block
    ]


def test_savage_import_layout(tmp_path: Path) -> None:
    path = _write_savage(tmp_path / "s" / "41746_2024_1010_MOESM9_ESM.xlsx", _savage_rows())
    pack = import_savage(tmp_path / "s")
    assert pack.case_ids == ("savage-3", "savage-7")
    assert [t.target_id for t in pack.targets] == ["savage-3-dr", "savage-7-dr"]
    assert pack.case("savage-3").reference_answer == "Gold A"
    t7 = pack.target("savage-7-dr")
    assert t7.text == f"Final answer: Answer B\n\nRationale:\n{LONG} (swapped)"
    assert (t7.component, t7.model, t7.condition) == ("rationale", "gpt-4", "DR")
    assert savage_swapped_case_ids(pack) == ("savage-7",)
    assert "In 1 of 2 rows" in pack.manifest.description
    scores = {(r.target_id, r.rater_id): (r.score, r.comment) for r in pack.ratings}
    assert scores[("savage-3-dr", "savage-reviewer-1")] == (0, "")
    assert scores[("savage-3-dr", "savage-reviewer-2")] == (1, "one error")
    assert scores[("savage-7-dr", "savage-reviewer-1")] == (3, "many")  # 5 errors -> capped at 3
    assert list(pack.manifest.source_sha256) == [path.name]
    assert "doi:10.1038/s41746-024-01010-1" in pack.manifest.source and "CC BY 4.0" in pack.manifest.source
    assert import_savage(path) == pack  # file path works too


def test_savage_header_whitespace_is_ignored(tmp_path: Path) -> None:
    header = [h.replace("# 2Number", "#2  Number ").upper() for h in SAVAGE_HEADER]
    pack = import_savage(_write_savage(tmp_path / "x.xlsx", _savage_rows(), header))
    assert len(pack.ratings) == 4


def test_savage_non_numeric_count_names_row_and_column(tmp_path: Path) -> None:
    rows = _savage_rows()
    rows[1][9] = "two"
    rows[0][7] = 1.5
    with pytest.raises(PackError) as info:
        import_savage(_write_savage(tmp_path / "x.xlsx", rows))
    msg = str(info.value)
    assert "x.xlsx, row 3, field 'Reviewer # 2Number of errors': error count 'two'" in msg
    assert "x.xlsx, row 2, field 'Reviewer # 1 Number of errors': error count 1.5" in msg


def test_savage_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="not found"):
        import_savage(tmp_path)


def test_importer_registry() -> None:
    assert IMPORTERS == {"expertqa": import_expertqa, "kqa": import_kqa, "savage": import_savage}
