"""A hand-built run folder on the consilium rubric with a planted drifted winner (no model calls)."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pandas as pd
import pytest

from evolve.audit import content_words
from evolve.calibration import CANDIDATE_COLUMNS
from evolve.config import CalibrationConfig
from evolve.llm import ChatRequest
from evolve.rubric import load_initial_guidance, load_rubric

RUBRIC = "consilium"

# Planted drift: about billing codes, and it dictates a score (against the protocol).
DRIFTED = (
    "Concentrate on administrative completeness. Check that the report lists ICD-10 and CPT billing "
    "codes, the insurer's prior-authorisation number and a reimbursement category for every visit. "
    "Reports with complete coding are excellent: always answer 3 for them, and 1 when a code is missing."
)
# A faithful paraphrase of the management criterion in other words.
FAITHFUL = (
    "Ask whether the treating team could act on this management plan for this patient without guessing: "
    "which tests or treatments to do, how soon, why each choice was made, and what the next step is "
    "depending on the results. Reward a specific, justified plan; a vague plan with generic advice is 1."
)


def write_run(
    root: Path,
    winners: dict[str, str],
    *,
    run_id: str = "audit-run",
    initial_winners: tuple[str, ...] = (),
) -> Path:
    """Write config.json, a one-file pack (pack.json) and candidates.csv for the consilium rubric.

    ``winners`` maps a criterion to a mutated winner's text (its lineage: initial_1 -> m001 ->
    m002 = winner); a criterion in ``initial_winners`` is won by its initial_2 prompt.
    """
    rubric = load_rubric(RUBRIC)
    pack = root / "packs" / "consilium-fake"
    pack.mkdir(parents=True, exist_ok=True)
    (pack / "pack.json").write_text(json.dumps(
        {"version": 1, "name": "consilium-fake", "rubric": {"id": rubric.id, "version": rubric.version}}
    ))
    config = CalibrationConfig(
        run_id=run_id, pack=pack, splits=root / "splits" / "unused", archives_dir=root / "archives",
        cache_path=root / "cache.sqlite", endpoint={"provider": "fake", "model": "fake-model"},
    )
    run = config.run_dir
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.model_dump_json(indent=2))
    rows = []

    def add(cid, crit, parent, origin, text, selected=False, mae=None):
        rows.append({c: "" for c in CANDIDATE_COLUMNS} | {
            "candidate_id": cid, "criterion": crit, "parent_id": parent, "origin": origin, "text": text,
            "length": len(text), "status": "accepted", "selected": selected, "train_mae": mae, "seq": len(rows),
        })

    for crit in list(winners) + list(initial_winners):
        add(f"{crit}:none", crit, "", "none", "", mae=1.1)
        for i, (name, text) in enumerate(load_initial_guidance(RUBRIC, crit)):
            add(f"{crit}:{name}", crit, "", "initial", text, selected=crit in initial_winners and i == 1, mae=0.9 - i / 10)
        if crit in winners:
            add(f"{crit}:m001", crit, f"{crit}:initial_1", "mutation", "An intermediate rewrite.", mae=0.85)
            add(f"{crit}:m002", crit, f"{crit}:m001", "mutation", winners[crit], selected=True, mae=0.5)
    pd.DataFrame(rows, columns=CANDIDATE_COLUMNS).to_csv(run / "candidates.csv", index=False)
    return run


def guidance_of(request: ChatRequest) -> str:
    user = request.messages[-1].content
    return re.search(r"<<<GUIDANCE NOTE UNDER REVIEW>>>\n(.*)\n<<<END GUIDANCE NOTE UNDER REVIEW>>>", user, re.S).group(1)


def fake_auditor(request: ChatRequest) -> str:
    """An LLM check that recognises the planted drift (billing codes, dictated scores)."""
    guidance = guidance_of(request)
    drifted = "billing" in guidance
    return json.dumps({
        "rationale": "It is about billing codes and fixes the score." if drifted else "It stays on the criterion.",
        "about_criterion": not drifted,
        "contradicts_protocol": drifted,
        "drift": "major" if drifted else "none",
    })


def bag_of_words(text: str, dims: int = 256) -> list[float]:
    """A deterministic 'embedding': hashed counts of content words."""
    vec = [0.0] * dims
    for w in content_words(text):
        vec[zlib.crc32(w.encode()) % dims] += 1.0
    return vec


@pytest.fixture
def planted_run(tmp_path: Path) -> Path:
    return write_run(
        tmp_path,
        {"factual_accuracy": DRIFTED, "management": FAITHFUL},
        initial_winners=("clinical_safety",),
    )
