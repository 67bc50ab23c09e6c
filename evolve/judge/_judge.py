"""Judge prompt assembly and typed outcomes (consilium paper, judge calls)."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from evolve.data._models import Case, Target
from evolve.llm import (
    MAX_OUTPUT_TOKENS,
    CallFailure,
    ChatRequest,
    ChatResponse,
    Message,
    fence,
    parse_json_object,
    response_format,
    validate_reply,
    validation_problem,
)
from evolve.records import Record
from evolve.rubric import MAX_GUIDANCE_CHARS, Criterion, Rubric

NOT_EVALUABLE = "not_evaluable"



class JudgeSettings(Record):
    """Decoding settings of judge calls (consilium paper, judge calls: temperature 0, top_p 1, fixed seed, <= 8,000 tokens).

    Attributes:
        model: Model id sent to the endpoint.
        temperature: Sampling temperature.
        top_p: Nucleus mass.
        max_tokens: Output limit, tokens: at most :data:`evolve.llm.MAX_OUTPUT_TOKENS`, and at
            most the endpoint's context where a run knows it. Must exceed what
            ``rationale_max_chars`` needs.
        rationale_max_chars: ``maxLength`` of the rationale in the output schema, characters;
            bounds generation so JSON is never cut mid-way.
        layout: Order of the user message (:meth:`Judge.messages`). ``criterion-first``
            (the default): criterion, reply format, case, target, guidance - the parts every
            call of a criterion shares come first, then the case its targets share, and only
            the guidance differs between two candidates judged on one target, so a prefix
            cache serves nearly the whole prompt. ``target-first``: case, target, criterion,
            guidance, reply format - the layout of judge files and runs made before it
            (judge file version 1, configuration version 3), read and scored as they were.
    """

    model: str = "local"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=8000, ge=16, le=MAX_OUTPUT_TOKENS)
    rationale_max_chars: int = Field(default=1200, ge=20, le=20_000)
    layout: Literal["criterion-first", "target-first"] = "criterion-first"


def with_legacy_layout(record: Any, *, older_than: int, key: str = "judge") -> Any:
    """``record`` (a mapping about to be validated) with ``record[key]["layout"]`` set to
    ``target-first`` when its integer ``version`` is below ``older_than`` and the judge settings
    there name no layout: a record of a format version from before the layout was recorded was
    judged with that layout. Anything else comes back unchanged."""
    if not (isinstance(record, dict) and isinstance(record.get("version"), int) and record["version"] < older_than):
        return record
    if isinstance(record.get(key), dict) and "layout" not in record[key]:
        return {**record, key: {**record[key], "layout": "target-first"}}
    return record


class JudgeOutcome(BaseModel):
    """The typed result of one judge call.

    Attributes:
        outcome: ``score`` (numeric), ``not_evaluable`` (the judge declined under the
            applicability rule) or ``model_failure`` (endpoint error, truncated or invalid
            output). A failure is never a 0.
        score: Integer on the criterion's scale when ``outcome == "score"``, else None.
        rationale: The judge's rationale (or the failure reason).
        prompt_tokens: Input tokens.
        completion_tokens: Output tokens.
        cached_prompt_tokens: Prompt tokens the server took from its prefix cache (as the
            endpoint reported them when the call was made; 0 when it reports none).
        cached: Served from the response cache.
        prompt_hash: SHA-256 (first 16 hex) of the exact messages sent.
    """

    model_config = ConfigDict(frozen=True)

    outcome: Literal["score", "not_evaluable", "model_failure"]
    score: int | None = None
    rationale: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached: bool = False
    prompt_hash: str = ""


def verdict_model(criterion: Criterion, rationale_max_chars: int) -> type[BaseModel]:
    """Pydantic model of the judge's JSON answer for ``criterion`` (drives the JSON schema).

    Fields, in generation order: ``rationale`` (<= ``rationale_max_chars``) then ``score``, a
    string from ``"scale_min".."scale_max"`` or, if the criterion allows it, ``"not_evaluable"``.
    """
    choices = tuple(str(s) for s in criterion.scores)
    if criterion.allow_not_evaluable:
        choices += (NOT_EVALUABLE,)
    return _verdict_model(choices, rationale_max_chars)


@functools.lru_cache(maxsize=64)
def _verdict_model(choices: tuple[str, ...], rationale_max_chars: int) -> type[BaseModel]:
    """The verdict model of a score scale (built once per scale and limit: every judge of a
    calibration, replay or scoring run asks for it, and pydantic builds a model slowly)."""
    score_type: Any = Literal[choices]  # built at run time: a type checker cannot see its values
    return create_model(
        "JudgeVerdict",
        __config__=ConfigDict(extra="forbid"),
        rationale=(str, Field(max_length=rationale_max_chars)),
        score=(score_type, ...),
    )


class Judge:
    """Builds judge requests and parses their outcomes for one rubric.

    Message layout (shared parts first, so a server can serve most of a prompt from its prefix
    cache): system = protocol; user, with ``settings.layout`` ``criterion-first`` = criterion
    with anchors and applicability rule, output instruction, case, target, [statement],
    [reference, for criteria with ``show_reference``], [guidance]; with ``target-first`` (judges made before that layout) = case, target,
    [statement], [reference], criterion, [guidance], output instruction.

    Args:
        rubric: The rubric the criteria come from.
        protocol: Fixed protocol text (``judge_prompts/<rubric>/protocol.md``).
        settings: Decoding settings.
        schema_limits: Whether the endpoint is sent the rationale's ``maxLength`` (the client's
            :func:`~evolve.llm.limits_sent`). Sent, a longer rationale is a ``model_failure``
            (never clipped); not sent, it is read whole (the model was never told the limit).
    """

    def __init__(self, rubric: Rubric, protocol: str, settings: JudgeSettings | None = None, *,
                 schema_limits: bool = True) -> None:
        self.rubric = rubric
        self.protocol = protocol.strip()
        self.settings = settings or JudgeSettings()
        self.schema_limits = schema_limits
        self._formats: dict[str, tuple[type[BaseModel], dict]] = {}

    def _format(self, criterion: Criterion) -> tuple[type[BaseModel], dict]:
        if criterion.criterion_id not in self._formats:
            model = verdict_model(criterion, self.settings.rationale_max_chars)
            self._formats[criterion.criterion_id] = (model, response_format(model, "judge_verdict"))
        return self._formats[criterion.criterion_id]

    def messages(self, case: Case, target: Target, criterion: Criterion, guidance: str | None) -> tuple[Message, ...]:
        """The exact messages of one judge call.

        Raises:
            ValueError: ``target.component`` is structurally inapplicable to the criterion, or
                guidance is longer than 800 characters.
        """
        if not criterion.judged:
            raise ValueError(f"criterion {criterion.criterion_id!r} is physician-only (judged: false); it is never judged")
        if target.component not in criterion.components:
            raise ValueError(
                f"criterion {criterion.criterion_id!r} does not apply to component {target.component!r}; "
                "inapplicable pairs are never judged"
            )
        if guidance is not None and len(guidance) > MAX_GUIDANCE_CHARS:
            raise ValueError(f"guidance has {len(guidance)} characters; the limit is {MAX_GUIDANCE_CHARS}")
        material = _material(case, target, criterion)
        rule = _criterion_block(criterion)
        options = [f'"{s}"' for s in criterion.scores]
        tail = f' or "{NOT_EVALUABLE}"' if criterion.allow_not_evaluable else ""
        reply = 'Reply with a JSON object: {"rationale": "<brief reasons>", "score": "<one of ' + ", ".join(options) + tail + '>"}.'
        advice = ["", "GUIDANCE FOR THIS CRITERION:", guidance.strip()] if guidance else []
        if self.settings.layout == "target-first":
            parts = [*material, *rule, *advice, "", reply]
        else:
            parts = [*rule, "", reply, "", *material[:-1], *advice]  # material ends with a blank line
        return (Message(role="system", content=self.protocol), Message(role="user", content="\n".join(parts)))

    def request(
        self, case: Case, target: Target, criterion: Criterion, guidance: str | None, seed: int
    ) -> ChatRequest:
        """The :class:`ChatRequest` of one judge call (see :meth:`messages`)."""
        _, fmt = self._format(criterion)
        s = self.settings
        return ChatRequest(
            model=s.model,
            messages=self.messages(case, target, criterion, guidance),
            temperature=s.temperature,
            top_p=s.top_p,
            seed=seed,
            max_tokens=s.max_tokens,
            response_format=fmt,
            tag="judge",
            affinity=case.case_id,  # several endpoints: a case's calls on one replica (bench/replicas.py)
        )

    def parse(self, request: ChatRequest, result: ChatResponse | CallFailure, criterion: Criterion) -> JudgeOutcome:
        """Turn a call result into a :class:`JudgeOutcome` (failures -> ``model_failure``: an
        endpoint error, a cut reply, or one not fitting the schema sent - with ``schema_limits``
        a rationale over ``rationale_max_chars`` included)."""
        phash = prompt_hash(request)
        if isinstance(result, CallFailure):
            return JudgeOutcome(outcome="model_failure", rationale=f"endpoint: {result.error}", prompt_hash=phash)
        common: dict[str, Any] = dict(
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cached_prompt_tokens=result.cached_prompt_tokens,
            cached=result.cached,
            prompt_hash=phash,
        )
        if result.finish_reason != "stop":
            return JudgeOutcome(
                outcome="model_failure",
                rationale=f"output cut (finish_reason={result.finish_reason}); raise max_tokens",
                **common,
            )
        model, _ = self._format(criterion)
        try:
            # the limits sent are the limits read: a longer rationale than the schema sent
            # allowed is a model_failure, never clipped (evolve.llm.validate_reply)
            verdict: Any = validate_reply(parse_json_object(result.text), model, schema_limits=self.schema_limits)
        except (ValueError, ValidationError) as exc:
            return JudgeOutcome(outcome="model_failure", rationale=f"invalid output: {validation_problem(exc)}", **common)
        if verdict.score == NOT_EVALUABLE:
            return JudgeOutcome(outcome="not_evaluable", rationale=verdict.rationale, **common)
        return JudgeOutcome(outcome="score", score=int(verdict.score), rationale=verdict.rationale, **common)


def _material(case: Case, target: Target, criterion: Criterion) -> list[str]:
    """The lines that show the judge what it judges: case, target, statement, reference."""
    parts = ["<<<CASE>>>", f"Case id: {fence(case.case_id)}"]
    if case.title:
        parts.append(f"Title: {fence(case.title)}")
    parts += [fence(case.text), "<<<END CASE>>>", ""]
    who = f" written by the {fence(target.role)}" if target.role else ""
    parts += [f"<<<TARGET: {target.component}{who}>>>", fence(target.text), "<<<END TARGET>>>", ""]
    if target.statement:
        parts += ["<<<STATEMENT>>>", fence(target.statement), "<<<END STATEMENT>>>", ""]
    if criterion.show_reference and case.reference_answer:
        parts += ["<<<REFERENCE (expected answer; not a source of patient facts)>>>", fence(case.reference_answer),
                  "<<<END REFERENCE>>>", ""]
    return parts


def _criterion_block(criterion: Criterion) -> list[str]:
    """The criterion's name, definition, scale with anchors and applicability rule."""
    anchors = "\n".join(f"{s}: {criterion.anchors[str(s)]}" for s in criterion.scores)
    direction = "higher is better" if criterion.higher_is_better else "lower is better"
    parts = [f"CRITERION: {criterion.name}", criterion.definition,
             f"Scale {criterion.scale_min}-{criterion.scale_max} ({direction}):", anchors]
    if criterion.applicability:
        parts += [f"Applicability: {criterion.applicability}"]
    return parts


def prompt_hash(request: ChatRequest) -> str:
    """First 16 hex digits of the SHA-256 of a request's messages (records the exact prompt)."""
    payload = json.dumps([m.model_dump() for m in request.messages], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
