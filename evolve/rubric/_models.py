"""Pydantic records of a rubric: criteria, their score anchors and applicability."""

from __future__ import annotations

from pydantic import Field, model_validator

from evolve.records import Record


class Criterion(Record):
    """One rubric criterion on an integer ordinal scale.

    Attributes:
        criterion_id: Identifier used in ratings (``ratings.csv: criterion``).
        name: Short name shown to the judge.
        definition: What the criterion measures, in the rubric's own words.
        anchors: One description per score on the scale, keyed by the score as a string
            (``{"0": ..., "1": ..., ...}``); keys must cover ``scale_min..scale_max`` exactly.
        scale_min: Lowest score (inclusive).
        scale_max: Highest score (inclusive).
        higher_is_better: False for error counts (Savage 2024: 0 errors is best).
        components: Target components the criterion applies to; a (criterion, component)
            pair outside this set is structurally inapplicable and never judged.
        applicability: When the judge may answer ``not_evaluable`` (the applicability rule).
        show_reference: Show the case's reference answer to the judge for this criterion
            (consilium paper, judge calls: only the conclusion criterion sees the reference diagnosis).
        evolve: Whether guidance is evolved for this criterion (consilium paper, rubric: consilium criteria
            1-9; case complexity is judged but not evolved).
        number: The criterion's number in its source rubric (the paper's 1-11), for tables.
        judged: False for physician-only criteria the judge never scores (the consilium's
            criterion 11, overall quality); such criteria are never evolved either.
        allow_not_evaluable: Whether a rater or the judge may mark the criterion not
            evaluable; when False the judge's output schema offers only numeric scores and
            a workbook cell must hold a number.
    """

    criterion_id: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    name: str
    definition: str
    anchors: dict[str, str]
    scale_min: int = 0
    scale_max: int = 3
    higher_is_better: bool = True
    components: tuple[str, ...]
    applicability: str = ""
    show_reference: bool = False
    evolve: bool = True
    number: int | None = Field(default=None, ge=1)
    judged: bool = True
    allow_not_evaluable: bool = True

    @model_validator(mode="after")
    def _anchors_cover_scale(self) -> Criterion:
        if self.evolve and not self.judged:
            raise ValueError("a criterion the judge never scores (judged: false) cannot be evolved; set evolve: false")
        if self.scale_max <= self.scale_min:
            raise ValueError("scale_max must be greater than scale_min")
        expected = {str(s) for s in range(self.scale_min, self.scale_max + 1)}
        if set(self.anchors) != expected:
            raise ValueError(
                f"anchors must have exactly the keys {sorted(expected)}, got {sorted(self.anchors)}"
            )
        return self

    @property
    def scores(self) -> tuple[int, ...]:
        """All valid integer scores, ascending."""
        return tuple(range(self.scale_min, self.scale_max + 1))

    @property
    def scale_range(self) -> int:
        """``scale_max - scale_min`` (the largest possible absolute error)."""
        return self.scale_max - self.scale_min


class Rubric(Record):
    """A versioned rubric (``judge_prompts/<id>/rubric.json``).

    Attributes:
        id: Rubric id, e.g. ``kqa-entailment``.
        version: Version string; every judge score records it.
        title: Human-readable title.
        components: All components the rubric knows, with a one-line description each.
        criteria: The criteria, in display order.
    """

    id: str
    version: str
    title: str = ""
    components: dict[str, str]
    criteria: tuple[Criterion, ...]

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        ids = [c.criterion_id for c in self.criteria]
        if len(ids) != len(set(ids)):
            raise ValueError("criterion ids must be unique")
        numbers = [c.number for c in self.criteria if c.number is not None]
        if len(numbers) != len(set(numbers)):
            raise ValueError("criterion numbers must be unique")
        for c in self.criteria:
            unknown = set(c.components) - set(self.components)
            if unknown:
                raise ValueError(
                    f"criterion {c.criterion_id!r} names unknown components {sorted(unknown)}; "
                    f"declare them under 'components'"
                )
        return self

    def criterion(self, criterion_id: str) -> Criterion:
        """Return the criterion with this id.

        Raises:
            KeyError: No such criterion.
        """
        for c in self.criteria:
            if c.criterion_id == criterion_id:
                return c
        raise KeyError(criterion_id)

    def applies(self, criterion_id: str, component: str) -> bool:
        """Whether the judge scores ``criterion_id`` on ``component`` (consilium paper, rubric applicability).

        False for structurally inapplicable pairs and for physician-only criteria.

        Raises:
            KeyError: No such criterion.
        """
        crit = self.criterion(criterion_id)
        return crit.judged and component in crit.components

    def matrix(self) -> dict[str, dict[str, bool]]:
        """Applicability matrix ``{criterion_id: {component: judged?}}`` over all components."""
        return {c.criterion_id: {k: self.applies(c.criterion_id, k) for k in self.components} for c in self.criteria}
