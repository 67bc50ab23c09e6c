"""Pydantic records of a semantic-drift audit (``audit.json``); a stable, versioned format."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from evolve.records import Record
from evolve.rubric import MAX_GUIDANCE_CHARS

AUDIT_VERSION: Final = 1
"""Format version of ``audit.json``; bumped on any incompatible change of :class:`AuditResult`."""

DRIFT_RATIONALE_MAX_CHARS = 400
"""``maxLength`` of the LLM check's rationale (bounds generation so its JSON always closes)."""

Flag = Literal["ok", "review", "drift"]


class DriftThresholds(Record):
    """The numbers of the drift flag rule (see :mod:`evolve.audit` for the rule itself).

    Attributes:
        tfidf_criterion_min: A guidance whose TF-IDF cosine similarity to the criterion text
            is below this is lexically far from the criterion.
        tfidf_criterion_relative: ... and so is one below this fraction of its reference
            initial prompt's similarity to the criterion text.
        key_term_ratio_min: Lexical key-term loss: the guidance contains fewer than this
            fraction of the number of the criterion's key terms its reference initial prompt
            contains (or none at all, when the reference contains none either).
        embedding_drop_review: With embeddings, a guidance whose embedding similarity to the
            criterion text is lower than its reference initial prompt's by more than this is
            marked for review. Embedding cosines depend on the embedding model, so the rule
            compares with the reference instead of using an absolute floor.
        n_key_terms: How many key terms a criterion gets.
    """

    tfidf_criterion_min: float = Field(default=0.05, ge=0.0, le=1.0)
    tfidf_criterion_relative: float = Field(default=0.5, ge=0.0, le=1.0)
    key_term_ratio_min: float = Field(default=0.5, ge=0.0, le=1.0)
    embedding_drop_review: float = Field(default=0.15, ge=0.0, le=2.0)
    n_key_terms: int = Field(default=8, ge=1, le=50)


class DriftVerdict(Record):
    """The LLM check's answer; its JSON schema is the ``response_format`` of the call.

    Attributes:
        rationale: Why, in a few sentences (written first, before the verdict fields).
        about_criterion: The guidance still tells the judge how to grade this criterion.
        contradicts_protocol: Some instruction of the guidance conflicts with the protocol.
        drift: ``none``, ``minor`` (partly about something else or narrowing the criterion) or
            ``major`` (mainly about something else, or dictating scores).
    """

    rationale: str = Field(max_length=DRIFT_RATIONALE_MAX_CHARS)
    about_criterion: bool
    contradicts_protocol: bool
    drift: Literal["none", "minor", "major"]


class DriftCheck(Record):
    """Outcome of the LLM check of one guidance text.

    Attributes:
        status: ``ok`` (a valid verdict), ``model_failure`` (endpoint error, output cut by
            the token limit or not matching the schema: drift is *not* ruled out) or
            ``skipped`` (``--no-llm``).
        verdict: The verdict when ``status == "ok"``.
        error: Why the call failed, for ``model_failure``.
        cached: Served from the response cache.
        prompt_tokens: Input tokens.
        completion_tokens: Output tokens.
    """

    status: Literal["ok", "model_failure", "skipped"]
    verdict: DriftVerdict | None = None
    error: str = ""
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Similarities(Record):
    """Cosine similarities of one guidance text (TF-IDF or embedding vectors).

    Attributes:
        criterion: To the criterion text (name, definition and score anchors).
        initials: To each initial prompt of the criterion, by candidate id (1.0 to itself).
        reference: To the reference initial prompt (see :class:`CandidateAudit`).
        max_initial: The largest of ``initials``.
        reference_criterion: The reference initial prompt's own similarity to the criterion
            text (what ``criterion`` is compared with).
    """

    criterion: float
    initials: dict[str, float]
    reference: float | None = None
    max_initial: float | None = None
    reference_criterion: float | None = None


class KeyTermCheck(Record):
    """Which of the criterion's key terms a guidance text contains.

    Attributes:
        terms: The criterion's key terms (see :func:`evolve.audit.key_terms`).
        present: Key terms found in the guidance.
        reference_present: Key terms found in the reference initial prompt.
        kept: In both.
        lost: In the reference initial prompt, not in the guidance.
        gained: In the guidance, not in the reference initial prompt.
        ratio: ``len(present) / len(reference_present)``; None when the reference has none.
    """

    terms: tuple[str, ...]
    present: tuple[str, ...]
    reference_present: tuple[str, ...]
    kept: tuple[str, ...]
    lost: tuple[str, ...]
    gained: tuple[str, ...]
    ratio: float | None = None


