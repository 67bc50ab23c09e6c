"""OpenTumorBoard's released records and their loading (``../shared/OTB_FORMAT.md`` §1).

Two tasks share a case summary and the slide captions of a recorded tumor board:

* **Board Simulation** (``task1_*.jsonl``): one record per case; the model writes the whole
  discussion and one conclusion, compared with ``reference_conclusion``.
* **Specialist Turn** (``task2_*.jsonl``): one record per question a specialist was asked during
  the board; the model answers as ``target_specialist_role``, compared with ``reference_answer``.

Files are UTF-8 JSON Lines, possibly gzip-compressed: a reader given ``X.jsonl`` also finds
``X.jsonl.gz``; blank lines are skipped. Records are read as strictly as the released schema:
a value of the wrong JSON type is an error, never converted (``"3"`` is no integer); required text
may not be blank (whitespace only); ``qa_type`` (and each of ``qa_type_candidates``) must be one
of :data:`QA_TYPES` and ``target_specialist_role`` one of :data:`TARGET_ROLES`. Every problem
is reported at once with its file, line, field and fix, and nothing runs. The ``reference_*`` fields are kept on the record for judging only;
:meth:`BoardCase.generation_view` / :meth:`TurnQuestion.generation_view` are what a generating
model may see.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from evolve.errors import DataError, Problems, path_problem

__all__ = [
    "NO_SLIDES", "QA_TYPES", "TARGET_ROLES", "BoardCase", "ManifestEntry", "ManifestTurn", "SourceAlias", "TurnQuestion",
    "load_board_cases", "load_manifest", "load_turn_questions", "messages_sha256", "open_jsonl",
]

NO_SLIDES = "No slide descriptions are available."
"""What a model and the judge see in place of an empty ``slides`` string (released placeholder)."""


QA_TYPES = ("clarification_question", "findings_interpretation", "agreement_or_support", "next_action_suggestion",
            "uncertainty", "eligibility_assessment", "treatment_recommendation", "clinical_trial_suggestion",
            "evidence_discussion")
"""The released question types of a Specialist Turn record (``qa_type``)."""

TARGET_ROLES = ("pathologist", "radiologist", "medical oncologist", "radiation oncologist", "surgeon",
                "molecular pathologist", "genetic counselor", "clinical trial specialist", "nurse navigator", "other")
"""The released roles a Specialist Turn question may target (lowercase; the moderator never is one)."""


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank_text", "is blank" if value == "" else "is blank (whitespace only)")
    return value


def _qa_type(value: str) -> str:
    if value not in QA_TYPES:
        raise PydanticCustomError("unknown_qa_type", f"{value!r} is not a released question type")
    return value


def _alias_qa_type(value: str) -> str:
    return value and _qa_type(value)


def _role(value: str) -> str:
    if value not in TARGET_ROLES:
        what = ": the moderator is never a target" if value.strip().lower() == "moderator" else " is not a released target role"
        raise PydanticCustomError("unknown_role", f"{value!r}{what}")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
QaType = Annotated[str, AfterValidator(_qa_type)]
Role = Annotated[str, AfterValidator(_role)]

_JSON_KIND = {"int": "an integer", "float": "a number", "string": "a string", "bool": "true or false", "list": "an array",
              "dict": "an object", "model": "an object"}


def _fix(err: ErrorDetails) -> str:
    """How to repair one validation error of a record, in the user's terms."""
    kind = err["type"]
    if kind == "missing":
        return "Add the field (the released record schema requires it)."
    if kind == "blank_text":
        return "Write the text; a required field may not be empty or whitespace."
    if kind == "unknown_qa_type":
        return f"Use one of {', '.join(QA_TYPES)}."
    if kind == "unknown_role":
        return f"Use one of {', '.join(TARGET_ROLES)} (lowercase)."
    if kind == "literal_error":
        return f"Use {err.get('ctx', {}).get('expected', 'the released value')}."
    if kind.endswith("_type") and kind[:-5] in _JSON_KIND:
        return (f"Write it as {_JSON_KIND[kind[:-5]]} in JSON, not {err.get('input')!r}: values are read as written, "
                "never converted.")
    return "Fix the value (the released record schema: the README's OpenTumorBoard section)."


class _Record(BaseModel):
    # released files may grow fields (kept); the known ones are read as written, never converted
    model_config = ConfigDict(frozen=True, extra="allow", strict=True)


