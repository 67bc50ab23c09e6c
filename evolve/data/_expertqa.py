"""Importer for the ExpertQA expert claim labels (Malaviya et al., NAACL 2024).

ExpertQA's random split (``rand_test.jsonl`` and ``rand_val.jsonl``) holds one question per
line, written by an expert, with one LLM answer that an expert of the same field split into
claims and labelled on ordinal scales. The importer turns one domain (``metadata.field``) into
a rating pack for the shipped ``expertqa`` rubric, through the table importer
(:func:`~evolve.data.import_frame`, wide layout: one row per claim).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from evolve.data._pack import MAX_REPORTED_PROBLEMS, RatingPack
from evolve.data._table import import_frame
from evolve.data._util import sha256_file, shorten
from evolve.errors import PackError, Problems

__all__ = [
    "EXPERTQA_DOMAINS",
    "EXPERTQA_FILES",
    "EXPERTQA_LABEL_SCORES",
    "EXPERTQA_NOT_EVALUABLE",
    "EXPERTQA_RUBRIC_ID",
    "expertqa_case_id",
    "import_expertqa",
]

EXPERTQA_FILES = ("rand_test.jsonl", "rand_val.jsonl")
"""The release files read, in this order (both must be present in the folder)."""
EXPERTQA_RUBRIC_ID = "expertqa"
EXPERTQA_IMPORTER = "evolve.data.import_expertqa/1"
EXPERTQA_COMPONENT = "claim"
EXPERTQA_CITATION = (
    "Malaviya C. et al., 'ExpertQA: Expert-Curated Questions and Attributed Answers', NAACL 2024, "
    "arXiv:2309.07852; data from GitHub chaitanyamalaviya/ExpertQA (data/lfqa/rand_test.jsonl, "
    "data/lfqa/rand_val.jsonl), MIT licence."
)

EXPERTQA_DOMAINS: dict[str, str] = {"medicine": "Healthcare / Medicine"}
"""Short domain names and the ``metadata.field`` they select (any exact field value works too)."""

EXPERTQA_LABEL_SCORES: dict[str, dict[str, int]] = {
    "correctness": {
        "Definitely incorrect": 0, "Likely incorrect": 1, "Probably correct": 2, "Definitely correct": 3,
    },
    "informativeness": {"Uninformative": 0, "Not too important": 1, "A bit relevant": 2, "Very relevant": 3},
    "worthiness": {"No": 0, "Yes": 1},
}
"""Ordinal scores of the imported claim labels, per criterion of the ``expertqa`` rubric.
``support`` and ``reliability`` are not imported (see :func:`import_expertqa`)."""

EXPERTQA_NOT_EVALUABLE = ("Unsure",)
"""Labels imported as *not evaluable*: the expert's ``Unsure`` on correctness."""


def expertqa_case_id(question: str) -> str:
    """Stable case id of an ExpertQA question: ``eqa-`` + the first 10 hex digits of SHA-1 of its text."""
    return "eqa-" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:10]


def _domain_field(domain: str, fields: set[str]) -> str:
    wanted = EXPERTQA_DOMAINS.get(domain.strip().lower(), domain.strip())
    hit = next((f for f in fields if f.lower() == wanted.lower()), None)
    if hit is None:
        aliases = ", ".join(f"{k} = {v!r}" for k, v in EXPERTQA_DOMAINS.items())
        raise PackError(
            f"unknown ExpertQA domain {domain!r}. Pass a short name ({aliases}) or one of the fields present in the "
            f"files (metadata.field): {sorted(fields)}."
        )
    return hit


