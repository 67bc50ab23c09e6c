"""The consilium: a multi-agent pipeline that writes a clinical second opinion (consilium paper, benchmark runner).

For one case a model (1) assigns a panel of 1-5 clinical roles, one primary; (2) each role
writes its own opinion, independently, from the same case input with the reference answer
withheld - free-form or structured, from one model or from N worker models merged by a
consolidator (``n+1``); the opinions are frozen; (3) a shared report is synthesised from the
case and the opinions, and review rounds follow: every role votes yes, or
no with a critique and a proposed revision; the moderator checks the objections against the
case and revises or records no substantive change; the consilium stops on consensus, no
substantive change, a report identical to an earlier state, or the round limit (5); (4) a
finalizer writes the final opinion, keeping unresolved disagreement and uncertainty.

Every stage sees the same identifier-stripped case (:func:`strip_identifiers`: no DOI, case
number, citation, date, name or hospital; :func:`deidentify` also counts what it replaced), and
model output a later stage reads goes through the same function.

Every stage, vote, stop reason and call (with its tokens) is recorded in a :class:`CaseRun`;
:meth:`CaseRun.to_record` gives the :class:`~evolve.data.ConsiliumRecord` physicians rate.

:class:`ConsiliumPipeline` generates it through a :class:`~evolve.llm.Client`
(``assign_roles`` once per case and model, ``run_case`` per condition and topology);
:func:`prompt_catalog` lists every prompt template by name for the run manifest, and
:data:`PIPELINE_VERSION` changes whenever a prompt or a rule does.

The benchmark runner (``evolve bench``): :func:`run_bench` generates every case x model x
condition x topology of a :class:`BenchConfig` (:func:`resolve_bench_config`: preset ``quick``
or ``paper`` < file < environment < options) into ``archives/<run_id>/`` - ``manifest.json``
(:class:`BenchManifest`: models, endpoint, decoding, limits, every prompt with its SHA-256, the
case file's SHA-256), ``deidentification.csv`` (identifiers replaced per case and kind),
``roles/``, ``cases/`` (one CaseRun each), ``records/<model>/`` (the
ConsiliumRecords physicians rate) and ``pack/<model>/`` (a rating pack of them) - and resumes
by replay over the response cache. :func:`judge_bench` scores the final report, the panel and -
in the structured condition, as the paper did - the primary role's reasoning and opinion with
the (calibrated) consilium judge into
``judge_scores.csv`` (:data:`JUDGE_SCORE_COLUMNS`); :func:`evolve.workflows.run_and_judge`
does both, then writes the bench report. Guidance comes from a judge file (a calibration run
folder or its ``judge.json``); the judged run keeps a byte-for-byte copy and records its path
and SHA-256 (:class:`JudgeFileRecord`), so the report can anchor judge means on the judge
file's rated validation targets. Before paying, :func:`plan_bench_run` and
:func:`plan_bench_judge` count the calls and tokens a run or a judging would send, by phase
(``--plan``; no call is made).
"""

