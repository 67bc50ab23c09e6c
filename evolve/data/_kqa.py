"""Importer for the K-QA physician NLI labels (Manes et al. 2024)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evolve.data._models import Case, PackManifest, Rating, RubricRef, Target
from evolve.data._pack import RatingPack, _Problems, validate_pack
from evolve.data._util import is_missing, read_source_table, rubric_version, sha256_file, shorten
from evolve.errors import PackError

__all__ = ["KQA_LABEL_SCORES", "KQA_RUBRIC_ID", "import_kqa", "kqa_case_id"]

KQA_RATINGS_FILE = "NLI_medical_annotator.csv"
KQA_REFERENCE_FILE = "questions_w_answers.jsonl"
KQA_RUBRIC_ID = "kqa-entailment"
KQA_CRITERION = "entailment"
KQA_COMPONENT = "answer"
KQA_IMPORTER = "evolve.data.import_kqa/1"
KQA_CITATION = (
    "Manes I. et al., 'K-QA: A Real-World Medical Q&A Benchmark', arXiv:2401.14493 (2024); "
    "data from GitHub Itaymanes/K-QA (dataset/NLI_medical_annotator.csv, "
    "dataset/questions_w_answers.jsonl), MIT licence."
)

KQA_LABEL_SCORES: dict[str, int] = {"Contradiction": 0, "Neutral": 1, "Entailment": 2}
"""Ordinal scores of the K-QA labels on the ``entailment`` criterion (0..2)."""

_LABEL_COLUMNS = ("label_0", "label_1", "label_2")
_REQUIRED = ("Question", "llm_x", "answer", "claim", "category_x", *_LABEL_COLUMNS)


def kqa_case_id(question: str) -> str:
    """Stable case id of a K-QA question: ``kqa-`` + first 10 hex digits of SHA-1 of its text."""
    return "kqa-" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:10]


def _read_references(path: Path, problems: _Problems) -> dict[str, str]:
    refs: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add_at(path.name, f"line {lineno}", None, f"malformed JSON ({exc.msg})", "Use the original file.")
            continue
        question, answer = row.get("Question"), row.get("Free_form_answer")
        if isinstance(question, str) and isinstance(answer, str) and answer.strip():
            refs.setdefault(question, answer)
    return refs


@dataclass
class _KqaRows:
    """The K-QA rows read so far: cases (one per question), targets, ratings, and problems."""

    csv_path: Path
    index_col: str
    refs: dict[str, str]
    problems: _Problems
    cases: dict[str, Case] = field(default_factory=dict)
    question_of_id: dict[str, str] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    ratings: list[Rating] = field(default_factory=list)
    seen_targets: dict[str, int] = field(default_factory=dict)
    refs_stripped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.refs_stripped = {q.strip(): a for q, a in self.refs.items()}

    def add(self, row: dict, rowno: int) -> None:
        """Read one CSV row (``rowno`` as a spreadsheet shows it); problems go to ``self.problems``."""
        csv_path, index_col, refs, problems = self.csv_path, self.index_col, self.refs, self.problems
        raw_index = str(row[index_col]).strip()
        if not raw_index.isdigit():
            problems.add_at(
                csv_path.name, f"row {rowno}", index_col or "(first column)",
                f"row index {raw_index!r} is not a non-negative integer",
                "Use the original file; the first column numbers the self.",
            )
            return
        target_id = f"kqa-r{int(raw_index):03d}"
        if target_id in self.seen_targets:
            problems.add_at(
                csv_path.name, f"row {rowno}", index_col or "(first column)",
                f"row index {raw_index} repeats row {self.seen_targets[target_id]}",
                "Use the original file; the first column must be unique.",
            )
            return
        self.seen_targets[target_id] = rowno

        question = row["Question"]
        if is_missing(question):
            problems.add_at(csv_path.name, f"row {rowno}", "Question", "empty question", "Use the original file.")
            return
        case_id = kqa_case_id(question)
        previous = self.question_of_id.get(case_id)
        if previous is not None and previous != question:  # pragma: no cover - 40-bit hash collision
            problems.add_at(
                csv_path.name, f"row {rowno}", "Question",
                f"two different questions hash to {case_id}", "Report this; the case id scheme needs more digits.",
            )
            return
        if previous is None:
            self.question_of_id[case_id] = question
            reference = refs.get(question) or self.refs_stripped.get(question.strip())
            self.cases[case_id] = Case(
                case_id=case_id,
                title=shorten(question),
                text=question,
                reference_answer=reference,
                source=f"K-QA {KQA_RATINGS_FILE}, first at row index {raw_index}",
            )

        try:
            self.targets.append(
                Target(
                    target_id=target_id,
                    case_id=case_id,
                    component=KQA_COMPONENT,
                    text=row["answer"],
                    statement=row["claim"] or None,
                    model=row["llm_x"],
                    condition=row["category_x"],
                )
            )
        except ValidationError as exc:
            for err in exc.errors():
                field = {"text": "answer", "statement": "claim"}.get(str(err["loc"][0]), str(err["loc"][0]))
                problems.add_at(csv_path.name, f"row {rowno}", field, err["msg"], "Use the original file.")
            return

        for k, column in enumerate(_LABEL_COLUMNS, start=1):
            label = str(row[column]).strip()
            if label not in KQA_LABEL_SCORES:
                problems.add_at(
                    csv_path.name, f"row {rowno}", column,
                    f"unknown label {label!r}; expected one of {list(KQA_LABEL_SCORES)}",
                    "Correct the label in the source file (labels are case-sensitive).",
                )
                return
            self.ratings.append(
                Rating(
                    case_id=case_id,
                    target_id=target_id,
                    rater_id=f"kqa-physician-{k}",
                    criterion=KQA_CRITERION,
                    score=KQA_LABEL_SCORES[label],
                )
            )


def import_kqa(src: Path | str, *, prompts_root: Path | str | None = None) -> RatingPack:
    """Turn the K-QA physician NLI labels into a rating pack (in memory; nothing is written).

    Layout of the pack:

    * **Case** = one distinct patient question, in order of first appearance.
      ``case_id = kqa_case_id(question)``; ``reference_answer`` is the physician's
      ``Free_form_answer`` from ``questions_w_answers.jsonl`` whose ``Question`` equals the
      question (exact match first, then after stripping surrounding whitespace); ``None`` when
      that file is absent or has no match.
    * **Target** = one CSV row (one LLM answer set against one physician gold statement):
      ``target_id = kqa-r<first column, 3 digits>``, component ``answer``, ``statement`` = the
      gold statement (``claim``), ``model`` = ``llm_x``, ``condition`` = ``category_x``
      (``Must_have`` / ``Nice_to_have``).
    * **Ratings**: raters ``kqa-physician-1..3`` from ``label_0..2`` on criterion
      ``entailment``: Contradiction 0, Neutral 1, Entailment 2. The CSV's ``majority_label``
      is not imported (it can be recomputed from the three labels).

    Args:
        src: Folder holding ``NLI_medical_annotator.csv`` (and optionally
            ``questions_w_answers.jsonl``), or the CSV file itself.
        prompts_root: ``judge_prompts`` folder to read the ``kqa-entailment`` rubric version from.

    Raises:
        PackError: Missing file or column, a non-integer row index, or an unknown label (the
            message names the CSV row, 1-based with the header as row 1, and the column).
        RubricError: The ``kqa-entailment`` rubric cannot be loaded.
    """
    src = Path(src)
    folder = src.parent if src.is_file() else src
    csv_path = src if src.is_file() else folder / KQA_RATINGS_FILE
    if not csv_path.is_file():
        raise PackError(
            f"{csv_path}: K-QA ratings file not found. Pass the folder that holds {KQA_RATINGS_FILE} "
            "(K-QA repository, dataset/)."
        )
    problems = _Problems(str(csv_path), heading="cannot import K-QA from {where}")
    frame = read_source_table(csv_path, "the original NLI_medical_annotator.csv from the K-QA repository")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        problems.add_at(
            csv_path.name, "row 1", "header", f"missing column(s) {missing}; found {list(frame.columns)}",
            "Use the original NLI_medical_annotator.csv from the K-QA repository.",
        )
        problems.raise_if_any()
    index_col = frame.columns[0]

    ref_path = folder / KQA_REFERENCE_FILE
    refs = _read_references(ref_path, problems) if ref_path.is_file() else {}

    rows = _KqaRows(csv_path=csv_path, index_col=index_col, refs=refs, problems=problems)
    for i, row in enumerate(frame.to_dict("records")):
        rows.add(row, rowno=i + 2)  # spreadsheet row: header is row 1
    problems.raise_if_any()
    cases, targets, ratings = rows.cases, rows.targets, rows.ratings

    checksums = {csv_path.name: sha256_file(csv_path)}
    if ref_path.is_file():
        checksums[ref_path.name] = sha256_file(ref_path)
    n_refs = sum(c.reference_answer is not None for c in cases.values())
    manifest = PackManifest(
        name="kqa",
        description=(
            f"K-QA physician NLI labels: {len(cases)} patient questions (cases), {len(targets)} "
            f"answer-vs-gold-statement pairs (targets), {len(ratings)} labels from 3 physicians on "
            f"'{KQA_CRITERION}' (Contradiction 0, Neutral 1, Entailment 2). Physician reference "
            f"answers found for {n_refs} of {len(cases)} questions."
        ),
        rubric=RubricRef(id=KQA_RUBRIC_ID, version=rubric_version(KQA_RUBRIC_ID, prompts_root)),
        source=KQA_CITATION,
        importer=KQA_IMPORTER,
        source_sha256=checksums,
    )
    pack = RatingPack(
        path=None, manifest=manifest, cases=tuple(cases.values()), targets=tuple(targets), ratings=tuple(ratings)
    )
    validate_pack(pack, prompts_root=prompts_root)
    return pack
