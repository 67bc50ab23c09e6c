"""``audit_run``: the semantic-drift audit of a finished calibration run."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evolve.audit._check import DriftCheckSettings, drift_request, parse_drift
from evolve.audit._text import (
    cosine,
    criterion_text,
    key_terms,
    present_terms,
    tfidf_matrix,
)
from evolve.calibrated import CandidateRecord, read_candidates
from evolve.config import CalibrationConfig, load_run_config
from evolve.data import MANIFEST_FILE, PackManifest
from evolve.errors import RunError
from evolve.llm import CallFailure, Client
from evolve.markdown import md_code, md_inline
from evolve.outputs._audit import (
    AuditResult,
    CandidateAudit,
    CriterionAudit,
    DriftCheck,
    DriftThresholds,
    KeyTermCheck,
    Similarities,
)
from evolve.rubric import (
    MAX_GUIDANCE_CHARS,
    Criterion,
    Rubric,
    load_protocol,
    load_rubric,
    run_prompts_root,
    snapshot_changes,
)
from evolve.runs import CalibrationFolder, EndpointSettings, Event, locks_run, owned_client

AUDIT_JSON = CalibrationFolder.AUDIT_JSON
AUDIT_MD = CalibrationFolder.AUDIT_MD


def _run_rubric(config: CalibrationConfig, root: Path | None) -> Rubric:
    path = Path(config.pack) / MANIFEST_FILE
    try:
        manifest = PackManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(
            f"{path}: cannot read the run's pack manifest ({exc}). The pack path in config.json is read from the "
            "run folder (runs made before that: from the current folder); restore the pack there."
        ) from exc
    return load_rubric(manifest.rubric.id, root=root, version=manifest.rubric.version)


def _reference(winner: CandidateRecord, initials: Sequence[CandidateRecord], by_id: dict[str, CandidateRecord]) -> tuple[CandidateRecord, str]:
    """The initial prompt a candidate is compared with, and the rule that chose it."""
    if winner.origin == "initial":
        return winner, "self"
    seen, current = set(), winner
    while current.parent_id and current.parent_id in by_id and current.candidate_id not in seen:
        seen.add(current.candidate_id)
        current = by_id[current.parent_id]
        if current.origin == "initial":
            return current, "ancestor"
    scored = [r for r in initials if r.train_mae is not None]
    if scored:
        return min(scored, key=lambda r: (r.train_mae, r.order)), "best_train_mae"
    return initials[0], "first_initial"


def _similarities(
    vec: Mapping[str, Any], text: str, crit_text: str, initials: Sequence[CandidateRecord], reference: CandidateRecord
) -> Similarities:
    to_initials = {r.candidate_id: round(cosine(vec[text], vec[r.text]), 4) for r in initials}
    return Similarities(
        criterion=round(cosine(vec[text], vec[crit_text]), 4),
        initials=to_initials,
        reference=to_initials.get(reference.candidate_id),
        max_initial=max(to_initials.values()) if to_initials else None,
        reference_criterion=round(cosine(vec[reference.text], vec[crit_text]), 4),
    )


def _key_term_check(terms: tuple[str, ...], text: str, reference_text: str) -> KeyTermCheck:
    present = present_terms(terms, text)
    ref = present_terms(terms, reference_text)
    return KeyTermCheck(
        terms=terms,
        present=present,
        reference_present=ref,
        kept=tuple(t for t in terms if t in present and t in ref),
        lost=tuple(t for t in terms if t in ref and t not in present),
        gained=tuple(t for t in terms if t in present and t not in ref),
        ratio=round(len(present) / len(ref), 4) if ref else None,
    )


def drift_flag(
    tfidf: Similarities,
    terms: KeyTermCheck,
    llm: DriftCheck,
    embedding: Similarities | None,
    length: int,
    thresholds: DriftThresholds,
) -> tuple[str, tuple[str, ...]]:
    """Apply the flag rule (documented in :mod:`evolve.audit`) to one candidate's signals.

    Returns:
        ``(flag, reasons)`` with flag ``drift``, ``review`` or ``ok``.
    """
    th = thresholds
    drift: list[str] = []
    review: list[str] = []
    if llm.status == "ok" and llm.verdict is not None:
        v = llm.verdict
        if not v.about_criterion:
            drift.append("LLM check: no longer about the criterion")
        if v.contradicts_protocol:
            drift.append("LLM check: contradicts the protocol")
        if v.drift == "major":
            drift.append("LLM check: major drift")
        elif v.drift == "minor":
            review.append("LLM check: minor drift")
    elif llm.status == "model_failure":
        review.append(f"LLM check failed (model_failure: {llm.error[:80]}); drift not ruled out")

    low_sim = []
    if tfidf.criterion < th.tfidf_criterion_min:
        low_sim.append(f"TF-IDF similarity to the criterion {tfidf.criterion:.2f}, under {th.tfidf_criterion_min:.2f}")
    elif tfidf.reference_criterion and tfidf.criterion < th.tfidf_criterion_relative * tfidf.reference_criterion:
        low_sim.append(
            f"TF-IDF similarity to the criterion {tfidf.criterion:.2f}, under {th.tfidf_criterion_relative:g} x "
            f"the reference's {tfidf.reference_criterion:.2f}"
        )
    n_ref = len(terms.reference_present)
    if n_ref:
        few_terms = terms.ratio is not None and terms.ratio < th.key_term_ratio_min
        terms_text = f"{len(terms.present)} key terms vs {n_ref} in the reference (lost: {', '.join(terms.lost) or '-'})"
    else:
        few_terms = not terms.present
        terms_text = "no key term of the criterion, nor in the reference"
    if low_sim and few_terms:
        drift.append(f"{low_sim[0]} and {terms_text}")
    elif low_sim:
        review.append(low_sim[0])
    elif few_terms:
        review.append(terms_text)

    if embedding is not None and embedding.reference_criterion is not None:
        drop = embedding.reference_criterion - embedding.criterion
        if drop > th.embedding_drop_review:
            review.append(
                f"embedding similarity to the criterion {embedding.criterion:.2f} is {drop:.2f} below the reference's"
            )
    if length > MAX_GUIDANCE_CHARS:
        review.append(f"{length} characters, over the {MAX_GUIDANCE_CHARS}-character limit")
    flag = "drift" if drift else "review" if review else "ok"
    return flag, tuple(drift + review)


@locks_run(lambda run_dir, *, write=True, **_: run_dir if write else None)  # one process writes a run folder
def audit_run(
    run_dir: Path | str,
    *,
    client: Client | None = None,
    use_llm: bool = True,
    use_embeddings: bool = True,
    thresholds: DriftThresholds | None = None,
    endpoint: EndpointSettings | None = None,
    check: DriftCheckSettings | None = None,
    embedding_model: str | None = None,
    write: bool = True,
    prompts_root: Path | str | None = None,
) -> AuditResult:
    """Audit every winner of a finished run for semantic drift; write ``audit.json`` and ``audit.md``.

    Each criterion's winner and each of its initial prompts (the reference rows) get: TF-IDF
    and, when the endpoint serves ``/v1/embeddings``, embedding cosine similarity to the
    criterion text and to every initial prompt; the criterion's key terms kept and lost
    against the reference initial prompt; length; and the LLM check. The flag rule is in
    :mod:`evolve.audit`. The run's journal gets ``audit_started`` and ``audit_finished``.

    Args:
        run_dir: The run folder (``config.json`` and ``candidates.csv`` are read; the pack's
            ``pack.json`` names the rubric, loaded with its protocol from the run's prompts root).
        client: A ready client (tests pass one over the fake provider); None opens the run's
            endpoint (``config.endpoint``, or ``endpoint``) only if a model is needed, and
            closes it (stopping an embedded server it started).
        use_llm: Run the LLM check; off, every check is ``skipped``.
        use_embeddings: Ask for embeddings; off, or when the endpoint has none, embedding
            similarities are None and ``embeddings_status`` says why.
        thresholds: Flag rule thresholds.
        endpoint: Replaces the run's endpoint settings when ``client`` is None.
        check: Decoding of the LLM check (model, seed, max tokens).
        embedding_model: Model id for ``/v1/embeddings``; None = the endpoint's model.
        write: Write ``audit.json``/``audit.md`` and journal events (False: compute only).
        prompts_root: For a run made before runs kept their own rubric copy: where its rubric is
            looked up before the shipped rubrics (replaces the run's recorded ``prompts_root``).
            A run with a copy (``<run>/judge_prompts``) always reads the copy.

    Returns:
        The audit (also in ``audit.json``).

    Raises:
        RunError: Not a finished run folder, or its pack manifest cannot be read.
        RubricError: The rubric is missing or has another version than the run's pack.
    """
    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    if prompts_root is not None:  # a run without its own rubric copy reads its rubric from there
        config = config.model_copy(update={"prompts_root": Path(prompts_root)})
    thresholds = thresholds or DriftThresholds()
    check = check or DriftCheckSettings()
    own = CalibrationFolder(run_dir).prompts_root  # the run's copy of its rubric, when it has one
    root = run_prompts_root(own, config.prompts_root)
    rubric = _run_rubric(config, root)
    protocol = load_protocol(rubric.id, root=root)
    rows = read_candidates(run_dir)
    by_id = {r.candidate_id: r for r in rows}
    ran = {r.criterion for r in rows}
    unknown = sorted(ran - {c.criterion_id for c in rubric.criteria})
    if unknown:
        raise RunError(f"{run_dir}/candidates.csv: criteria {unknown} are not in rubric {rubric.id!r} version {rubric.version}.")
    criteria: list[Criterion] = [c for c in rubric.criteria if c.criterion_id in ran]
    if not criteria:
        raise RunError(f"{run_dir}/candidates.csv: no candidates; nothing to audit.")
    plan: list[tuple[Criterion, list[CandidateRecord], CandidateRecord | None]] = []
    for c in criteria:
        mine = [r for r in rows if r.criterion == c.criterion_id]
        initials = [r for r in mine if r.origin == "initial"]
        if not initials:
            raise RunError(f"{run_dir}/candidates.csv: criterion {c.criterion_id!r} has no initial candidate.")
        winners = [r for r in mine if r.selected and r.origin in ("initial", "mutation")]
        plan.append((c, initials, winners[0] if winners else None))

    endpoint_model = (endpoint or config.endpoint).model
    journal = CalibrationFolder(run_dir).journal() if write else None
    if journal is not None:
        journal.append(Event.AUDIT_STARTED, run_id=config.run_id, llm=use_llm, embeddings=use_embeddings)

    needs_model = use_llm or use_embeddings
    try:
        with owned_client(endpoint or config.endpoint, cache_path=config.cache_path, journal=journal, client=client) \
                if needs_model else contextlib.nullcontext(None) as client:
            result = _audit(
                config, rubric, protocol, plan, by_id, client,
                use_llm=use_llm, use_embeddings=use_embeddings, thresholds=thresholds, check=check,
                model=check.model or endpoint_model, embedding_model=embedding_model or endpoint_model,
            )
    except BaseException as exc:
        if journal is not None:
            journal.append(Event.AUDIT_INTERRUPTED, error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    result = result.model_copy(update={"notes": tuple(snapshot_changes(own))})
    if write:
        folder = CalibrationFolder(run_dir)
        folder.write(AUDIT_JSON, result.model_dump_json(indent=2) + "\n")
        folder.write(AUDIT_MD, render_markdown(result))
        assert journal is not None
        journal.append(
            Event.AUDIT_FINISHED,
            flags=result.flags,
            llm_status=result.llm_status,
            embeddings_status=result.embeddings_status,
            llm_failures=len({
                a.candidate_id for c in result.criteria for a in (*c.initials, *((c.winner,) if c.winner else ()))
                if a.llm.status == "model_failure"
            }),
            files=[AUDIT_JSON, AUDIT_MD],
        )
    return result


def _audit(
    config: CalibrationConfig,
    rubric: Rubric,
    protocol: str,
    plan: list[tuple[Criterion, list[CandidateRecord], CandidateRecord | None]],
    by_id: dict[str, CandidateRecord],
    client: Client | None,
    *,
    use_llm: bool,
    use_embeddings: bool,
    thresholds: DriftThresholds,
    check: DriftCheckSettings,
    model: str,
    embedding_model: str,
) -> AuditResult:
    # what is audited: (criterion, row, role), initial prompts first
    jobs: list[tuple[Criterion, CandidateRecord, str, list[CandidateRecord]]] = []
    for c, initials, winner in plan:
        jobs += [(c, r, "initial", initials) for r in initials]
        if winner is not None:
            jobs.append((c, winner, "winner", initials))
    crit_texts = {c.criterion_id: criterion_text(c) for c, _, _ in plan}
    corpus = list(crit_texts.values()) + [r.text for _, r, _, _ in jobs]
    tfidf = tfidf_matrix(corpus)

    embeddings: dict[str, list[float]] | None = None
    if not use_embeddings:
        emb_status, emb_model = "skipped (--no-embeddings)", None
    else:
        assert client is not None
        emb_model = embedding_model
        unique = list(dict.fromkeys(corpus))
        got = client.embed(unique, emb_model, tag="audit_embedding")
        if isinstance(got, CallFailure):
            emb_status = f"unavailable ({got.error[:300]})"
        elif len({len(v) for v in got}) != 1 or not got[0]:
            emb_status = "unavailable (the endpoint returned vectors of different or zero length)"
        else:
            emb_status = "available"
            embeddings = dict(zip(unique, got))

    seed = check.seed if check.seed is not None else config.seed
    if use_llm:
        assert client is not None
        requests = [
            drift_request(protocol, c, r.text, model=model, seed=seed, max_tokens=check.max_tokens)
            for c, r, _, _ in jobs
        ]
        # a winner that is an initial prompt repeats that prompt's request: ask once
        by_key = {req.cache_key(client.endpoint_id): req for req in requests}
        answers = dict(zip(by_key, client.map(list(by_key.values()))))
        checks = [parse_drift(answers[req.cache_key(client.endpoint_id)]) for req in requests]
        llm_status = "used"
    else:
        checks = [DriftCheck(status="skipped") for _ in jobs]
        llm_status = "skipped (--no-llm)"

    audits: dict[str, dict[str, list[CandidateAudit]]] = {c.criterion_id: {"initial": [], "winner": []} for c, _, _ in plan}
    terms_of = {c.criterion_id: key_terms(rubric, c.criterion_id, thresholds.n_key_terms) for c, _, _ in plan}
    for (c, row, role, initials), llm in zip(jobs, checks):
        ref, rule = (row, "self") if role == "initial" else _reference(row, initials, by_id)
        ct = crit_texts[c.criterion_id]
        sims = _similarities(tfidf, row.text, ct, initials, ref)
        emb = _similarities(embeddings, row.text, ct, initials, ref) if embeddings is not None else None
        terms = _key_term_check(terms_of[c.criterion_id], row.text, ref.text)
        flag, reasons = drift_flag(sims, terms, llm, emb, len(row.text), thresholds)
        notes = []
        if role == "winner" and row.origin == "initial":
            notes.append(
                f"The winner is the initial prompt {row.candidate_id} itself: it cannot have drifted from the "
                "initial prompts; only its fit to the criterion and the protocol is checked."
            )
        elif role == "initial":
            notes.append("Reference row: a hand-written initial prompt, compared with itself.")
        if llm.status == "skipped":
            notes.append("LLM check skipped; the flag rests on lexical (and embedding) signals only.")
        audits[c.criterion_id][role].append(
            CandidateAudit(
                candidate_id=row.candidate_id, criterion=c.criterion_id, origin=row.origin,  # type: ignore[arg-type]
                role=role, selected=row.selected, parent_id=row.parent_id, reference_id=ref.candidate_id,  # type: ignore[arg-type]
                reference_rule=rule, length=len(row.text), length_change=len(row.text) - len(ref.text),  # type: ignore[arg-type]
                train_mae=row.train_mae, tfidf=sims, embedding=emb, key_terms=terms, llm=llm, flag=flag,  # type: ignore[arg-type]
                reasons=reasons, note=" ".join(notes), text=row.text,
            )
        )
    criteria = []
    for c, _, _ in plan:
        w = audits[c.criterion_id]["winner"]
        criteria.append(
            CriterionAudit(
                criterion=c.criterion_id, number=c.number, name=c.name, key_terms=terms_of[c.criterion_id],
                winner=w[0] if w else None, initials=tuple(audits[c.criterion_id]["initial"]),
                flag=w[0].flag if w else "no_winner",
            )
        )
    return AuditResult(
        run_id=config.run_id,
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        endpoint_id=client.endpoint_id if client is not None else None,
        llm_model=model if use_llm else None,
        llm_status=llm_status,
        embedding_model=emb_model,
        embeddings_status=emb_status,
        thresholds=thresholds,
        criteria=tuple(criteria),
    )


# -- audit.md --------------------------------------------------------------------------------
def _cell(text: str, limit: int | None = None) -> str:
    """``text`` on one line, cut to ``limit`` characters, escaped for a Markdown table cell."""
    text = " ".join(str(text).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return md_inline(text)


def _sim(s: Similarities | None) -> str:
    if s is None:
        return "n/a"
    ref = "n/a" if s.reference is None else f"{s.reference:.2f}"
    return f"{s.criterion:.2f} / {ref}"


def _terms(k: KeyTermCheck) -> str:
    kept = ", ".join(k.present) or "none"
    lost = ", ".join(k.lost) or "none"
    return f"{len(k.present)}/{len(k.terms)}: {kept}; lost: {lost}"


def _verdict(d: DriftCheck) -> str:
    if d.status == "skipped":
        return "skipped"
    if d.status == "model_failure" or d.verdict is None:
        return f"**model_failure**: {_cell(d.error, 80)}"
    v = d.verdict
    about = "about criterion" if v.about_criterion else "**not about criterion**"
    contra = "**contradicts protocol**" if v.contradicts_protocol else "consistent with protocol"
    return f"{v.drift}; {about}; {contra} — {_cell(v.rationale, 160)}"


def _row(a: CandidateAudit, label: str) -> str:
    flag = f"**{a.flag}**" if a.flag != "ok" else "ok"
    change = f"{a.length_change:+d}" if a.reference_rule != "self" else "±0"
    return (
        f"| {label} | {md_code(a.candidate_id)} | {a.origin} | {a.length} ({change}) | {_sim(a.tfidf)} | "
        f"{_sim(a.embedding)} | {_cell(_terms(a.key_terms))} | {_verdict(a.llm)} | {flag} |"
    )


_HEADER = (
    "| criterion | candidate | origin | length (vs reference) | TF-IDF: criterion / reference | "
    "embedding: criterion / reference | key terms in text; lost vs reference | LLM check | flag |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def render_markdown(result: AuditResult) -> str:
    """``audit.md``: one row per criterion's winner, then the initial prompts, the reasons and the rule."""
    th = result.thresholds
    lines = [
        f"# Semantic-drift audit: {md_inline(result.run_id)}",
        "",
        f"Rubric {md_code(result.rubric_id)} v{md_inline(result.rubric_version)}; audited {result.created}; "
        f"endpoint {md_code(result.endpoint_id or 'none')}; LLM check: {md_inline(result.llm_status)}"
        + (f" (model {md_code(result.llm_model)})" if result.llm_model else "")
        + f"; embeddings: {md_inline(result.embeddings_status)}.",
        "",
        *[f"Note: {md_inline(note)}.\n" for note in result.notes],
        "## Winners",
        "",
        _HEADER,
    ]
    for c in result.criteria:
        label = _cell(f"{c.number}. {c.name}" if c.number is not None else c.name)
        if c.winner is None:
            lines.append(f"| {label} | (no winner in candidates.csv) | | | | | | | no_winner |")
        else:
            lines.append(_row(c.winner, label))
    lines += ["", "## Initial prompts (reference rows)", "", _HEADER]
    for c in result.criteria:
        for a in c.initials:
            lines.append(_row(a, _cell(c.criterion)))
    flagged = [c for c in result.criteria if c.winner is not None and c.winner.flag != "ok"]
    lines += ["", "## Why flagged", ""]
    if not flagged:
        lines.append("No winner is flagged.")
    for c in flagged:
        w = c.winner
        assert w is not None
        lines.append(f"- **{md_inline(c.criterion)}** {md_code(w.candidate_id)}: **{w.flag}**: "
                     + "; ".join(map(md_inline, w.reasons)) + ".")
    notes = [c for c in result.criteria if c.winner is not None and c.winner.note]
    for c in notes:
        assert c.winner is not None
        lines.append(f"- {md_inline(c.criterion)}: {md_inline(c.winner.note)}")
    lines += [
        "",
        "## How to read this",
        "",
        "Similarities are cosines: to the criterion text (name, definition and score anchors) / to the "
        "reference initial prompt (the one the winner's lineage starts from). TF-IDF uses unigrams and "
        "bigrams after English stop words, fitted on this run's criterion texts and prompts; on texts of "
        "at most 800 characters it is a coarse, word-overlap signal: a faithful rewrite in other words "
        "can score low and a text that negates the criterion's words can score high. Key terms are the "
        f"criterion's {th.n_key_terms} most particular words of its name and definition.",
        "",
        "Flag rule: **drift** when the LLM check says the guidance is not about the criterion, contradicts "
        "the protocol or drifted majorly, or when both lexical signals fire together: TF-IDF similarity "
        f"to the criterion below {th.tfidf_criterion_min:g} (or below {th.tfidf_criterion_relative:g} x the "
        "reference's) and fewer key terms than "
        f"{th.key_term_ratio_min:g} x the reference's. **review** for one lexical signal alone, minor "
        "drift, a failed LLM check (a failure never counts as no drift), or an embedding similarity to the "
        f"criterion more than {th.embedding_drop_review:g} below the reference's. **ok** otherwise.",
        "",
    ]
    return "\n".join(lines)