class BoardCase(_Record):
    """One Board Simulation case (``task1_{split}.jsonl``).

    Attributes:
        simulation_id: The record's key.
        case_id: The recorded case (several records never share one).
        video_uid, video_dir: The source recording.
        case_summary: What the board knew about the patient.
        slides: One line per slide, each ``<image>`` and a one-line caption; may be empty.
        reference_conclusion: The board's own conclusion (judging only).
    """

    schema_version: int | None = None
    benchmark_version: str = ""
    task_name: Literal["tumor_board_simulation"] = "tumor_board_simulation"
    simulation_id: Text
    video_uid: str = ""
    video_dir: str = ""
    case_id: Text
    case_start_sec: float | None = None
    case_end_sec: float | None = None
    case_summary: Text
    slides: str = ""
    reference_conclusion: Text
    source_task: str = ""

    @property
    def item_id(self) -> str:
        """The key of the record in responses and scores."""
        return self.simulation_id

    def generation_view(self) -> dict[str, str]:
        """The fields a generating model sees (never the reference)."""
        return {"case_summary": self.case_summary, "slides": self.slides.strip() or NO_SLIDES}


class SourceAlias(_Record):
    """Another source question merged into a Specialist Turn record."""

    source_task: str = ""
    qa_index: int | None = None
    qa_type: Annotated[str, AfterValidator(_alias_qa_type)] = ""


class TurnQuestion(_Record):
    """One Specialist Turn question (``task2_{split}.jsonl``).

    Attributes:
        qa_id: The record's key.
        case_id: The recorded case it belongs to.
        qa_type: Question type, one of :data:`QA_TYPES`.
        target_specialist_role: The role asked, one of :data:`TARGET_ROLES` (lowercase).
        case_summary, slides: As for :class:`BoardCase`.
        question: What the specialist was asked.
        reference_answer: What the specialist answered (judging only).
    """

    schema_version: int | None = None
    benchmark_version: str = ""
    qa_id: Text
    video_uid: str = ""
    video_dir: str = ""
    case_id: Text
    qa_index: int | None = None
    qa_type: QaType
    qa_type_candidates: list[QaType] = []
    utterance_id: str | int | None = None
    target_specialist_role: Role
    case_summary: Text
    slides: str = ""
    question: Text
    reference_answer: Text
    source_task: str = ""
    source_aliases: list[SourceAlias] = []

    @property
    def item_id(self) -> str:
        """The key of the record in responses and scores."""
        return self.qa_id

    def generation_view(self) -> dict[str, str]:
        """The fields a generating model sees (never the reference)."""
        return {"target_specialist_role": self.target_specialist_role, "case_summary": self.case_summary,
                "slides": self.slides.strip() or NO_SLIDES, "question": self.question}


def open_jsonl(path: Path | str) -> tuple[Path, str]:
    """The text of a JSON Lines file, trying ``X.jsonl`` then ``X.jsonl.gz`` (released layout).

    Raises:
        DataError: Neither exists, the gzip is broken or the text is not UTF-8.
    """
    path = Path(path)
    candidates = [path] if path.name.endswith(".gz") else [path, path.with_name(path.name + ".gz")]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        problem = path_problem(path)
        what = "no such file" if problem in (None, "does not exist") else problem.split(":")[0]
        raise DataError(f"{path}: {what} (also tried {candidates[-1].name}). Pass the released "
                        "task1_*/task2_* file, or the folder holding it.")
    try:
        raw = gzip.decompress(found.read_bytes()) if found.name.endswith(".gz") else found.read_bytes()
        return found, raw.decode("utf-8-sig")
    except (OSError, EOFError) as exc:
        raise DataError(f"{found}: not a readable gzip file ({exc}). Download it again.") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{found}: not UTF-8 text ({exc.reason} at byte {exc.start}). Save it as UTF-8.") from exc


