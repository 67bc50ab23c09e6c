"""Importer for the physician error counts of GPT-4 diagnostic-reasoning rationales (Savage et al. 2024)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evolve.data._models import Case, PackManifest, Rating, RubricRef, Target
from evolve.data._pack import RatingPack, _Problems, validate_pack
from evolve.data._util import is_missing, read_source_table, rubric_version, sha256_file, shorten
from evolve.errors import PackError

__all__ = ["SAVAGE_FILE", "SAVAGE_RUBRIC_ID", "import_savage", "savage_swapped_case_ids"]

SAVAGE_FILE = "41746_2024_1010_MOESM9_ESM.xlsx"
SAVAGE_RUBRIC_ID = "savage-rationale-errors"
SAVAGE_CRITERION = "rationale_errors"
SAVAGE_COMPONENT = "rationale"
SAVAGE_MODEL = "gpt-4"
SAVAGE_IMPORTER = "evolve.data.import_savage/1"
SAVAGE_MAX_SCORE = 3
SAVAGE_CITATION = (
    "Savage T., Nayak A., Gallo R., Rangan E., Chen J.H., 'Diagnostic reasoning prompts reveal the "
    "potential for large language model interpretability in medicine', npj Digital Medicine 7, 20 "
    "(2024), doi:10.1038/s41746-024-01010-1, Supplementary Data 5; CC BY 4.0. Vignettes are MedQA "
    "questions (Jin et al. 2021, MIT)."
)
_SWAP_NOTE = "source columns 'Model answer' and 'rationale' were swapped; swapped back on import"


def _norm(header: Any) -> str:
    """Header key: lower case with every whitespace character removed."""
    return re.sub(r"\s+", "", str(header)).lower()


# normalised header -> role
_COLUMNS = {
    "index": "index",
    "question": "question",
    "answer": "answer",
    "promptstyle": "prompt_style",
    "modelanswer": "model_answer",
    "rationale": "rationale",
    "reviewer#1numberoferrors": "count_1",
    "explainingtheerrorsfound": "comment_1",
    "reviewer#2numberoferrors": "count_2",
    "explainingtheerrorsfound.1": "comment_2",
}


def _text(value: Any) -> str:
    return "" if is_missing(value) else str(value).strip()


def _count(value: Any) -> int | None:
    """Parse an error count; ``None`` if it is not a non-negative whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            return None
    if math.isnan(number) or number < 0 or number != int(number):
        return None
    return int(number)


def savage_swapped_case_ids(pack: RatingPack) -> tuple[str, ...]:
    """Case ids of a Savage pack whose answer/rationale columns were swapped in the source.

    The importer records the swap in each such case's ``source`` text.
    """
    return tuple(c.case_id for c in pack.cases if _SWAP_NOTE in c.source)


@dataclass
class _SavageRows:
    """The spreadsheet rows read so far: one case, target and two ratings per vignette."""

    path: Path
    by_role: dict[str, str]
    problems: _Problems
    cases: list[Case] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    ratings: list[Rating] = field(default_factory=list)
    seen: dict[int, int] = field(default_factory=dict)
    n_swapped: int = 0

    def add(self, row: dict, rowno: int) -> None:
        """Read one row (``rowno`` as a spreadsheet shows it); problems go to ``self.problems``."""
        path, by_role, problems = self.path, self.by_role, self.problems
        raw_index = row[by_role["index"]]
        if is_missing(raw_index):
            return  # the summary block below the data
        index = _count(raw_index)
        if index is None:
            problems.add_at(
                path.name, f"row {rowno}", by_role["index"], f"index {raw_index!r} is not a whole number",
                "Use the original spreadsheet.",
            )
            return
        if index in self.seen:
            problems.add_at(
                path.name, f"row {rowno}", by_role["index"], f"index {index} repeats row {self.seen[index]}",
                "Use the original spreadsheet; each vignette appears once.",
            )
            return
        self.seen[index] = rowno
        case_id = f"savage-{index}"
        target_id = f"{case_id}-dr"

        answer_text, rationale_text = _text(row[by_role["model_answer"]]), _text(row[by_role["rationale"]])
        swapped = len(answer_text) > len(rationale_text)
        if swapped:
            answer_text, rationale_text = rationale_text, answer_text
            self.n_swapped += 1
        question = _text(row[by_role["question"]])
        source = f"Savage et al. 2024 Supplementary Data 5, MedQA index {index} (spreadsheet row {rowno})"
        if swapped:
            source += f"; {_SWAP_NOTE}"
        try:
            self.cases.append(
                Case(
                    case_id=case_id,
                    title=shorten(question),
                    text=question,
                    reference_answer=_text(row[by_role["answer"]]) or None,
                    source=source,
                )
            )
            self.targets.append(
                Target(
                    target_id=target_id,
                    case_id=case_id,
                    component=SAVAGE_COMPONENT,
                    text=f"Final answer: {answer_text}\n\nRationale:\n{rationale_text}",
                    model=SAVAGE_MODEL,
                    condition=_text(row[by_role["prompt_style"]]),
                )
            )
        except ValidationError as exc:
            for err in exc.errors():
                problems.add_at(
                    path.name, f"row {rowno}", by_role["question"] if err["loc"][0] == "text" else str(err["loc"][0]),
                    err["msg"], "Use the original spreadsheet.",
                )
            return

        for k in (1, 2):
            column = by_role[f"count_{k}"]
            count = _count(row[column])
            if count is None:
                problems.add_at(
                    path.name, f"row {rowno}", column,
                    f"error count {row[column]!r} is not a non-negative whole number",
                    "Correct the count in the spreadsheet (0, 1, 2, ...).",
                )
                continue
            self.ratings.append(
                Rating(
                    case_id=case_id,
                    target_id=target_id,
                    rater_id=f"savage-reviewer-{k}",
                    criterion=SAVAGE_CRITERION,
                    score=min(count, SAVAGE_MAX_SCORE),
                    comment=_text(row[by_role[f"comment_{k}"]]),
                )
            )