def _read_lines(folder: Path, problems: Problems) -> list[tuple[str, int, dict[str, Any]]]:
    out: list[tuple[str, int, dict[str, Any]]] = []
    for name in EXPERTQA_FILES:
        for lineno, line in enumerate((folder / name).read_text(encoding="utf-8-sig").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.add(f"{name}, line {lineno}", f"malformed JSON ({exc.msg})", "Use the original file.")
                continue
            if not isinstance(row, dict) or not isinstance(row.get("answers"), dict) or \
                    not isinstance(row.get("metadata"), dict) or not isinstance(row.get("question"), str):
                problems.add(f"{name}, line {lineno}", "not an ExpertQA record (question, metadata, answers)",
                             "Use the original rand_test.jsonl / rand_val.jsonl.")
                continue
            out.append((name, lineno, row))
    return out


def _claim_rows(name: str, lineno: int, row: dict[str, Any], problems: Problems, counts: dict[str, int]) -> list[dict]:
    """One table row per claim with text (claims without text are counted, not imported)."""
    question = row["question"]
    case_id = expertqa_case_id(question)
    out = []
    for system, answer in row["answers"].items():
        where = f"{name}, line {lineno}, answer {system!r}"
        if not isinstance(answer, dict) or not isinstance(answer.get("claims"), list):
            problems.add(where, "the answer has no list of claims", "Use the original file.")
            continue
        text = (answer.get("answer_string") or "").strip()
        case_text = f"{question}\n\nANSWER UNDER REVIEW:\n{text}" if text else question
        for k, claim in enumerate(answer["claims"], start=1):
            counts["claims"] += 1
            claim = claim if isinstance(claim, dict) else {}
            claim_text = claim.get("claim_string")
            if not isinstance(claim_text, str) or not claim_text.strip():
                counts["claims_without_text"] += 1
                continue
            revised = claim.get("revised_claim")
            revision = (f"Expert's revision of the claim: {revised.strip()}"
                        if isinstance(revised, str) and revised.strip() and revised.strip() != claim_text.strip() else "")
            out.append({
                "case": case_id, "case_text": case_text, "case_title": shorten(question),
                "target": f"{case_id}-a{re.sub(r'[^A-Za-z0-9]+', '', system) or 'x'}-c{k:02d}",
                "target_text": claim_text, "rater": str(answer.get("annotator_id") or row.get("annotator_id") or ""),
                "model": system,
                "correctness_comment": revision, "_where": f"{where}, claim {k}",
                **{crit: claim.get(crit) for crit in EXPERTQA_LABEL_SCORES},
            })
    return out


def import_expertqa(
    src: Path | str,
    *,
    domain: str = "medicine",
    name: str | None = None,
    prompts_root: Path | str | None = None,
) -> RatingPack:
    """Turn one domain of ExpertQA's expert claim labels into a rating pack (in memory; nothing is written).

    Layout of the pack (rubric ``expertqa``, component ``claim``):

    * **Case** = one question of the domain (``case_id = expertqa_case_id(question)``); its
      text is the question, then the whole answer under review (each question has one answer in
      the random split), so the judge reads every claim in the context of its answer. The
      answering system is not shown to the judge.
    * **Target** = one claim (``claim_string``) of that answer, ``<case_id>-a<system>-c<NN>``
      (claim number in the answer, 2 digits); ``model`` = the system (``gpt4``, ``bing_chat``,
      ``rr_gs_gpt4`` ...). A claim without text
      cannot be judged: it is skipped and counted in the description, with its labels.
    * **Ratings**: one rater per answer (its ``annotator_id``) on ``correctness`` (Definitely
      incorrect 0, Likely incorrect 1, Probably correct 2, Definitely correct 3),
      ``informativeness`` (Uninformative 0, Not too important 1, A bit relevant 2, Very
      relevant 3) and ``worthiness`` (No 0, Yes 1). ``Unsure`` is *not evaluable* (the expert
      did not know, which says nothing about a middle degree of correctness). A missing
      (null) label is skipped and counted per criterion. When the expert revised a claim, the
      revision is kept as the comment of its correctness rating (it shows what the expert
      thought wrong); it is never shown to the judge. ``support`` and ``reliability`` are not
      imported: they rate the cited evidence and its web sources, which a pack does not
      carry, and their ``Missing`` / ``N/A`` say that no citation was given rather than
      rate the claim. ``usefulness`` (of the whole answer) and ``reason_missing_support`` are
      not imported either.

    Args:
        src: The folder holding ``rand_test.jsonl`` and ``rand_val.jsonl``.
        domain: ``medicine`` (= ``metadata.field`` ``Healthcare / Medicine``) or any exact field.
        name: Pack name (default ``expertqa-<domain>``).
        prompts_root: Where to look the ``expertqa`` rubric up first (then the shipped rubrics).

    Raises:
        PackError: A file is missing or malformed, the domain is unknown (the message lists the
            fields present), or a label is unknown (named by file, line, answer, claim and field).
        RubricError: The ``expertqa`` rubric cannot be loaded.
    """
    folder = Path(src)
    folder = folder.parent if folder.is_file() else folder
    missing = [n for n in EXPERTQA_FILES if not (folder / n).is_file()]
    if missing:
        raise PackError(f"{folder}: ExpertQA file(s) {missing} not found. Pass the folder holding {list(EXPERTQA_FILES)} "
                        "(ExpertQA repository, data/lfqa/).")
    problems = Problems(f"cannot import ExpertQA from {folder}", PackError, MAX_REPORTED_PROBLEMS)
    lines = _read_lines(folder, problems)
    problems.raise_if_any()
    field = _domain_field(domain, {str(r["metadata"].get("field")) for _, _, r in lines})
    selected = [(n, i, r) for n, i, r in lines if r["metadata"].get("field") == field]
    counts = {"claims": 0, "claims_without_text": 0}
    records = [rec for n, i, r in selected for rec in _claim_rows(n, i, r, problems, counts)]
    problems.raise_if_any()
    import pandas as pd

    frame = pd.DataFrame.from_records(records)
    where = [rec.pop("_where") for rec in records]
    frame = frame.drop(columns="_where") if "_where" in frame else frame
    slug = re.sub(r"[^a-z0-9]+", "-", domain.lower()).strip("-") or "domain"
    columns = {f"criterion:{c}": c for c in EXPERTQA_LABEL_SCORES} | {"comment:correctness": "correctness_comment"}
    result = import_frame(
        frame, rubric=EXPERTQA_RUBRIC_ID, name=name or f"expertqa-{slug}", columns=columns, layout="wide",
        not_evaluable=EXPERTQA_NOT_EVALUABLE, score_map=EXPERTQA_LABEL_SCORES, skip_empty=True,
        prompts_root=prompts_root, source=EXPERTQA_CITATION, importer=EXPERTQA_IMPORTER,
        source_sha256={n: sha256_file(folder / n) for n in EXPERTQA_FILES}, locations=where,
        heading=f"cannot import ExpertQA from {folder}",
    )
    c, pack = result.counts, result.pack
    n_revised = sum(1 for r in pack.ratings if r.criterion == "correctness" and r.comment)
    description = (
        f"ExpertQA, field {field!r}: {len(selected)} questions (cases) with {counts['claims']} claims, "
        f"{counts['claims_without_text']} of them without text (skipped); {c.n_targets} claims (targets) rated by "
        f"{len(result.pack.raters)} experts, one per answer (no physician-vs-physician ceiling can be computed). "
        f"{c.n_cells} label cells: {c.n_scored} scores, {c.n_not_evaluable} 'Unsure' (not evaluable), "
        f"{c.n_skipped_empty} missing labels skipped ("
        + (", ".join(f"{k}: {v}" for k, v in c.skipped_by_criterion.items()) or "none")
        + f"); {n_revised} claim revisions by the expert kept as the correctness comment."
    )
    return RatingPack(path=None, manifest=pack.manifest.model_copy(update={"description": description}),
                      cases=pack.cases, targets=pack.targets, ratings=pack.ratings)
