"""Clinician ratings of OpenTumorBoard answers as a rating pack, so ``evolve calibrate`` can
calibrate the OpenTumorBoard judge (rubric ``otb``: clinical equivalence 1-5 and the critical-
error and unsupported-claim flags 0/1 for a turn answer; conclusion alignment 1-5 for a board
conclusion).

Input: an OpenTumorBoard run folder (the answers) and a long CSV, one rating per row, with the
columns ``item_id`` (``qa_id`` or ``simulation_id``), ``model``, ``rater_id``, ``criterion``,
``score`` (an integer on the criterion's scale, or ``not_evaluable``) and ``comment``.

Each rated item becomes a case (``case_id`` = the item id; text = the case summary and slide
descriptions; reference = the specialist's answer or the board's conclusion, shown to the judge
as the rubric allows) and each rated answer a target (``<item id>:<model slug>``; a turn
target shows the question with the answer). Splits of such a pack keep an item's answers
together, but two questions about the same recorded patient may fall on both sides.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target
from evolve.errors import DataError, Problems
from evolve.otb._config import OTB_RUBRIC_ID
from evolve.otb._judging import load_otb_config
from evolve.otb._records import BoardCase, TurnQuestion
from evolve.otb._runner import load_otb_items, read_responses
from evolve.rubric import load_rubric
from evolve.runs import OtbFolder, model_slug

__all__ = ["OTB_RATING_COLUMNS", "OTB_RUBRIC_ID", "otb_rating_pack"]

OTB_RATING_COLUMNS = ["item_id", "model", "rater_id", "criterion", "score", "comment"]
_COMPONENT = {"board": "board_conclusion", "turn": "turn_answer"}


def _case(item: BoardCase | TurnQuestion) -> Case:
    v = item.generation_view()
    text = f"CASE SUMMARY:\n{v['case_summary']}\n\nSLIDE DESCRIPTIONS:\n{v['slides']}"
    if isinstance(item, BoardCase):
        return Case(case_id=item.simulation_id, title=f"Tumor board, case {item.case_id}", text=text,
                    reference_answer=item.reference_conclusion, source=f"OpenTumorBoard {item.simulation_id}")
    return Case(case_id=item.qa_id, title=f"Question to the {item.target_specialist_role} ({item.qa_type})", text=text,
                reference_answer=item.reference_answer, source=f"OpenTumorBoard {item.qa_id}")


def _target(task: str, item: BoardCase | TurnQuestion, model: str, answer: str) -> Target:
    text = answer if isinstance(item, BoardCase) else (
        f"Question to the {item.target_specialist_role}: {item.question}\n\nAnswer: {answer}")
    return Target(target_id=f"{item.item_id}:{model_slug(model)}", case_id=item.item_id, component=_COMPONENT[task],
                  text=text, model=model, condition=getattr(item, "qa_type", "board"))


def _answers(run_dir: Path) -> dict[tuple[str, str], tuple[str, BoardCase | TurnQuestion, str]]:
    """``(item id, model) -> (task, item, extracted answer)`` for every usable answer of the run."""
    folder, config = OtbFolder(run_dir), load_otb_config(run_dir)
    items = {t: {it.item_id: it for it in records} for t, records in load_otb_items(config).items()}
    out: dict[tuple[str, str], tuple[str, BoardCase | TurnQuestion, str]] = {}
    for task, by_id in items.items():
        for model in config.models:
            for r in read_responses(folder.responses(task, model)):
                item_id = str(r.get("simulation_id") or r.get("qa_id"))
                if not r.get("malformed") and item_id in by_id:
                    out[(item_id, model)] = (task, by_id[item_id], r["extracted_final_response"])
    return out


def _read_ratings(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{path}: not a readable CSV ({exc}). Save the ratings as UTF-8 CSV with the columns "
                        f"{OTB_RATING_COLUMNS}.") from exc
    missing = [c for c in OTB_RATING_COLUMNS if c not in frame.columns and c != "comment"]
    if missing:
        raise DataError(f"{path}: no column(s) {missing}; the ratings need {OTB_RATING_COLUMNS} (comment may be empty).")
    if "comment" not in frame.columns:
        frame["comment"] = ""
    return frame


def otb_rating_pack(run_dir: Path | str, ratings_csv: Path | str, *, name: str,
                    prompts_root: Path | str | None = None) -> RatingPack:
    """A rating pack of the rated answers of an OpenTumorBoard run (see the module docstring).

    Args:
        run_dir: The run whose answers were rated.
        ratings_csv: The ratings, columns :data:`OTB_RATING_COLUMNS`.
        name: The pack's name.
        prompts_root: Where rubric ``otb`` is looked up before the shipped rubrics (None =
            ``EVOLVE_PROMPTS_ROOT`` if set, else the shipped one).

    Raises:
        RunError: Not an OpenTumorBoard run folder.
        DataError: Unreadable CSV or missing columns; rows naming an item or model without an
            answer, an unknown criterion, a criterion that does not apply to the answer, or a
            score off the criterion's scale - every row listed with its line and the fix.
    """
    run_dir, ratings_csv = Path(run_dir), Path(ratings_csv)
    rubric = load_rubric(OTB_RUBRIC_ID, root=prompts_root)
    criteria = {c.criterion_id: c for c in rubric.criteria}
    answers = _answers(run_dir)
    frame = _read_ratings(ratings_csv)
    problems = Problems(f"{ratings_csv}: ratings that cannot be used", DataError)
    cases: dict[str, Case] = {}
    targets: dict[str, Target] = {}
    ratings: list[Rating] = []
    for i, row in frame.iterrows():
        where = f"{ratings_csv.name} line {int(str(i)) + 2}"
        found = answers.get((row["item_id"], row["model"]))
        crit = criteria.get(row["criterion"])
        if found is None:
            problems.add(where, f"no usable answer of model {row['model']!r} to item {row['item_id']!r} in {run_dir}",
                         "Rate answers of this run (malformed answers cannot be rated).")
            continue
        task, item, answer = found
        if crit is None:
            problems.add(where, f"criterion {row['criterion']!r} is not in rubric {OTB_RUBRIC_ID!r}", f"Use one of {sorted(criteria)}.")
            continue
        if _COMPONENT[task] not in crit.components:
            problems.add(where, f"criterion {crit.criterion_id!r} does not apply to a {task} answer",
                         f"Rate {task} answers on {[c for c, k in criteria.items() if _COMPONENT[task] in k.components]}.")
            continue
        raw = row["score"].strip()
        if raw.lower() in ("not_evaluable", "n/a", "ne"):
            score, not_evaluable = None, True
        elif raw.lstrip("-").isdigit() and crit.scale_min <= int(raw) <= crit.scale_max:
            score, not_evaluable = int(raw), False
        else:
            problems.add(where, f"score {raw!r} is not an integer {crit.scale_min}-{crit.scale_max} or 'not_evaluable'",
                         "Fix the score.")
            continue
        target = _target(task, item, row["model"], answer)
        cases.setdefault(item.item_id, _case(item))
        targets.setdefault(target.target_id, target)
        ratings.append(Rating(case_id=item.item_id, target_id=target.target_id, rater_id=row["rater_id"],
                              criterion=crit.criterion_id, score=score, not_evaluable=not_evaluable,
                              comment=row["comment"]))
    if not ratings and not problems:
        problems.add(ratings_csv.name, "no ratings", "Add at least one rating row.")
    problems.raise_if_any()
    manifest = PackManifest(name=name, rubric=RubricRef(id=rubric.id, version=rubric.version),
                            description=f"Clinician ratings of the OpenTumorBoard answers of {run_dir.name}.",
                            source=f"{ratings_csv.name} on run {run_dir.name}", importer="evolve.otb.otb_rating_pack")
    return RatingPack(path=None, manifest=manifest, cases=tuple(cases.values()), targets=tuple(targets.values()), ratings=tuple(ratings))