from evolve.consilium._config import (
    BENCH_PRESETS,
    BenchConfig,
    BenchManifest,
    GenerationSettings,
    ModelOutputLimits,
    OutputLimits,
    load_bench_config,
    load_bench_manifest,
    model_slug,
    resolve_bench_config,
)
from evolve.consilium._context import CHARS_PER_TOKEN, ContextCheck, StageBound, check_context, stage_bounds
from evolve.consilium._cost import (
    BENCH_PHASES,
    PHASE_OF_STAGE,
    FinishedWork,
    finished_work,
    plan_bench_judge,
    plan_bench_run,
)
from evolve.consilium._deidentify import IDENTIFIER_KINDS, Deidentified, deidentification_csv, deidentify
from evolve.consilium._judge_record import JudgeFileRecord, keep_judge_file, read_judge_file_record
from evolve.consilium._judging import (
    JUDGE_SCORE_COLUMNS,
    JUDGE_SCORES_FILE,
    GuidanceChoice,
    JudgeBenchResult,
    JudgingSettings,
    calibration_settings,
    judge_bench,
    last_judging,
    load_calibrated_guidance,
    recorded_guidance,
    split_fallbacks,
)
from evolve.consilium._models import (
    ARTIFACT_VERSION,
    MAX_ROUNDS,
    CallRecord,
    CaseRun,
    Condition,
    ModeratorReply,
    RoleAssignment,
    RoleAssignmentReply,
    RoleOpinion,
    RoleReply,
    RoundRecord,
    Stage,
    StopReason,
    StructuredFinalReply,
    StructuredOpinionReply,
    Topology,
    Vote,
    VoteReply,
    panel_problem,
)
from evolve.consilium._pipeline import (
    PIPELINE_VERSION,
    ConsiliumPipeline,
    PipelineSettings,
    StageLimits,
    render_structured_final,
    render_structured_opinion,
    reply_format,
)
from evolve.consilium._prompts import (
    FINAL_OPINION_MARKER,
    prompt_catalog,
    split_free_form,
    strip_identifiers,
)
from evolve.consilium._roles import harmonise_role
from evolve.consilium._runner import (
    BenchResult,
    CaseRunSummary,
    PipelineBackend,
    RoleFile,
    case_artifact_path,
    default_backend,
    load_bench_cases,
    load_case_runs,
    load_run_cases,
    plan_context,
    prepare_bench,
    records_key,
    role_file_path,
    run_bench,
)

__all__ = [
    "ARTIFACT_VERSION",
    "FINAL_OPINION_MARKER",
    "MAX_ROUNDS",
    "PIPELINE_VERSION",
    "CallRecord",
    "CaseRun",
    "ConsiliumPipeline",
    "Condition",
    "ModeratorReply",
    "PipelineSettings",
    "RoleAssignment",
    "RoleAssignmentReply",
    "RoleOpinion",
    "RoleReply",
    "RoundRecord",
    "Stage",
    "StageLimits",
    "StopReason",
    "StructuredFinalReply",
    "StructuredOpinionReply",
    "Topology",
    "Vote",
    "VoteReply",
    "panel_problem",
    "prompt_catalog",
    "render_structured_final",
    "render_structured_opinion",
    "reply_format",
    "split_free_form",
    "strip_identifiers",
    "IDENTIFIER_KINDS",
    "Deidentified",
    "deidentification_csv",
    "deidentify",
    # prompt sizes against the context
    "CHARS_PER_TOKEN",
    "ContextCheck",
    "StageBound",
    "check_context",
    "stage_bounds",
    # benchmark runner and judging
    "BENCH_PHASES",
    "PHASE_OF_STAGE",
    "FinishedWork",
    "finished_work",
    "plan_bench_judge",
    "plan_bench_run",
    "BENCH_PRESETS",
    "JUDGE_SCORES_FILE",
    "JUDGE_SCORE_COLUMNS",
    "BenchConfig",
    "BenchManifest",
    "BenchResult",
    "CaseRunSummary",
    "GenerationSettings",
    "GuidanceChoice",
    "JudgeBenchResult",
    "JudgeFileRecord",
    "JudgingSettings",
    "ModelOutputLimits",
    "OutputLimits",
    "PipelineBackend",
    "RoleFile",
    "case_artifact_path",
    "default_backend",
    "harmonise_role",
    "judge_bench",
    "keep_judge_file",
    "last_judging",
    "recorded_guidance",
    "read_judge_file_record",
    "split_fallbacks",
    "load_bench_cases",
    "load_bench_config",
    "load_bench_manifest",
    "calibration_settings",
    "load_calibrated_guidance",
    "load_case_runs",
    "load_run_cases",
    "plan_context",
    "prepare_bench",
    "model_slug",
    "records_key",
    "resolve_bench_config",
    "role_file_path",
    "run_bench",
]
