"""Semantic-drift audit of evolved guidance (``evolve audit RUN``).

Calibration optimises one number - the judge's MAE against physicians - and nothing in that
number says the winning guidance is still *about its criterion*. An optimiser can find that
"score 2 unless the text is empty" lowers the error on a lenient training set, or that a note
about a neighbouring quality (safety instead of factual accuracy) happens to help. The consilium paper's calibration asks
for a semantic review after re-evaluation; :func:`audit_run` is that review. It reads a finished
run folder and compares every criterion's **winner** with the criterion's definition and with
the run's **initial prompts** (which are audited too, as reference rows).

Signals, per guidance text:

* **Similarity** (cosine) to the *criterion text* (name + definition + score anchors) and to
  each initial prompt. TF-IDF always (unigrams + bigrams, English stop words, fitted on the
  run's criterion texts and prompts). Embeddings too when the endpoint serves
  ``/v1/embeddings`` (:meth:`evolve.llm.Client.embed`); when it does not, ``embeddings_status``
  records ``unavailable (<reason>)`` and nothing else changes. TF-IDF on texts of at most 800
  characters is a coarse, word-overlap signal: a faithful rewrite in other words can score low,
  and a note that *negates* the criterion's words can score high. It finds notes that changed
  topic; it cannot read meaning.
* **Key terms**: the criterion's most particular words (:func:`key_terms`: TF-IDF of the name,
  counted twice, and definition against the other criteria of the rubric), and which of them the
  winner kept or lost compared with its **reference** initial prompt - the one its mutation
  lineage (``parent_id``) starts from.
* **Length** in characters, against the 800-character limit and the reference.
* **LLM check**: one structured-output call (temperature 0, top_p 1, fixed seed, JSON schema
  of :class:`DriftVerdict`) showing the judge protocol, the criterion and the guidance, asking
  whether the guidance is still about the criterion and whether it contradicts the protocol, with
  a rationale. A failed call is recorded as ``model_failure`` - never as "no drift".

Flag rule (numbers in :class:`DriftThresholds`):

* ``drift`` - the LLM check says *not about the criterion*, *contradicts the protocol* or
  *major* drift; or both lexical signals fire together: TF-IDF similarity to the criterion
  below ``tfidf_criterion_min`` (or below ``tfidf_criterion_relative`` x the reference's) **and**
  fewer key terms than ``key_term_ratio_min`` x the number in the reference (none, when the
  reference has none either);
* ``review`` - one lexical signal alone, *minor* drift, a failed LLM check, or (with
  embeddings) a similarity to the criterion more than ``embedding_drop_review`` below the
  reference's;
* ``ok`` - otherwise. With ``use_llm=False`` the flag rests on the lexical signals only.

A winner that *is* an initial prompt is audited like the others; it cannot have drifted from
the initial prompts (its note says so), but its fit to the criterion and the protocol is still
checked. The audit writes ``audit.json`` (:class:`AuditResult`, versioned, read by the report)
and ``audit.md`` into the run folder and appends ``audit_started``/``audit_finished`` to
``journal.jsonl``.

Example::

    from evolve.audit import audit_run

    result = audit_run("archives/kqa-1")            # opens the run's endpoint
    result = audit_run("archives/kqa-1", use_llm=False, use_embeddings=False)  # offline
    print(result.flags)                             # {"entailment": "ok"}
"""

from evolve.audit._audit import (
    AUDIT_JSON,
    AUDIT_MD,
    audit_run,
    drift_flag,
    render_markdown,
)
from evolve.audit._check import (
    DRIFT_FORMAT,
    DriftCheckSettings,
    drift_messages,
    drift_request,
    parse_drift,
)
from evolve.audit._text import (
    analyze,
    content_words,
    cosine,
    criterion_text,
    key_terms,
    present_terms,
    tfidf_matrix,
)
from evolve.outputs._audit import (
    AUDIT_VERSION,
    DRIFT_RATIONALE_MAX_CHARS,
    AuditResult,
    CandidateAudit,
    CriterionAudit,
    DriftCheck,
    DriftThresholds,
    DriftVerdict,
    KeyTermCheck,
    Similarities,
)

__all__ = [
    "AUDIT_JSON",
    "AUDIT_MD",
    "AUDIT_VERSION",
    "DRIFT_FORMAT",
    "DRIFT_RATIONALE_MAX_CHARS",
    "AuditResult",
    "CandidateAudit",
    "CriterionAudit",
    "DriftCheck",
    "DriftCheckSettings",
    "DriftThresholds",
    "DriftVerdict",
    "KeyTermCheck",
    "Similarities",
    "analyze",
    "audit_run",
    "content_words",
    "cosine",
    "criterion_text",
    "drift_flag",
    "drift_messages",
    "drift_request",
    "key_terms",
    "parse_drift",
    "present_terms",
    "render_markdown",
    "tfidf_matrix",
]