def import_savage(src: Path | str, *, prompts_root: Path | str | None = None) -> RatingPack:
    """Turn Savage et al. 2024 Supplementary Data 5 into a rating pack (in memory; nothing is written).

    Layout of the pack:

    * Rows whose ``index`` is empty (the authors' summary block at the bottom) are dropped.
    * **Case** = one MedQA vignette: ``case_id = savage-<index>``, ``text`` = ``question``,
      ``reference_answer`` = ``answer`` (gold diagnosis), ``title`` = first ~80 characters.
    * **Target** = GPT-4's output for it: ``target_id = savage-<index>-dr``, component
      ``rationale``, model ``gpt-4``, condition = ``Prompt Style`` (``DR``); text is
      ``"Final answer: <model answer>\\n\\nRationale:\\n<rationale>"``.
      In some rows of the source the two columns are swapped (the long reasoning sits in
      ``Model answer``). The longer of the two is taken as the rationale; each swapped case
      says so in its ``source`` and the manifest description gives the count
      (see also :func:`savage_swapped_case_ids`).
    * **Ratings**: raters ``savage-reviewer-1`` / ``savage-reviewer-2`` from the two
      ``Number of errors`` columns (headers are matched ignoring case and whitespace, since
      the second lacks a space), criterion ``rationale_errors``, comment = the matching
      ``Explaining the errors found`` column (empty cell -> ``""``). The rubric scale is
      0..3 with 3 meaning "three or more", so **a count above 3 is stored as 3**.
    * The ``Correct?`` column (answer matched gold) is not imported.

    Args:
        src: The ``.xlsx`` file, or the folder holding ``41746_2024_1010_MOESM9_ESM.xlsx``.
        prompts_root: ``judge_prompts`` folder to read the rubric version from.

    Raises:
        PackError: Missing file or column, duplicate index, empty text, or an error count that
            is not a non-negative whole number (the message names the spreadsheet row, header
            = row 1, and the column).
        RubricError: The ``savage-rationale-errors`` rubric cannot be loaded.
    """
    src = Path(src)
    path = src if src.is_file() else src / SAVAGE_FILE
    if not path.is_file():
        raise PackError(
            f"{path}: Savage et al. 2024 ratings file not found. Pass the .xlsx file (Supplementary "
            f"Data 5) or the folder holding {SAVAGE_FILE}."
        )
    problems = _Problems(str(path), heading="cannot import Savage et al. 2024 from {where}")
    frame = read_source_table(path, "the original Supplementary Data 5 spreadsheet (.xlsx)")
    by_role: dict[str, str] = {}
    for column in frame.columns:
        role = _COLUMNS.get(_norm(column))
        if role is not None and role not in by_role:
            by_role[role] = column
    missing = [key for key, role in _COLUMNS.items() if role not in by_role]
    if missing:
        problems.add_at(
            path.name, "row 1", "header",
            f"missing column(s) {missing} (compared ignoring case and whitespace); found {list(frame.columns)}",
            "Use the original Supplementary Data 5 spreadsheet.",
        )
        problems.raise_if_any()

    rows = _SavageRows(path=path, by_role=by_role, problems=problems)
    for i, row in enumerate(frame.to_dict("records")):
        rows.add(row, rowno=i + 2)  # spreadsheet row: header is row 1
    problems.raise_if_any()
    cases, targets, ratings, n_swapped = rows.cases, rows.targets, rows.ratings, rows.n_swapped

    manifest = PackManifest(
        name="savage",
        description=(
            f"Savage et al. 2024 physician review of GPT-4 diagnostic-reasoning (DR prompt) rationales: "
            f"{len(cases)} MedQA vignettes (cases), one GPT-4 answer+rationale each (targets), "
            f"{len(ratings)} error counts from 2 physicians on '{SAVAGE_CRITERION}' (0..3, 3 = three or "
            f"more). In {n_swapped} of {len(cases)} rows the source had 'Model answer' and 'rationale' "
            f"swapped; the importer detected them by length and swapped them back."
        ),
        rubric=RubricRef(id=SAVAGE_RUBRIC_ID, version=rubric_version(SAVAGE_RUBRIC_ID, prompts_root)),
        source=SAVAGE_CITATION,
        importer=SAVAGE_IMPORTER,
        source_sha256={path.name: sha256_file(path)},
    )
    pack = RatingPack(path=None, manifest=manifest, cases=tuple(cases), targets=tuple(targets), ratings=tuple(ratings))
    validate_pack(pack, prompts_root=prompts_root)
    return pack