class CandidateAudit(Record):
    """The audit of one guidance candidate (a winner, or an initial prompt as reference).

    Attributes:
        candidate_id: As in ``candidates.csv``.
        criterion: Criterion id.
        origin: ``initial`` or ``mutation``.
        role: ``winner`` (the selected candidate) or ``initial`` (a reference row).
        selected: Whether this candidate won its criterion.
        parent_id: Its parent in ``candidates.csv`` (empty for initial prompts).
        reference_id: The initial prompt it is compared with.
        reference_rule: How that was chosen: ``self`` (it is an initial prompt), ``ancestor``
            (the initial prompt its mutation lineage starts from), ``best_train_mae`` (lineage
            unknown: the initial prompt with the lowest training MAE) or ``first_initial``.
        length: Characters.
        length_limit: The guidance limit (800).
        length_change: ``length`` minus the reference's length, characters.
        train_mae: Training MAE from ``candidates.csv`` (None if missing).
        tfidf: TF-IDF cosine similarities.
        embedding: Embedding cosine similarities; None when embeddings were unavailable or off.
        key_terms: Key terms kept and lost.
        llm: The LLM check.
        flag: ``ok``, ``review`` or ``drift`` (the rule is in :mod:`evolve.audit`).
        reasons: Why the flag is not ``ok``, one sentence each.
        note: Anything else worth knowing (e.g. a winner that is an initial prompt).
        text: The guidance text.
    """

    candidate_id: str
    criterion: str
    origin: Literal["initial", "mutation"]
    role: Literal["winner", "initial"]
    selected: bool
    parent_id: str = ""
    reference_id: str
    reference_rule: Literal["self", "ancestor", "best_train_mae", "first_initial"]
    length: int
    length_limit: int = MAX_GUIDANCE_CHARS
    length_change: int
    train_mae: float | None = None
    tfidf: Similarities
    embedding: Similarities | None = None
    key_terms: KeyTermCheck
    llm: DriftCheck
    flag: Flag
    reasons: tuple[str, ...] = ()
    note: str = ""
    text: str


class CriterionAudit(Record):
    """The audit of one criterion of the run.

    Attributes:
        criterion: Criterion id (the key the report reads, with ``flag``).
        number: Its number in the source rubric, if any.
        name: Its name.
        key_terms: Its key terms.
        winner: The winner's audit; None when ``candidates.csv`` marks no winner.
        initials: Every initial prompt's audit (the reference rows), in file order.
        flag: The winner's flag, or ``no_winner``.
    """

    criterion: str
    number: int | None = None
    name: str
    key_terms: tuple[str, ...]
    winner: CandidateAudit | None
    initials: tuple[CandidateAudit, ...]
    flag: Literal["ok", "review", "drift", "no_winner"]


class AuditResult(Record):
    """``audit.json``: the semantic-drift audit of one run (read by the report).

    Attributes:
        version: Format version (:data:`AUDIT_VERSION`).
        run_id: The run folder's name.
        rubric_id: Rubric id.
        rubric_version: Rubric version.
        created: When the audit ran, ISO 8601 UTC.
        endpoint_id: The endpoint's identity (base URL or embedded model id); None when no
            model was asked.
        llm_model: Model id of the LLM check; None when skipped.
        llm_status: ``used`` or ``skipped (<why>)``.
        embedding_model: Model id sent to ``/v1/embeddings``; None when not tried.
        embeddings_status: ``available``, ``unavailable (<reason>)`` or ``skipped (<why>)``.
        thresholds: The thresholds of the flag rule.
        criteria: One entry per audited criterion, in rubric order.
        notes: That the rubric the run copied has changed at its source since the run (the
            audit read the run's copy), one sentence each.
    """

    version: Literal[1] = AUDIT_VERSION
    run_id: str
    rubric_id: str
    rubric_version: str
    created: str
    endpoint_id: str | None = None
    llm_model: str | None = None
    llm_status: str
    embedding_model: str | None = None
    embeddings_status: str
    thresholds: DriftThresholds
    criteria: tuple[CriterionAudit, ...]
    notes: tuple[str, ...] = ()

    @property
    def embeddings_available(self) -> bool:
        """Whether embedding similarities were computed."""
        return self.embeddings_status == "available"

    @property
    def flags(self) -> dict[str, str]:
        """``{criterion_id: flag}`` of the winners."""
        return {c.criterion: c.flag for c in self.criteria}

    def criterion(self, criterion_id: str) -> CriterionAudit:
        """The audit of one criterion.

        Raises:
            KeyError: Not audited.
        """
        for c in self.criteria:
            if c.criterion == criterion_id:
                return c
        raise KeyError(criterion_id)
