"""The consilium generation core on a scripted fake endpoint (consilium paper, role assignment-5.5)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from evolve.consilium import (
    PIPELINE_VERSION,
    CaseRun,
    ConsiliumPipeline,
    PipelineSettings,
    RoleAssignment,
    StageLimits,
    StructuredFinalReply,
)
from evolve.data import Case, ConsiliumRecord, PanelRole
from evolve.errors import ConfigError, EndpointError
from evolve.llm import ChatRequest, ChatResponse, Client, ResponseCache
from evolve.testing import FakeProvider

DOI = "10.1056/NEJMcpc2300900"
TITLE = "Case 7-2024: A 52-Year-Old Woman with Fever and Rash"
REFERENCE = "SENTINEL-REFERENCE adult-onset Still disease"
CASE = Case(
    case_id=DOI,
    title=TITLE,
    text=(
        f"{TITLE}. A 52-year-old woman had fever for three weeks (DOI: {DOI}), an evanescent salmon rash "
        "and arthralgia. Ferritin was 8000 ng/ml. See https://doi.org/10.1056/NEJMcpc2300900 for images."
    ),
    reference_answer=REFERENCE,
)
PANEL = [
    {"name": "Rheumatology", "primary": True, "rationale": "RATIONALE-RHEUM inflammatory arthritis and fever"},
    {"name": "Infectious Diseases", "primary": False, "rationale": "RATIONALE-ID prolonged fever work-up"},
]
ROLE_NAMES = [r["name"] for r in PANEL]

VoteFn = Callable[[str, int], dict]
ModeratorFn = Callable[[int], dict]


def _yes(role: str, version: int) -> dict:
    # as the vote prompt asks: empty strings beside "yes" (the schema sent accepts them, so they are cached)
    return {"vote": "yes", "critique": "", "proposed_revision": ""}


def _no(role: str, version: int) -> dict:
    return {"vote": "no", "critique": f"CRITIQUE-{role}-v{version}", "proposed_revision": f"REVISION-{role}-v{version}"}


def _revise(version: int) -> dict:
    return {"decision": "revise", "summary": f"SUMMARY-v{version}", "revised_report": f"REPORT v{version + 1}"}


class Script:
    """A fake consilium endpoint: answers by ``request.tag`` and by what the messages contain.

    Role assignment answers ``roles[attempt - 1]`` (the attempt is read from the number of
    assistant messages: a re-ask carries the previous answer). Opinions echo the DOI and title
    (so the tests can check the consilium strips them). The shared report is ``REPORT v<k>``;
    voters answer ``vote(role, k)`` and the moderator ``moderator(k)`` for the report they see.
    """

    def __init__(
        self,
        *,
        roles: list | None = None,
        vote: VoteFn = _yes,
        moderator: ModeratorFn = _revise,
        free_form_marker: bool = True,
        overrides: dict[str, Callable[[ChatRequest], object]] | None = None,
    ) -> None:
        self.roles = roles or [{"roles": PANEL, "panel_rationale": "PANEL-RATIONALE"}]
        self.vote = vote
        self.moderator = moderator
        self.free_form_marker = free_form_marker
        self.overrides = overrides or {}

    @staticmethod
    def role_of(request: ChatRequest) -> str:
        return re.search(r"in this role: (.+?)\. ", request.messages[0].content).group(1)

    @staticmethod
    def version(request: ChatRequest) -> int:
        return int(re.search(r"<<<SHARED REPORT>>>\nREPORT v(\d+)", request.messages[1].content).group(1))

    def __call__(self, request: ChatRequest):
        if request.tag in self.overrides:
            out = self.overrides[request.tag](request)
            if out is not None:
                return out
        structured = request.response_format is not None
        if request.tag in ("role_assignment", "role_worker", "role_consolidation"):
            attempt = sum(m.role == "assistant" for m in request.messages)
            reply = self.roles[min(attempt, len(self.roles) - 1)]
            return reply if isinstance(reply, str) else json.dumps(reply)
        if request.tag in ("opinion", "opinion_worker"):
            role = self.role_of(request)
            if structured:
                return json.dumps({
                    "subjective_objective": f"S/O of {role} by {request.model}: fever, rash ({DOI}).",
                    "syndromes_mechanisms": f"Syndrome of {role}: systemic inflammation.",
                    "differential_diagnosis": f"DDx of {role}: autoinflammation vs infection; {TITLE}.",
                    "tactics": f"Tactics of {role}: cultures, ferritin.",
                    "final_opinion": f"OPINION of {role} by {request.model}.",
                })
            closing = "FINAL OPINION:\n" if self.free_form_marker else ""
            return (f"Reasoning of {role} by {request.model} on {TITLE} (DOI: {DOI}).\n\nMore reasoning.\n\n"
                    f"{closing}OPINION of {role} by {request.model}.")
        if request.tag == "opinion_consolidation":
            role = self.role_of(request)
            n = request.messages[-1].content.count("<<<WORKER OPINION ")
            if structured:
                return json.dumps({k: f"merged {k} of {role} from {n} by {request.model}" for k in (
                    "subjective_objective", "syndromes_mechanisms", "differential_diagnosis", "tactics", "final_opinion")})
            return f"Merged reasoning of {role} from {n} workers by {request.model}.\n\nFINAL OPINION: merged {role}."
        if request.tag == "synthesis":
            return "REPORT v0"
        if request.tag == "vote":
            return json.dumps(self.vote(self.role_of(request), self.version(request)))
        if request.tag == "moderator":
            return json.dumps(self.moderator(self.version(request)))
        if request.tag == "finalizer":
            if structured:
                return json.dumps({
                    "summary": "SUMMARY", "resolved_disagreements": "none", "unresolved_disagreements": "UNRESOLVED",
                    "final_differential": "DIFFERENTIAL", "diagnostic_plan": "DIAGNOSTICS",
                    "management_plan": "MANAGEMENT", "safety_warnings": "SAFETY",
                    "final_second_opinion": "CONCLUSION", "confidence": "moderate",
                })
            return "FINAL NARRATIVE keeping the disagreement."
        raise AssertionError(f"unexpected tag {request.tag!r}")


def make(script: Script, *, cache: ResponseCache | None = None, **settings) -> tuple[ConsiliumPipeline, FakeProvider, Client]:
    provider = FakeProvider(script)
    client = Client(provider, cache=cache, max_concurrency=4, backoff_initial=0.01)
    return ConsiliumPipeline(client, PipelineSettings(**settings)), provider, client


@pytest.fixture
def run_with():
    clients: list[Client] = []

    def _run(script: Script, *, condition="free-form", cache=None, settings=None, **kwargs) -> tuple[CaseRun, FakeProvider]:
        pipe, provider, client = make(script, cache=cache, **(settings or {}))
        clients.append(client)
        return pipe.run_case(CASE, model="m", condition=condition, **kwargs), provider

    yield _run
    for c in clients:
        c.close()


def tags(provider: FakeProvider, tag: str) -> list[ChatRequest]:
    return [r for r in provider.requests if r.tag == tag]


def assert_calls_complete(run: CaseRun, provider: FakeProvider) -> None:
    assert len(run.calls) == provider.calls
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in run.calls if not c.error.startswith("endpoint"))
    assert all(c.prompt_hash and c.model for c in run.calls)


# -- stop rules (consilium paper, interactive consilium) --------------------------------------------------------------------


def test_consensus_in_round_one(run_with):
    run, provider = run_with(Script())
    assert (run.stop_reason, run.rounds_completed, run.consensus, run.first_round_consensus) == ("consensus", 1, True, True)
    assert run.final_report == "REPORT v0" and run.rounds[0].consensus and run.rounds[0].decision is None
    assert [v.role for v in run.rounds[0].votes] == ROLE_NAMES
    assert not tags(provider, "moderator")
    assert run.final == "FINAL NARRATIVE keeping the disagreement."
    assert [c.stage for c in run.calls] == ["role_assignment", "opinion", "opinion", "synthesis", "vote", "vote", "finalizer"]
    assert_calls_complete(run, provider)
    record = run.to_record()
    assert isinstance(record, ConsiliumRecord) and record.stop_reason == "consensus" and record.rounds == 1
    assert ConsiliumRecord.model_validate_json(record.model_dump_json()) == record
    assert CaseRun.model_validate_json(run.model_dump_json()) == run


def test_consensus_in_round_three(run_with):
    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 2 else _no(role, v)))
    assert (run.stop_reason, run.rounds_completed, run.consensus, run.first_round_consensus) == ("consensus", 3, True, False)
    assert [r.report for r in run.rounds] == ["REPORT v0", "REPORT v1", "REPORT v2"]
    assert [r.decision for r in run.rounds] == ["revise", "revise", None]
    assert run.final_report == "REPORT v2"
    assert len(tags(provider, "moderator")) == 2 and len(tags(provider, "vote")) == 6
    run.to_record()


def test_no_substantive_change(run_with):
    nsc = {"decision": "no_substantive_change", "summary": "objections not supported by the case", "revised_report": ""}
    run, provider = run_with(Script(vote=lambda role, v: _no(role, v) if role == "Rheumatology" else _yes(role, v),
                                    moderator=lambda v: nsc))
    assert (run.stop_reason, run.rounds_completed, run.consensus) == ("no_substantive_change", 1, False)
    assert run.rounds[0].decision == "no_substantive_change" and run.rounds[0].revised_report == "REPORT v0"
    assert run.final_report == "REPORT v0"
    assert [v.vote for v in run.rounds[0].votes] == ["no", "yes"]
    assert run.rounds[0].votes[0].critique == "CRITIQUE-Rheumatology-v0"
    assert len(tags(provider, "finalizer")) == 1
    run.to_record()


def test_repeated_report_state(run_with):
    def moderator(v: int) -> dict:
        if v == 1:  # back to the first report, with different whitespace
            return {"decision": "revise", "summary": "undo", "revised_report": "  REPORT\n v0 "}
        return _revise(v)

    run, provider = run_with(Script(vote=_no, moderator=moderator))
    assert (run.stop_reason, run.rounds_completed, run.consensus) == ("repeated_report", 2, False)
    assert run.rounds[-1].decision == "revise"
    assert " ".join(run.final_report.split()) == "REPORT v0"
    assert len(tags(provider, "vote")) == 4
    run.to_record()


def test_max_rounds_keeps_the_last_revision_without_a_sixth_vote(run_with):
    run, provider = run_with(Script(vote=_no))
    assert (run.stop_reason, run.rounds_completed, run.consensus) == ("max_rounds", 5, False)
    assert [r.number for r in run.rounds] == [1, 2, 3, 4, 5]
    assert len(tags(provider, "vote")) == 5 * len(ROLE_NAMES) and len(tags(provider, "moderator")) == 5
    assert run.final_report == "REPORT v5" == run.rounds[-1].revised_report
    assert not any("REPORT v5" in r.messages[-1].content for r in tags(provider, "vote"))
    assert "REPORT v5" in tags(provider, "finalizer")[0].messages[-1].content
    assert {v.round for r in run.rounds for v in r.votes} == {1, 2, 3, 4, 5}
    run.to_record()


def test_round_limit_follows_settings(run_with):
    run, provider = run_with(Script(vote=_no), settings={"max_rounds": 2})
    assert (run.stop_reason, run.rounds_completed, run.final_report) == ("max_rounds", 2, "REPORT v2")


def test_a_failing_vote_fails_the_case(run_with):
    def boom(request: ChatRequest):
        if Script.role_of(request) == "Infectious Diseases":
            return EndpointError("HTTP 400: model not found")
        return None

    run, provider = run_with(Script(overrides={"vote": boom}))
    assert run.stop_reason == "failure" and not run.consensus and run.rounds_completed == 0
    assert "vote" in run.error and "Infectious Diseases" in run.error and "model not found" in run.error
    assert not tags(provider, "finalizer") and not tags(provider, "moderator")
    failed = [c for c in run.calls if c.error]
    assert len(failed) == 1 and failed[0].stage == "vote" and failed[0].round == 1  # no re-ask for an endpoint error
    assert len(run.opinions) == 2
    with pytest.raises(ValueError, match="failed"):
        run.to_record()


def test_an_invalid_vote_is_reasked_then_fails(run_with):
    run, provider = run_with(Script(vote=lambda role, v: {"vote": "maybe"} if role == "Rheumatology" else _yes(role, v)))
    assert run.stop_reason == "failure" and "after 3 attempt" in run.error
    rheum = [c for c in run.calls if c.stage == "vote" and c.role == "Rheumatology"]
    assert [c.attempt for c in rheum] == [1, 2, 3] and all(c.error for c in rheum)
    last = [r for r in tags(provider, "vote") if Script.role_of(r) == "Rheumatology"][-1]
    assert [m.role for m in last.messages] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_a_no_vote_without_revision_is_reasked(run_with):
    answers = iter([{"vote": "no", "critique": "wrong", "proposed_revision": ""}])
    run, provider = run_with(Script(vote=lambda role, v: next(answers, _yes(role, v)) if role == "Rheumatology" else _yes(role, v)))
    assert run.stop_reason == "consensus"
    rheum = [c for c in run.calls if c.stage == "vote" and c.role == "Rheumatology"]
    assert [c.attempt for c in rheum] == [1, 2] and "proposed_revision" in rheum[0].error and not rheum[1].error


def test_a_failing_moderator_keeps_the_round(run_with):
    run, provider = run_with(Script(vote=_no, moderator=lambda v: {"decision": "revise", "summary": "x", "revised_report": ""}))
    assert run.stop_reason == "failure" and "moderator" in run.error and "revised_report" in run.error
    assert run.rounds_completed == 1 and run.rounds[0].decision is None and len(run.rounds[0].votes) == 2
    assert len(tags(provider, "moderator")) == 3


def test_round_two_voters_see_round_one_reviews_and_the_decision(run_with):
    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 1 else _no(role, v)))
    assert run.rounds_completed == 2
    first = [r for r in tags(provider, "vote") if Script.version(r) == 0]
    second = [r for r in tags(provider, "vote") if Script.version(r) == 1]
    assert len(first) == len(second) == 2
    for r in first:
        assert "REVIEWS OF ROUND" not in r.messages[-1].content and "SUMMARY-v0" not in r.messages[-1].content
    for r in second:
        user = r.messages[-1].content
        assert "<<<REVIEWS OF ROUND 1>>>" in user and "<<<MODERATOR DECISION AFTER ROUND 1>>>" in user
        for role in ROLE_NAMES:
            assert f"CRITIQUE-{role}-v0" in user and f"REVISION-{role}-v0" in user
        assert "SUMMARY-v0" in user and "revised" in user
        assert "review round 2" in user


# -- role assignment (consilium paper, role assignment) ---------------------------------------------------------------


def test_duplicate_role_names_are_reasked():
    dup = {"roles": [PANEL[0], {**PANEL[1], "name": "  rheumatology "}], "panel_rationale": "p"}
    pipe, provider, client = make(Script(roles=[dup, {"roles": PANEL, "panel_rationale": "p"}]))
    with client:
        roles = pipe.assign_roles(CASE, model="m")
    assert roles.ok and [r.name for r in roles.roles] == ROLE_NAMES
    assert [c.attempt for c in roles.calls] == [1, 2]
    assert "same name" in roles.calls[0].error and roles.calls[1].error == ""
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]
    assert json.loads(second[2].content) == dup and "same name" in second[3].content


def test_two_primaries_are_reasked():
    two = {"roles": [PANEL[0], {**PANEL[1], "primary": True}], "panel_rationale": "p"}
    pipe, provider, client = make(Script(roles=[two, {"roles": PANEL, "panel_rationale": "p"}]))
    with client:
        roles = pipe.assign_roles(CASE, model="m")
    assert roles.ok and [r.primary for r in roles.roles] == [True, False]
    assert "exactly one role must have primary" in roles.calls[0].error
    assert "exactly one role" in provider.requests[1].messages[-1].content


def test_persistent_role_violation_fails_the_case(run_with):
    none = {"roles": [{**r, "primary": False} for r in PANEL], "panel_rationale": "p"}
    run, provider = run_with(Script(roles=[none]))
    assert run.stop_reason == "failure" and run.error.startswith("role_assignment: ") and "after 3 attempt" in run.error
    # the stage is named once, and the fix names what a user can change (not an internal class)
    assert run.error.count("role_assignment") == 1 and "PipelineSettings" not in run.error
    assert '--config' in run.error and '"max_reasks"' in run.error and "--model" in run.error
    assert [(c.stage, c.attempt) for c in run.calls] == [("role_assignment", 1), ("role_assignment", 2), ("role_assignment", 3)]
    assert all(c.error for c in run.calls) and provider.calls == 3
    assert run.roles == () and run.opinions == ()


def test_invalid_json_and_too_many_roles_are_reasked():
    six = {"roles": [{"name": f"Role {k}", "primary": k == 0, "rationale": "r"} for k in range(6)], "panel_rationale": "p"}
    pipe, provider, client = make(Script(roles=["not json", six, {"roles": PANEL, "panel_rationale": "p"}]))
    with client:
        roles = pipe.assign_roles(CASE, model="m")
    assert roles.ok and [c.attempt for c in roles.calls] == [1, 2, 3]
    assert "JSON" in roles.calls[0].error and "roles" in roles.calls[1].error


def test_reused_roles_cost_no_call_and_must_match_the_case(run_with):
    given = RoleAssignment(case_id=CASE.case_id, model="m", roles=(
        PanelRole(name="Hematology", primary=True, rationale="why"), PanelRole(name="Dermatology", rationale="why")))
    run, provider = run_with(Script(), roles=given)
    assert not tags(provider, "role_assignment") and [r.name for r in run.roles] == ["Hematology", "Dermatology"]
    assert [o.role for o in run.opinions] == ["Hematology", "Dermatology"]
    other = RoleAssignment(case_id="other-case", model="m", roles=given.roles)
    with pytest.raises(ConfigError, match="not"):
        run_with(Script(), roles=other)
    with pytest.raises(ValueError, match="exactly one role"):
        RoleAssignment(case_id="c", roles=(PanelRole(name="A"), PanelRole(name="B")))


def test_configuration_errors(run_with):
    with pytest.raises(ConfigError, match="worker"):
        run_with(Script(), topology="n+1")
    with pytest.raises(ConfigError, match="only used"):
        run_with(Script(), workers=["w1"])
    with pytest.raises(ConfigError, match="condition"):
        run_with(Script(), condition="bullet-points")


# -- what each stage sees ----------------------------------------------------------------------


@pytest.mark.parametrize("condition", ["free-form", "structured"])
@pytest.mark.parametrize("topology", ["single", "n+1"])
def test_reference_answer_never_reaches_a_generating_model(run_with, condition, topology):
    extra = {"workers": ["w1", "w2"]} if topology == "n+1" else {}
    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 1 else _no(role, v)),
                             condition=condition, topology=topology, **extra)
    assert run.stop_reason == "consensus"
    for request in provider.requests:
        for message in request.messages:
            assert "SENTINEL-REFERENCE" not in message.content and "Still disease" not in message.content


def test_no_stage_sees_an_identifier(run_with):
    """Before (issue 23): role assignment and the opinions received the DOI and the title."""
    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 1 else _no(role, v)))
    assert {r.tag for r in provider.requests} == {"role_assignment", "opinion", "synthesis", "vote", "moderator", "finalizer"}
    for request in provider.requests:
        text = "\n".join(m.content for m in request.messages)
        assert DOI not in text and "NEJMcpc" not in text and TITLE not in text and "7-2024" not in text
        assert "A 52-Year-Old Woman with Fever and Rash" not in text  # the title heading run into the text
        assert "Ferritin was 8000 ng/ml" in text and "salmon rash" in text
    assert DOI in run.opinions[0].text  # the recorded opinion itself is kept as written


def test_role_prompts_name_the_role_but_not_its_rationale_or_primacy(run_with):
    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 1 else _no(role, v)))
    for request in tags(provider, "opinion") + tags(provider, "vote"):
        role = Script.role_of(request)
        text = "\n".join(m.content for m in request.messages)
        assert role in text
        assert "RATIONALE-" not in text and "PANEL-RATIONALE" not in text and "primary" not in text.lower()
        others = [n for n in ROLE_NAMES if n != role]
        if request.tag == "opinion":
            assert not any(o in text for o in others)
    assert sorted(Script.role_of(r) for r in tags(provider, "opinion")) == sorted(ROLE_NAMES)


def test_free_form_opinion_is_split_at_the_marker(run_with):
    run, _ = run_with(Script(vote=_yes))
    op = run.opinions[0]
    assert op.role == "Rheumatology" and op.structured is None
    assert op.opinion == "OPINION of Rheumatology by m."
    assert op.reasoning.startswith("Reasoning of Rheumatology") and "FINAL OPINION" not in op.reasoning
    assert op.text.endswith(op.opinion)
    assert all(not c.error for c in run.calls)


def test_free_form_opinion_without_marker_falls_back_and_says_so(run_with):
    run, _ = run_with(Script(free_form_marker=False))
    op = run.opinions[0]
    assert op.reasoning == op.text and op.opinion == "OPINION of Rheumatology by m."
    notes = [c.error for c in run.calls if c.stage == "opinion"]
    assert len(notes) == 2 and all("marker" in n for n in notes)
    assert run.stop_reason == "consensus"
    run.to_record()


def test_structured_opinion_and_final(run_with):
    run, provider = run_with(Script(), condition="structured")
    op = run.opinions[0]
    assert op.structured is not None and op.opinion == "OPINION of Rheumatology by m."
    assert op.reasoning.index("## Subjective and objective information") < op.reasoning.index("## Diagnostic and treatment tactics")
    assert "Final clinical opinion" not in op.reasoning and "OPINION of" not in op.reasoning
    assert op.text.startswith(op.reasoning) and op.text.rstrip().endswith(op.opinion)
    assert isinstance(run.final_structured, StructuredFinalReply)
    headings = re.findall(r"^## (.+)$", run.final, re.M)
    assert headings == ["Summary", "Resolved disagreements", "Unresolved disagreements", "Final differential diagnosis",
                        "Diagnostic plan", "Management plan", "Safety warnings", "Final second opinion", "Confidence"]
    assert "UNRESOLVED" in run.final and "moderate" in run.final
    for stage in ("opinion", "vote", "finalizer", "role_assignment"):
        assert all(r.response_format is not None for r in tags(provider, stage))
    assert tags(provider, "synthesis")[0].response_format is None
    run.to_record()


def test_n_plus_one_workers_and_consolidator(run_with):
    workers = ["w1", "w2", "w3"]
    for condition in ("free-form", "structured"):
        run, provider = run_with(Script(), condition=condition, topology="n+1", workers=workers, consolidator="boss")
        assert run.stop_reason == "consensus" and run.workers == tuple(workers) and run.consolidator == "boss"
        worker_calls = tags(provider, "opinion_worker")
        assert sorted((Script.role_of(r), r.model) for r in worker_calls) == sorted(
            (role, w) for role in ROLE_NAMES for w in workers)
        merges = tags(provider, "opinion_consolidation")
        assert len(merges) == 2 and {r.model for r in merges} == {"boss"}
        for request in merges:
            role = Script.role_of(request)
            for w in workers:
                assert f"of {role} by {w}" in request.messages[-1].content
        assert not tags(provider, "opinion")
        for op in run.opinions:
            assert len(op.worker_texts) == 3 and all(f"by w{k}" in t for k, t in zip((1, 2, 3), op.worker_texts))
            assert "from 3" in op.opinion or "from 3" in op.text
        # the paper's 3+1 throughout: every worker proposes a panel, the consolidator merges the
        # proposals (it sees each of them) and runs the consilium and the finalizer
        proposals = tags(provider, "role_worker")
        assert sorted(r.model for r in proposals) == workers and not tags(provider, "role_assignment")
        (merge,) = tags(provider, "role_consolidation")
        assert merge.model == "boss" and merge.messages[-1].content.count("<<<PANEL PROPOSAL ") == 3
        assert "Rheumatology (primary)" in merge.messages[-1].content  # the proposals, rendered
        assert {r.model for r in provider.requests if r.tag in ("synthesis", "vote", "moderator", "finalizer")} == {"boss"}
        assert [c.stage for c in run.calls][:4] == ["role_worker"] * 3 + ["role_consolidation"]
        run.to_record()


def test_n_plus_one_consolidator_defaults_to_the_model(run_with):
    run, provider = run_with(Script(), topology="n+1", workers=["w1"])
    assert run.consolidator == "m" and {r.model for r in tags(provider, "opinion_consolidation")} == {"m"}


# -- decoding, limits, failures of a call (consilium paper, per-case record-5.6) --------------------------------------


def test_every_request_uses_the_settings_and_its_stage_limit(run_with):
    limits = StageLimits(role_assignment=111, opinion=222, consilium=333, finalizer=444)
    run, provider = run_with(Script(vote=_no, moderator=lambda v: _revise(v)), condition="structured",
                             settings={"temperature": 0.2, "top_p": 0.9, "seed": 7, "limits": limits, "max_rounds": 1})
    expected = {"role_assignment": 111, "opinion": 222, "synthesis": 333, "vote": 333, "moderator": 333, "finalizer": 444}
    assert {r.tag for r in provider.requests} == set(expected)
    for request in provider.requests:
        assert (request.temperature, request.top_p, request.seed) == (0.2, 0.9, 7)
        assert request.max_tokens == expected[request.tag]
    assert [c.stage for c in run.calls] == [r.tag for r in provider.requests]


def test_schemas_are_strict_and_length_limits_optional(run_with):
    _, provider = run_with(Script(vote=_no), settings={"max_rounds": 1})
    fmt = tags(provider, "role_assignment")[0].response_format
    role_schema = fmt["json_schema"]["schema"]["$defs"]["RoleReply"]
    assert role_schema["properties"]["name"]["maxLength"] == 80
    vote = tags(provider, "vote")[0].response_format["json_schema"]["schema"]
    assert vote["required"] == ["vote", "critique", "proposed_revision"] and "default" not in json.dumps(vote)
    _, provider = run_with(Script(), settings={"schema_limits": False})
    text = json.dumps(tags(provider, "role_assignment")[0].response_format)
    assert "maxLength" not in text and "minLength" not in text


def test_a_cut_answer_is_reasked(run_with):
    cut = iter([ChatResponse(text="REPORT v0 trunc", finish_reason="length", prompt_tokens=9, completion_tokens=3)])
    run, provider = run_with(Script(overrides={"synthesis": lambda r: next(cut, None)}))
    assert run.stop_reason == "consensus"
    synth = [c for c in run.calls if c.stage == "synthesis"]
    assert [(c.attempt, c.finish_reason) for c in synth] == [(1, "length"), (2, "stop")]
    assert "cut off" in synth[0].error and synth[0].completion_tokens == 3
    assert "cut off" in tags(provider, "synthesis")[1].messages[-1].content


def test_an_endpoint_failure_is_not_reasked(run_with):
    run, provider = run_with(Script(overrides={"synthesis": lambda r: EndpointError("HTTP 401: bad key")}))
    assert run.stop_reason == "failure" and "synthesis" in run.error and "bad key" in run.error
    assert len(tags(provider, "synthesis")) == 1 and not tags(provider, "vote")
    assert len(run.opinions) == 2 and run.rounds == ()


def test_a_repeated_run_is_served_from_the_cache(tmp_path):
    script = Script(vote=lambda role, v: _yes(role, v) if v >= 2 else _no(role, v))
    cache = ResponseCache(tmp_path / "cache.sqlite")
    pipe, provider, client = make(script, cache=cache)
    with client:
        first = pipe.run_case(CASE, model="m", condition="structured", topology="n+1", workers=["w1", "w2"])
        paid = provider.calls
        second = pipe.run_case(CASE, model="m", condition="structured", topology="n+1", workers=["w1", "w2"])
    assert provider.calls == paid and not any(c.cached for c in first.calls)
    assert all(c.cached for c in second.calls) and len(second.calls) == len(first.calls)
    assert second.model_copy(update={"calls": ()}) == first.model_copy(update={"calls": ()})
    assert second.tokens == first.tokens > 0


@pytest.mark.parametrize("schema_limits", [True, False])
def test_every_reply_the_readers_accept_fits_the_schema_sent_and_is_not_paid_again(tmp_path, schema_limits):
    """Before (issue 23): the vote schema asked for text in "critique" and "proposed_revision"
    (and the moderator's in "revised_report") while the prompts tell a "yes" vote and a "no
    substantive change" to leave them empty; the readers accepted such replies, the response
    cache refused them as outside the schema, and a resumed run paid for every one again."""
    from evolve.llm._schema import schema_violation, sent_schema

    no_change = {"decision": "no_substantive_change", "summary": "Wording only.", "revised_report": ""}
    script = Script(moderator=lambda v: no_change)  # every vote an empty "yes"
    script_first_no = Script(vote=_no, moderator=lambda v: no_change)
    with Client(FakeProvider(lambda r: "{}")) as client:
        pipe = ConsiliumPipeline(client, PipelineSettings(schema_limits=schema_limits))
    for name, reply in (("vote", _yes("r", 0)), ("moderator", no_change)):
        assert schema_violation(reply, sent_schema(pipe._formats[name], schema_limits=schema_limits)) is None, name
    for s in (script, script_first_no):  # a consensus of empty "yes" votes; a "no" round ended by "no change"
        cache = ResponseCache(tmp_path / f"cache-{id(s)}.sqlite")
        pipe, provider, client = make(s, cache=cache, schema_limits=schema_limits)
        with client:
            first = pipe.run_case(CASE, model="m", condition="structured")
            paid = provider.calls
            again = pipe.run_case(CASE, model="m", condition="structured")
        assert first.stop_reason in ("consensus", "no_substantive_change") and first.error == ""
        assert provider.calls == paid and all(c.cached for c in again.calls)


def test_roles_reused_across_conditions(tmp_path):
    pipe, provider, client = make(Script())
    with client:
        roles = pipe.assign_roles(CASE, model="m")
        runs = [pipe.run_case(CASE, model="m", condition=c, roles=roles) for c in ("free-form", "structured")]
    assert len(tags(provider, "role_assignment")) == 1
    for run in runs:
        assert run.roles == roles.roles and run.calls[0] == roles.calls[0]
        assert [c.stage for c in run.calls].count("role_assignment") == 1


def test_manifest_lists_prompts_settings_and_schemas():
    pipe, _, client = make(Script())
    with client:
        manifest = pipe.manifest()
    json.dumps(manifest)
    assert manifest["pipeline_version"] == PIPELINE_VERSION == "5" and manifest["settings"]["seed"] == 42
    assert "vote.user" in manifest["prompts"] and "role_consolidation.user" in manifest["prompts"] and set(manifest["response_formats"]) == {
        "role_assignment", "structured_opinion", "vote", "moderator", "structured_final"}


def test_tokens_and_prompt_hash_recorded_for_every_call(run_with):
    from evolve.judge import prompt_hash

    run, provider = run_with(Script(vote=lambda role, v: _yes(role, v) if v >= 2 else _no(role, v)),
                             condition="structured", topology="n+1", workers=["w1", "w2", "w3"])
    assert run.stop_reason == "consensus" and len(run.calls) == provider.calls == 3 + 1 + 6 + 2 + 1 + 6 + 2 + 1  # 3 panel proposals + their merge
    assert all((c.prompt_tokens, c.completion_tokens, c.finish_reason, c.error, c.cached) == (100, 20, "stop", "", False)
               for c in run.calls)
    assert sorted(c.prompt_hash for c in run.calls) == sorted(prompt_hash(r) for r in provider.requests)
    assert sorted((c.stage, c.model, c.role, c.round) for c in run.calls) == sorted(
        (r.tag, r.model, Script.role_of(r) if r.tag in ("opinion_worker", "opinion_consolidation", "vote") else "",
         Script.version(r) + 1 if r.tag in ("vote", "moderator") else None) for r in provider.requests)
    assert run.tokens == 120 * len(run.calls)


def test_a_failing_worker_fails_the_case(run_with):
    def worker(request: ChatRequest):
        return EndpointError("HTTP 404: no such model") if request.model == "w2" else None

    run, provider = run_with(Script(overrides={"opinion_worker": worker}), topology="n+1", workers=["w1", "w2"])
    assert run.stop_reason == "failure" and "opinion_worker" in run.error and "no such model" in run.error
    assert not tags(provider, "opinion_consolidation") and run.opinions == ()


def test_character_bounds_reach_every_schema_and_free_text_is_wrapped():
    """max_field_chars / max_text_chars (the quick preset): every text field of a structured
    answer gets maxLength, free text is asked for as {"text": ...} and read back unwrapped."""
    import json as _json

    from evolve.consilium._pipeline import ConsiliumPipeline, PipelineSettings
    from evolve.llm import Client
    from evolve.testing import FakeProvider

    settings = PipelineSettings(max_field_chars=120, max_text_chars=500)
    with Client(FakeProvider(lambda r: "{}")) as client:
        pipe = ConsiliumPipeline(client, settings)
    vote = pipe._formats["vote"]["json_schema"]["schema"]["properties"]
    assert vote["critique"]["maxLength"] == 120 and "maxLength" not in vote["vote"]
    moderator = pipe._formats["moderator"]["json_schema"]["schema"]["properties"]
    assert moderator["revised_report"]["maxLength"] == 500 and moderator["summary"]["maxLength"] == 120
    roles = _json.dumps(pipe._formats["role_assignment"])
    assert '"maxLength": 80' in roles  # a tighter bound of the reply model is kept
    assert pipe._formats["free_text"]["json_schema"]["schema"]["properties"]["text"]["maxLength"] == 500
