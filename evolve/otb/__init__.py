"""OpenTumorBoard: the Specialist Turn and Board Simulation benchmark (``../shared/OTB_FORMAT.md``).

OpenTumorBoard turns recorded tumor boards into two tasks on the same material - a case summary
and one caption per slide:

* **Specialist Turn**: a question put to one specialist during the board (``qa_type``,
  ``target_specialist_role``); the model answers in at most three sentences, as
  ``{"answer": ...}``, and the judge rates its *clinical equivalence* to what the specialist
  said (1-5) with two flags, a critical error and an unsupported claim.
* **Board Simulation**: the whole board; the model writes a numbered discussion and one
  conclusion, and the judge rates the conclusion's *alignment* with the board's (1-5) and the
  four decisions (therapy, surgery, next action, clinical trial) the board's conclusion took.

This package reads the released records (:func:`load_board_cases`, :func:`load_turn_questions`;
``.jsonl`` or ``.jsonl.gz``; as strictly as the released schema - no type conversion, no blank
required text, only the released question types and roles; references never reach a generating
model) and the released test manifests (:func:`load_manifest`: each stored prompt verified
against its :func:`messages_sha256`), reads answers the way the released code does
(:func:`extract_board`, :func:`extract_turn`: the answer boundary, fallbacks and a
``parse_status``; an answer with nothing usable is *malformed*, kept and counted), and
aggregates judged items as released (:func:`summarize`: malformed answers at the floor of the
mean, judge failures excluded and counted, flag rates over scored items; :func:`rouge_l`).

A run (:class:`OtbConfig`, :func:`resolve_otb_config`) answers every item with every model
(:func:`generate_otb`: ``<task>/<model>/responses.jsonl`` in the released layout, resumable by
id over the response cache), then judges the extracted answers (:func:`judge_otb`: strict JSON
schemas at temperature 0, top_p 1, seed 0; ``judge_scores.jsonl``, ``metrics.csv`` and each
(task, model)'s ``summary.json``).

Its judge can be calibrated like any other: clinician ratings of a run's answers become a rating
pack of rubric ``otb`` (:func:`otb_rating_pack`; clinical equivalence 1-5, the two flags 0/1,
conclusion alignment 1-5), ``evolve calibrate`` evolves guidance for it, and
:func:`judge_otb` takes the calibration run's winners (:func:`calibrated_guidance`).

Before paying, :func:`plan_otb_run` and :func:`plan_otb_judge` count the calls and tokens a run
or a judging would send, by phase (``--plan``; no call is made).
"""

from evolve.otb._aggregate import DECISIONS, JudgedItem, rouge_l, summarize
from evolve.otb._config import OTB_PRESETS, Decoding, OtbConfig, OtbJudgeSettings, read_otb_config, resolve_otb_config
from evolve.otb._cost import plan_otb_judge, plan_otb_run
from evolve.otb._extract import Extraction, ParseStatus, extract_board, extract_turn, final_text, sentence_count
from evolve.otb._judging import (
    BERTSCORE_MISSING,
    METRIC_COLUMNS,
    OtbJudgeResult,
    calibrated_guidance,
    judge_otb,
    load_judged_items,
    load_otb_config,
)
from evolve.otb._prompts import (
    JUDGE_RUBRIC_VERSION,
    PROMPT_VERSION,
    ClinicalEquivalence,
    ConclusionAlignment,
    FourDecisions,
    board_messages,
    judge_messages,
    judge_schema,
    turn_messages,
)
from evolve.otb._ratings import OTB_RATING_COLUMNS, OTB_RUBRIC_ID, otb_rating_pack
from evolve.otb._records import (
    NO_SLIDES,
    QA_TYPES,
    TARGET_ROLES,
    BoardCase,
    ManifestEntry,
    SourceAlias,
    TurnQuestion,
    load_board_cases,
    load_manifest,
    load_turn_questions,
    messages_sha256,
    open_jsonl,
)
from evolve.otb._runner import (
    GenerationCounts,
    generate_otb,
    load_otb_inputs,
    load_otb_items,
    load_stored_prompts,
    read_responses,
    run_key,
)

__all__ = [
    "BERTSCORE_MISSING",
    "DECISIONS",
    "JUDGE_RUBRIC_VERSION",
    "METRIC_COLUMNS",
    "NO_SLIDES",
    "OTB_PRESETS",
    "OTB_RATING_COLUMNS",
    "OTB_RUBRIC_ID",
    "PROMPT_VERSION",
    "QA_TYPES",
    "TARGET_ROLES",
    "BoardCase",
    "ClinicalEquivalence",
    "ConclusionAlignment",
    "Decoding",
    "Extraction",
    "FourDecisions",
    "GenerationCounts",
    "JudgedItem",
    "ManifestEntry",
    "OtbConfig",
    "OtbJudgeResult",
    "OtbJudgeSettings",
    "ParseStatus",
    "SourceAlias",
    "TurnQuestion",
    "board_messages",
    "calibrated_guidance",
    "extract_board",
    "extract_turn",
    "final_text",
    "generate_otb",
    "judge_messages",
    "judge_otb",
    "judge_schema",
    "load_board_cases",
    "load_judged_items",
    "load_manifest",
    "load_otb_config",
    "load_otb_inputs",
    "load_otb_items",
    "load_stored_prompts",
    "load_turn_questions",
    "messages_sha256",
    "open_jsonl",
    "otb_rating_pack",
    "plan_otb_judge",
    "plan_otb_run",
    "read_responses",
    "read_otb_config",
    "resolve_otb_config",
    "rouge_l",
    "run_key",
    "sentence_count",
    "summarize",
    "turn_messages",
]
