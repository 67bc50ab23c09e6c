"""Pydantic records of a rating pack: cases, targets, ratings and the pack manifest."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, field_validator, model_validator

from evolve.records import Record

PACK_FORMAT_VERSION: Final = 1
"""Version of the on-disk rating-pack format written by this toolkit (``pack.json: version``)."""

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/\-]*$"


class Case(Record):
    """One clinical case: the grouping unit for splits (all its targets stay on one side).

    Attributes:
        case_id: Stable identifier, e.g. a DOI (``10.1056/NEJMcpc2300900``) or ``kqa-3f2a9c1b``.
        title: Short human-readable title (may be empty).
        text: The case as the judge sees it (vignette, patient question ...).
        reference_answer: Gold answer or physician reference; shown to the judge only for
            criteria whose rubric entry sets ``show_reference``.
        source: Where the case came from (free text, e.g. ``K-QA row 12``).
    """

    case_id: str = Field(pattern=_ID_PATTERN)
    title: str = ""
    text: str = Field(min_length=1)
    reference_answer: str | None = None
    source: str = ""


class Target(Record):
    """One piece of LLM-written text that physicians rated (the thing the judge scores).

    Attributes:
        target_id: Unique within the pack.
        case_id: The case it answers; must exist in ``cases.jsonl``.
        component: Which part of the output this is, e.g. ``answer``, ``rationale``,
            ``reasoning``, ``opinion``, ``final`` (must be a component of the rubric).
        role: Clinical role that wrote it, if any (consilium roles); empty otherwise.
        text: The text to judge.
        statement: Optional gold statement the text is judged against (K-QA: one physician
            must-have/nice-to-have statement per target).
        model: The producing model, e.g. ``gpt4``.
        condition: Producing condition (prompt style, response format ...).
    """

    target_id: str = Field(pattern=_ID_PATTERN)
    case_id: str = Field(pattern=_ID_PATTERN)
    component: str = Field(min_length=1)
    role: str = ""
    text: str = Field(min_length=1)
    statement: str | None = None
    model: str = ""
    condition: str = ""


class Rating(Record):
    """One rater's rating of one target on one criterion (one row of ``ratings.csv``).

    Exactly one of ``score`` or ``not_evaluable=True`` is set.

    Attributes:
        case_id: Case of the target (redundant with the target, checked for consistency).
        target_id: The rated target.
        rater_id: Pseudonymous rater identifier, e.g. ``physician-1``.
        criterion: Criterion id from the pack's rubric.
        score: Integer on the criterion's scale, or ``None`` when not evaluable.
        not_evaluable: The rater marked the item as not evaluable.
        comment: The rater's free-text comment (kept; shown to the mutation LLM).
    """

    case_id: str = Field(pattern=_ID_PATTERN)
    target_id: str = Field(pattern=_ID_PATTERN)
    rater_id: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    score: int | None = None
    not_evaluable: bool = False
    comment: str = ""

    @model_validator(mode="after")
    def _score_xor_not_evaluable(self) -> Rating:
        if self.not_evaluable and self.score is not None:
            raise ValueError("set either score or not_evaluable, not both")
        if not self.not_evaluable and self.score is None:
            raise ValueError("score is empty; give an integer score or mark not_evaluable=true")
        return self


class RubricRef(Record):
    """Which rubric under ``judge_prompts/`` a pack's criteria refer to."""

    id: str = Field(pattern=_ID_PATTERN)
    version: str = Field(min_length=1)


class PackManifest(Record):
    """``pack.json``: identity and provenance of a rating pack.

    Attributes:
        version: On-disk format version (currently 1).
        name: Short pack name, e.g. ``kqa``.
        description: One paragraph for humans.
        rubric: The rubric (id and version) every rating's criterion belongs to.
        source: Citation / provenance of the underlying data.
        importer: Which importer (and its version) wrote the pack, if any.
        source_sha256: Checksums of the imported source files, keyed by file name.
    """

    version: Literal[1] = PACK_FORMAT_VERSION
    name: str = Field(pattern=_ID_PATTERN)
    description: str = ""
    rubric: RubricRef
    source: str = ""
    importer: str = ""
    source_sha256: dict[str, str] = Field(default_factory=dict)

    @field_validator("source_sha256")
    @classmethod
    def _hex(cls, value: dict[str, str]) -> dict[str, str]:
        for name, digest in value.items():
            if len(digest) != 64:
                raise ValueError(f"sha256 of {name!r} must have 64 hex digits")
        return value
