"""OpenTumorBoard's released records and their loading (``../shared/OTB_FORMAT.md`` §1).

Two tasks share a case summary and the slide captions of a recorded tumor board:

* **Board Simulation** (``task1_*.jsonl``): one record per case; the model writes the whole
  discussion and one conclusion, compared with ``reference_conclusion``.
* **Specialist Turn** (``task2_*.jsonl``): one record per question a specialist was asked during
  the board; the model answers as ``target_specialist_role``, compared with ``reference_answer``.

Files are UTF-8 JSON Lines, possibly gzip-compressed: a reader given ``X.jsonl`` also finds
``X.jsonl.gz``; blank lines are skipped. Every problem is reported at once with its file, line
and field. The ``reference_*`` fields are kept on the record for judging only;
:meth:`BoardCase.generation_view` / :meth:`TurnQuestion.generation_view` are what a generating
model may see.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evolve.errors import DataError, Problems

__all__ = [
    "NO_SLIDES", "BoardCase", "ManifestEntry", "ManifestTurn", "SourceAlias", "TurnQuestion", "load_board_cases",
    "load_manifest", "load_turn_questions", "open_jsonl",
]

NO_SLIDES = "No slide descriptions are available."
"""What a model and the judge see in place of an empty ``slides`` string (released placeholder)."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")  # released files may grow fields; keep them


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
    simulation_id: str = Field(min_length=1)
    video_uid: str = ""
    video_dir: str = ""
    case_id: str = Field(min_length=1)
    case_start_sec: float | None = None
    case_end_sec: float | None = None
    case_summary: str = Field(min_length=1)
    slides: str = ""
    reference_conclusion: str = Field(min_length=1)
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
    qa_type: str = ""


class TurnQuestion(_Record):
    """One Specialist Turn question (``task2_{split}.jsonl``).

    Attributes:
        qa_id: The record's key.
        case_id: The recorded case it belongs to.
        qa_type: Question type (e.g. ``treatment_recommendation``).
        target_specialist_role: The role asked (lowercase, e.g. ``radiation oncologist``).
        case_summary, slides: As for :class:`BoardCase`.
        question: What the specialist was asked.
        reference_answer: What the specialist answered (judging only).
    """

    schema_version: int | None = None
    benchmark_version: str = ""
    qa_id: str = Field(min_length=1)
    video_uid: str = ""
    video_dir: str = ""
    case_id: str = Field(min_length=1)
    qa_index: int | None = None
    qa_type: str = Field(min_length=1)
    qa_type_candidates: list[str] = []
    utterance_id: str | int | None = None
    target_specialist_role: str = Field(min_length=1)
    case_summary: str = Field(min_length=1)
    slides: str = ""
    question: str = Field(min_length=1)
    reference_answer: str = Field(min_length=1)
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
        raise DataError(f"{path}: no such file (also tried {candidates[-1].name}). Pass the released "
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


def _load(path: Path | str, model: type[_Record], key: str) -> list:
    found, text = open_jsonl(path)
    problems = Problems(f"{found} is not a valid OpenTumorBoard {model.__name__} file", DataError)
    records: list = []
    seen: dict[str, int] = {}
    for lineno, where, raw in _json_lines(found, text, problems):
        try:
            record = model.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"]) or "record"
                problems.add(f"{where} field {field!r}", err["msg"], "Fix the value (the released record schema: the README's OpenTumorBoard section).")
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

    model_config = ConfigDict(frozen=True, populate_by_name=True)

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
    messages_sha256: str | None = None

    def stored_prompt(self) -> tuple[str, str]:
        """``(system, user)`` as stored."""
        return self.conversations[0].value, self.conversations[1].value


def load_manifest(path: Path | str) -> dict[str, ManifestEntry]:
    """A released test manifest, by id: the stored prompts of ``--prompts released``.

    Raises:
        DataError: Missing or unreadable file; a line that is not a ShareGPT entry whose first
            two turns are ``system`` then ``human``; a repeated id - all with file and line.
    """
    found, text = open_jsonl(path)
    problems = Problems(f"{found} is not a valid OpenTumorBoard test manifest", DataError)
    entries: dict[str, ManifestEntry] = {}
    for _, where, raw in _json_lines(found, text, problems):
        try:
            entry = ManifestEntry.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "entry"
            problems.add(f"{where} field {field!r}", err["msg"], "Pass the released test_inputs/*.caption.jsonl file.")
            continue
        if [t.speaker for t in entry.conversations[:2]] != ["system", "human"]:
            problems.add(where, "the conversation does not open with a system turn and a human turn",
                         "Pass the released test_inputs/*.caption.jsonl file.")
        elif entry.id in entries:
            problems.add(f"{where} field 'id'", f"{entry.id!r} repeats an earlier line", "Keep one entry per id.")
        else:
            entries[entry.id] = entry
    if not entries and not problems:
        problems.add(found.name, "no entries", "Pass a manifest with at least one entry.")
    problems.raise_if_any()
    return entries
