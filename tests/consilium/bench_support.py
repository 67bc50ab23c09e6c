"""Shared helpers of the benchmark-runner tests: synthetic cases, a scripted endpoint that
answers every stage of the real consilium pipeline and the judge, a stand-in pipeline, and a
config builder."""

from __future__ import annotations

import json
from pathlib import Path

from evolve.consilium import (
    BenchConfig,
    CallRecord,
    CaseRun,
    PipelineBackend,
    RoleAssignment,
    RoleOpinion,
    RoundRecord,
    Vote,
    resolve_bench_config,
)
from evolve.data import Case, PanelRole
from evolve.llm import ChatRequest, Client, Message, ResponseCache
from evolve.testing import FakeProvider

ROLES = ("Cardiology", "Nephrology")


def write_cases(path: Path, n: int = 2) -> Path:
    """A NEJM-style case file (doi, title, case_text, answer) with ``n`` synthetic cases."""
    rows = [
        {"doi": f"10.0000/bench-{i:02d}", "title": f"SYNTHETIC bench case {i}",
         "case_text": f"A 60-year-old patient {i} with chest pain and a creatinine rise to {2 + i} mg/dL.",
         "answer": f"Synthetic reference diagnosis {i}"}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _system(request: ChatRequest) -> str:
    return request.messages[0].content


def _free_text(request: ChatRequest) -> bool:
    """Free text asked for inside ``{"text": ...}`` (``max_text_chars``, e.g. the quick preset)."""
    fmt = request.response_format or {}
    return fmt.get("json_schema", {}).get("name") == "free_text"


def consilium_endpoint(request: ChatRequest) -> str:
    """Answers like :func:`_answer`; free text goes inside ``{"text": ...}`` when asked so."""
    answer = _answer(request)
    return json.dumps({"text": answer}) if _free_text(request) else answer


def _answer(request: ChatRequest) -> str:
    """Answers every pipeline stage (by ``tag``) and the judge.

    Panel: Cardiology (primary), Nephrology. Round 1: Nephrology votes no on the first report,
    the moderator revises; round 2: everyone votes yes (consensus after 2 rounds). The judge
    answers 2, or 3 when its prompt carries guidance containing 'calibrated'.
    """
    tag = request.tag
    user = request.messages[-1].content
    if tag in ("role_assignment", "role_worker", "role_consolidation"):
        return json.dumps({"roles": [
            {"name": "Cardiology", "primary": True, "rationale": "Chest pain needs a cardiac view."},
            {"name": "Nephrology", "primary": False, "rationale": "The creatinine rise needs a renal view."},
        ], "panel_rationale": "Heart and kidney together."})
    if tag in ("opinion", "opinion_worker", "opinion_consolidation"):
        role = "Cardiology" if "Cardiology" in _system(request) else "Nephrology"
        if request.response_format is not None and not _free_text(request):
            return json.dumps({
                "subjective_objective": f"{role}: chest pain, creatinine rise.",
                "syndromes_mechanisms": "Acute kidney injury; possible embolic mechanism.",
                "differential_diagnosis": "Cholesterol emboli; contrast nephropathy.",
                "tactics": "Check eosinophils, urine sediment; consider biopsy.",
                "final_opinion": f"{role}: cholesterol embolisation is most likely.",
            })
        return f"{role} reasoning: chest pain and a creatinine rise.\nFINAL OPINION:\n{role}: cholesterol emboli likely."
    if tag == "synthesis":
        return "Shared report, first draft: cholesterol emboli likely."
    if tag == "vote":
        if "Nephrology" in _system(request) and "first draft" in user:
            return json.dumps({"vote": "no", "critique": "Renal plan missing.", "proposed_revision": "Add a renal plan."})
        return json.dumps({"vote": "yes", "critique": "", "proposed_revision": ""})  # as the vote prompt asks
    if tag == "moderator":
        return json.dumps({"decision": "revise", "summary": "Added the renal plan.",
                           "revised_report": "Shared report, revised: cholesterol emboli likely; renal plan added."})
    if tag == "finalizer":
        if request.response_format is not None and not _free_text(request):
            return json.dumps({
                "summary": "Cholesterol emboli after catheterisation.", "resolved_disagreements": "Renal plan added.",
                "unresolved_disagreements": "None.", "final_differential": "Cholesterol emboli; contrast nephropathy.",
                "diagnostic_plan": "Eosinophils, biopsy.", "management_plan": "Supportive care.",
                "safety_warnings": "Avoid further contrast.", "final_second_opinion": "Cholesterol embolisation.",
                "confidence": "moderate",
            })
        return "Final second opinion: cholesterol embolisation, moderate confidence; renal plan added."
    if tag == "judge":
        guided = "GUIDANCE FOR THIS CRITERION:" in user and "calibrated" in user.split("GUIDANCE FOR THIS CRITERION:", 1)[1]
        return json.dumps({"rationale": "scripted", "score": "3" if guided else "2"})
    raise AssertionError(f"unexpected tag {tag!r}")


def make_client(tmp_path: Path, respond=consilium_endpoint, *, cache: str = "cache.sqlite",
                concurrency: int = 2) -> tuple[Client, FakeProvider]:
    provider = FakeProvider(respond)
    client = Client(provider, cache=ResponseCache(tmp_path / cache), max_concurrency=concurrency,
                    backoff_initial=0.01)
    return client, provider


def make_config(tmp_path: Path, cases: Path, **overrides) -> BenchConfig:
    data = {"run_id": "b", "archives_dir": tmp_path / "archives", "cases": cases, "models": ("model-a",),
            "endpoint": {"provider": "fake"}, "cache_path": tmp_path / "cache.sqlite"}
    data.update(overrides)
    return resolve_bench_config(preset="quick", overrides=data, environ={})


# -- a stand-in pipeline: few calls, through the client (so the cache and resume are real) -----


class StandInPipeline:
    """Implements ``assign_roles`` / ``run_case`` with 1 + 3 calls per case run."""

    def __init__(self, client: Client, config: BenchConfig) -> None:
        self.client = client
        self.config = config
        self.assigned: list[tuple[str, str]] = []

    def _call(self, stage: str, model: str, content: str) -> tuple[str, CallRecord]:
        request = ChatRequest(model=model, messages=(Message(role="user", content=content),), seed=42,
                              max_tokens=50, tag=stage)
        answer = self.client.complete(request)
        text = getattr(answer, "text", "")
        return text, CallRecord(stage=stage, model=model, prompt_tokens=getattr(answer, "prompt_tokens", 0),
                                completion_tokens=getattr(answer, "completion_tokens", 0),
                                cached=getattr(answer, "cached", False), error=getattr(answer, "error", ""))

    def assign_roles(self, case: Case, *, model: str) -> RoleAssignment:
        self.assigned.append((case.case_id, model))
        _, call = self._call("role_assignment", model, f"roles for {case.case_id}")
        if call.error:
            return RoleAssignment(case_id=case.case_id, model=model, calls=(call,), error=call.error)
        roles = tuple(PanelRole(name=r, primary=r == ROLES[0], rationale=f"{r} view") for r in ROLES)
        return RoleAssignment(case_id=case.case_id, model=model, roles=roles, panel_rationale="two views",
                              calls=(call,))

    def run_case(self, case: Case, *, model: str, condition: str, topology: str = "single", workers=(),
                 consolidator=None, roles: RoleAssignment | None = None) -> CaseRun:
        calls = list(roles.calls)
        opinions = []
        for r in roles.roles:
            text, call = self._call("opinion", model, f"{condition} opinion of {r.name} on {case.case_id}")
            calls.append(call)
            opinions.append(RoleOpinion(role=r.name, text=text, reasoning=f"{r.name} reasoning {text}",
                                        opinion=f"{r.name} opinion {text}"))
        final, call = self._call("finalizer", model, f"{condition} final on {case.case_id}")
        calls.append(call)
        votes = tuple(Vote(role=r.name, round=1, vote="yes") for r in roles.roles)
        return CaseRun(case_id=case.case_id, model=model, condition=condition, topology=topology,
                       roles=roles.roles, panel_rationale=roles.panel_rationale, opinions=tuple(opinions),
                       rounds=(RoundRecord(number=1, report="r", votes=votes, consensus=True, revised_report="r"),),
                       final_report="r", final=f"final {final}", stop_reason="consensus", rounds_completed=1,
                       consensus=True, first_round_consensus=True, calls=tuple(calls))


def standin_backend(version: str = "standin-1", prompts: dict | None = None) -> tuple[PipelineBackend, list]:
    """A backend over :class:`StandInPipeline`; the list collects the pipelines it made."""
    made: list[StandInPipeline] = []

    def make(client, config):
        made.append(StandInPipeline(client, config))
        return made[-1]

    catalog = prompts or {"opinion.user": "Give the ${role} opinion.", "final.user": "Write the final."}
    return PipelineBackend(make=make, version=version, catalog=lambda: dict(catalog)), made


def standin_endpoint(request: ChatRequest) -> str:
    return f"answer to: {request.messages[-1].content}"