def _json_lines(found: Path, text: str, problems: Problems) -> Iterator[tuple[int, str, Any]]:
    """``(line number, "<file> line <n>", parsed JSON)`` of every non-blank line; a line that is
    not JSON is added to ``problems`` and skipped."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{found.name} line {lineno}"
        try:
            yield lineno, where, json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(where, f"malformed JSON at column {exc.colno} ({exc.msg})", "Write one JSON object per line.")


def _add_errors(problems: Problems, where: str, exc: ValidationError) -> None:
    """Every error of one record, each with its field and fix."""
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
        field = ".".join(str(p) for p in loc) or "record"
        problems.add(f"{where} field {field!r}", err["msg"], _fix(err))


def _load(path: Path | str, model: type[_Record], key: str) -> list:
    found, text = open_jsonl(path)
    problems = Problems(f"{found} is not a valid OpenTumorBoard {model.__name__} file", DataError)
    records: list = []
    seen: dict[str, int] = {}
    for lineno, where, raw in _json_lines(found, text, problems):
        try:
            record = model.model_validate(raw)
        except ValidationError as exc:
            _add_errors(problems, where, exc)
            continue
        item = getattr(record, key)
        if item in seen:
            problems.add(f"{where} field {key!r}", f"{item!r} repeats line {seen[item]}", "Keep one record per id.")
            continue
        seen[item] = lineno
        records.append(record)
    if not records and not problems:
        problems.add(found.name, "no records", "Pass a file with at least one record.")
    problems.raise_if_any()
    return records


def load_board_cases(path: Path | str) -> list[BoardCase]:
    """Board Simulation records of one file, in file order.

    Raises:
        DataError: Missing or unreadable file; malformed JSON, missing or mistyped fields and
            repeated ``simulation_id`` - all listed with file, line and field.
    """
    return _load(path, BoardCase, "simulation_id")


def load_turn_questions(path: Path | str) -> list[TurnQuestion]:
    """Specialist Turn records of one file, in file order.

    Raises:
        DataError: As :func:`load_board_cases` (key ``qa_id``).
    """
    return _load(path, TurnQuestion, "qa_id")


class ManifestTurn(BaseModel):
    """One turn of a ShareGPT conversation (``{"from": "system"|"human", "value": ...}``)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, strict=True)

    speaker: Literal["system", "human", "gpt"] = Field(alias="from")
    value: str


class ManifestEntry(_Record):
    """One line of a released test manifest (``test_inputs/*.caption.jsonl``, ShareGPT format):
    the record (``metadata``; a board entry has no reference) and the exact prompt the released
    runner sends (``conversations``: the system prompt, then the user turn)."""

    schema_version: int | None = None
    format: Literal["sharegpt"] = "sharegpt"
    id: str = Field(min_length=1)
    prompt_version: str = ""
    metadata: dict = {}
    conversations: list[ManifestTurn] = Field(min_length=2)
    messages_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")

    def stored_prompt(self) -> tuple[str, str]:
        """``(system, user)`` as stored."""
        return self.conversations[0].value, self.conversations[1].value


def messages_sha256(system: str, user: str) -> str:
    """The released ``messages_sha256`` of a stored prompt (``OTB_FORMAT.md`` §1, test manifests).

    The two turns as chat messages, ``[{"role": "system", "content": system}, {"role": "user",
    "content": user}]``, written as canonical JSON - keys sorted, no whitespace between tokens
    (``","`` and ``":"``), non-ASCII characters as themselves (not ``\\u`` escapes) - encoded
    as UTF-8; the lowercase hex SHA-256 of those bytes. The ShareGPT spelling of the turns
    (``from``/``value``, ``human``) is not what is hashed.

    Args:
        system: The stored system turn, as stored (not stripped).
        user: The stored human turn, as stored.

    Returns:
        64 lowercase hex digits.
    """
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_manifest(path: Path | str) -> dict[str, ManifestEntry]:
    """A released test manifest, by id: the stored prompts of ``--prompts released``.

    Each entry carrying ``messages_sha256`` is verified against its stored turns
    (:func:`messages_sha256`): a prompt changed after release is refused, not sent. An entry
    without the hash cannot be verified and is read as it is.

    Raises:
        DataError: Missing or unreadable file; a line that is not a ShareGPT entry whose first
            two turns are ``system`` then ``human`` (every field error named); a repeated id; a
            stored prompt whose hash differs from its ``messages_sha256`` - all together, each
            with file, line and id.
    """
    found, text = open_jsonl(path)
    problems = Problems(f"{found} is not a valid OpenTumorBoard test manifest", DataError)
    entries: dict[str, ManifestEntry] = {}
    for _, where, raw in _json_lines(found, text, problems):
        try:
            entry = ManifestEntry.model_validate(raw)
        except ValidationError as exc:
            _add_errors(problems, where, exc)
            continue
        if [t.speaker for t in entry.conversations[:2]] != ["system", "human"]:
            problems.add(where, "the conversation does not open with a system turn and a human turn",
                         "Pass the released test_inputs/*.caption.jsonl file.")
        elif entry.id in entries:
            problems.add(f"{where} field 'id'", f"{entry.id!r} repeats an earlier line", "Keep one entry per id.")
        elif entry.messages_sha256 is not None and messages_sha256(*entry.stored_prompt()) != entry.messages_sha256.lower():
            problems.add(f"{where} id {entry.id!r} field 'messages_sha256'",
                         f"the stored system and human turns hash to {messages_sha256(*entry.stored_prompt())}, not to the "
                         f"recorded {entry.messages_sha256}: the stored prompt was changed after release",
                         "Use the released manifest as downloaded (nothing was sent).")
        else:
            entries[entry.id] = entry
    if not entries and not problems:
        problems.add(found.name, "no entries", "Pass a manifest with at least one entry.")
    problems.raise_if_any()
    return entries
