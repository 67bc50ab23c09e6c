"""Generating OpenTumorBoard answers into ``responses.jsonl`` (released layout, resumable).

Per task and model, the records are answered in batches over one client; after each batch
``responses.jsonl`` is rewritten whole (atomically) with every answer so far, so an interrupted
run keeps what finished, and a resumed one skips the ids already answered - their calls are in
the response cache anyway. A call that failed goes to ``errors.jsonl`` (rewritten the same way)
and is asked again on resume. An answer with nothing usable is *malformed*: written, counted,
never judged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from evolve.errors import DataError, RunError
from evolve.llm import CallFailure, ChatRequest, ChatResponse, Message
from evolve.otb._config import OTB_PATHS, OTB_RUBRIC_ID, OtbConfig, Task, otb_config_json, read_otb_config
from evolve.otb._extract import Extraction, extract_board, extract_turn
from evolve.otb._prompts import PROMPT_VERSION, board_messages, turn_messages
from evolve.otb._records import BoardCase, TurnQuestion, load_board_cases, load_manifest, load_turn_questions
from evolve.rubric import run_prompts_root, write_prompts_snapshot
from evolve.runs import (
    Event,
    NoProgress,
    OtbFolder,
    ProgressHook,
    atomic_write,
    check_resumable,
    check_same_settings,
    locks_run,
    on_call,
    owned_client,
    with_cache_path,
)

if TYPE_CHECKING:  # pragma: no cover
    from evolve.llm import Client

__all__ = ["GenerationCounts", "check_resume_settings", "generate_otb", "load_otb_inputs", "load_otb_items", "load_stored_prompts", "read_responses",
           "run_key"]

BATCH = 8
"""Items answered between two rewrites of ``responses.jsonl``."""

PROGRESS_KEY = "otb"


@dataclass
class GenerationCounts:
    """What one (task, model) generation did: answered now, reused from an earlier run,
    malformed among all answers, and calls that failed (in ``errors.jsonl``)."""

    answered: int = 0
    reused: int = 0
    malformed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def load_stored_prompts(config: OtbConfig, items: dict | None) -> dict[Task, dict[str, tuple[str, str, str]]]:
    """With ``prompts="released"``: per task, item id -> (system, user, prompt_version) from the
    released test manifest, every entry's ``messages_sha256`` verified (:func:`~evolve.otb.load_manifest`);
    empty otherwise.

    Args:
        config: The run.
        items: The records per task (:func:`load_otb_items`); None checks the manifests alone.

    Raises:
        DataError: A manifest is invalid or holds a changed prompt, or lacks an item of the run -
            every manifest's problems together, before any call.
    """
    if config.prompts != "released":
        return {}
    out: dict[Task, dict[str, tuple[str, str, str]]] = {}
    errors: list[str] = []
    for task, _ in config.tasks():
        path = config.manifest(task)
        assert path is not None  # OtbConfig requires it
        try:
            entries = load_manifest(path)
        except DataError as exc:
            errors.append(str(exc))
            continue
        records = (items or {}).get(task, [])
        missing = [r.item_id for r in records if r.item_id not in entries]
        if missing:
            errors.append(f"{path}: no stored prompt for {len(missing)} {task} item(s) of the run, e.g. "
                          f"{missing[:5]}; pass the manifest of the same split as --{task}.")
        out[task] = {r.item_id: (*entries[r.item_id].stored_prompt(), entries[r.item_id].prompt_version)
                     for r in records if r.item_id in entries}
    if errors:
        raise DataError("\n".join(errors))
    return out


def load_otb_items(config: OtbConfig) -> dict[Task, list[BoardCase] | list[TurnQuestion]]:
    """The records of each task of the run (the first ``max_items``, in file order).

    Raises:
        DataError: As :func:`~evolve.otb.load_board_cases` / :func:`~evolve.otb.load_turn_questions`;
            the problems of both task files together.
    """
    items: dict[Task, list] = {}
    errors: list[str] = []
    for task, path in config.tasks():
        try:
            records = load_board_cases(path) if task == "board" else load_turn_questions(path)
        except DataError as exc:
            errors.append(str(exc))
            continue
        items[task] = records[: config.max_items] if config.max_items else records
    if errors:
        raise DataError("\n".join(errors))
    return items


def load_otb_inputs(config: OtbConfig) -> tuple[dict, dict]:
    """Records (:func:`load_otb_items`) and stored prompts (:func:`load_stored_prompts`) of a run.

    Raises:
        DataError: One error listing the problems of every record file and manifest.
    """
    errors: list[str] = []
    items: dict | None = None
    try:
        items = load_otb_items(config)
    except DataError as exc:
        errors.append(str(exc))
    try:
        prompts = load_stored_prompts(config, items)
    except DataError as exc:
        errors.append(str(exc))
    if errors or items is None:
        raise DataError("\n".join(errors))
    return items, prompts


def run_key(benchmark_version: str, item_id: str, model: str, prompt_version: str, profile: str) -> str:
    """The released ``run_key``: SHA-256 of the five parts joined by U+001F."""
    return hashlib.sha256("\x1f".join([benchmark_version, item_id, model, prompt_version, profile]).encode()).hexdigest()


def read_responses(path: Path) -> list[dict]:
    """The lines of a ``responses.jsonl`` (empty when absent).

    Raises:
        RunError: A line that is not a JSON object (the file was edited or damaged).
    """
    if not path.is_file():
        return []
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RunError(f"{path} line {lineno}: not JSON ({exc.msg}). Delete the line (it is answered again "
                               "on resume) or the file.") from exc
    return rows


def _request(config: OtbConfig, task: Task, model: str, item: BoardCase | TurnQuestion,
             stored: tuple[str, str, str] | None = None) -> ChatRequest:
    d = config.decoding_of(model)
    if stored is not None:  # the released prompt, as stored in the test manifest
        messages: tuple[Message, ...] = (Message(role="system", content=stored[0]), Message(role="user", content=stored[1]))
    else:
        messages = board_messages(item) if isinstance(item, BoardCase) else turn_messages(item)
    return ChatRequest(model=model, messages=messages, temperature=d.temperature, top_p=d.top_p, seed=d.seed,
                       max_tokens=d.max_tokens_board if task == "board" else d.max_tokens_turn, tag=f"otb_{task}",
                       affinity=item.case_id)  # one replica per recorded case (several endpoints)


def _profile(config: OtbConfig, model: str) -> str:
    return json.dumps(config.decoding_of(model).model_dump(), sort_keys=True, separators=(",", ":"))


def _response_row(config: OtbConfig, task: Task, model: str, item: BoardCase | TurnQuestion, res: ChatResponse,
                  prompt_version: str = PROMPT_VERSION) -> dict:
    mode = config.response_mode(model)
    read = extract_board if task == "board" else extract_turn
    extraction: Extraction = read(res.text, res.reasoning, reasoning_mode=mode == "reasoning_final")
    ids = ({"simulation_id": item.simulation_id} if isinstance(item, BoardCase)
           else {"qa_id": item.qa_id, "qa_type": item.qa_type, "target_specialist_role": item.target_specialist_role})
    if task == "board":
        parsed = {"discussion": [{"role": r, "response": t} for r, t in extraction.discussion],
                  "conclusion": extraction.text, "counts": {"turns": len(extraction.discussion)}}
    else:
        parsed = {"answer": extraction.text}
    cut = res.finish_reason not in ("stop", "")
    warnings = list(extraction.warnings) + ([f"finish_reason={res.finish_reason}: the answer may be cut"] if cut else [])
    return {
        "kind": "response", **ids, "video_uid": item.video_uid, "case_id": item.case_id,
        "run_key": run_key(item.benchmark_version, item.item_id, model, prompt_version, _profile(config, model)),
        "model": model, "resolved_model": model, "prompt_version": prompt_version,
        "parameter_profile": config.decoding_of(model).model_dump(),
        "finish_reason": res.finish_reason,
        "usage": {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens},
        "response_mode": mode, "cached": res.cached, "raw_response": res.text, "raw_reasoning_content": res.reasoning or None,
        "extracted_final_response": extraction.text, "parsed_output": parsed, "parse_status": extraction.parse_status,
        "malformed": extraction.malformed, "warnings": warnings, "error": extraction.error,
    }


def _generate_one(config: OtbConfig, client: Client, folder: OtbFolder, task: Task, model: str,
                  items: Sequence[BoardCase | TurnQuestion], stored: dict[str, tuple[str, str, str]],
                  progress: ProgressHook) -> GenerationCounts:
    counts = GenerationCounts()
    rows = read_responses(folder.responses(task, model))
    done = {r.get("simulation_id") or r.get("qa_id") for r in rows}
    todo = [it for it in items if it.item_id not in done]
    counts.reused = len(items) - len(todo)
    if counts.reused:  # answered by an earlier process: on the bar, free now
        ids = {it.item_id for it in items}
        usage = [r.get("usage") or {} for r in rows if (r.get("simulation_id") or r.get("qa_id")) in ids]
        progress.advance(counts.reused, key=PROGRESS_KEY, prompt_tokens=sum(u.get("prompt_tokens", 0) for u in usage),
                         completion_tokens=sum(u.get("completion_tokens", 0) for u in usage), cached=True)
    errors: list[dict] = []
    for start in range(0, len(todo), BATCH):
        batch = todo[start:start + BATCH]
        requests = [_request(config, task, model, it, stored.get(it.item_id)) for it in batch]
        results = client.map(requests, on_result=on_call(progress, PROGRESS_KEY))
        for item, res in zip(batch, results):
            if isinstance(res, CallFailure):
                errors.append({"kind": "error", "id": item.item_id, "case_id": item.case_id, "model": model,
                               "error": res.error})
                counts.failed += 1
                continue
            version = (stored[item.item_id][2] or "released") if item.item_id in stored else PROMPT_VERSION
            rows.append(_response_row(config, task, model, item, res, version))
            counts.answered += 1
        atomic_write(folder.responses(task, model), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    atomic_write(folder.errors(task, model), "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors))
    counts.malformed = sum(bool(r.get("malformed")) for r in rows)
    counts.errors = [e["error"] for e in errors]
    return counts


def _comparable(config: OtbConfig) -> dict:
    """A config as a resume compares it: the endpoint's parallelism, patience and prices may change;
    paths compare absolute (relative ones from the current folder); a run with its own rubric
    copy resumes on that copy, so where the rubric was loaded from does not count."""
    data = {**json.loads(config.model_dump_json()), "endpoint": config.endpoint.resume_fields()}
    for key in OTB_PATHS:
        if data.get(key) is not None:
            data[key] = os.path.normpath(Path.cwd() / data[key])
    if run_prompts_root(OtbFolder(config.run_dir).prompts_root, None) is not None:
        data.pop("prompts_root", None)
    return data


def check_resume_settings(config: OtbConfig, resume: bool) -> bool:
    """Whether ``config.run_dir`` holds a run that ``resume`` continues with the same settings
    (reads only; ``--plan`` makes the same checks as the run).

    Raises:
        RunError: The folder holds a run and ``resume`` is false; nothing to resume; the
            stored configuration is unreadable or differs.
    """
    folder = OtbFolder(config.run_dir)
    if not check_resumable(folder.path, folder.CONFIG, resume, what="an OpenTumorBoard run", kind="otb"):
        return False
    try:  # validated, so fields added since the run started compare at their defaults
        stored = read_otb_config(folder.path, own_rubric=False)
    except ValidationError as exc:
        raise RunError(f"{folder / folder.CONFIG}: cannot read the stored configuration ({exc.errors()[0]['msg']}); "
                       "start a new --run-id.") from exc
    check_same_settings(folder / folder.CONFIG, _comparable(stored), _comparable(config), ignore=("run_id", "archives_dir"))
    return True


@locks_run(lambda config, **_: config.run_dir)  # one process writes a run folder
def generate_otb(config: OtbConfig, *, client: Client | None = None, resume: bool = False,
                 progress: ProgressHook | None = None) -> dict[tuple[str, str], GenerationCounts]:
    """Answer every item of every task with every model into the run folder.

    Args:
        config: The run (:func:`~evolve.otb.resolve_otb_config`).
        client: A ready client; None opens one from ``config.endpoint`` and releases it.
        resume: Continue ``config.run_dir`` with its stored settings: answered ids are kept,
            failed and missing ones asked (finished calls come from the cache).
        progress: Progress hook (key ``otb``, one step per call).

    Returns:
        Counts per ``(task, model)``.

    Raises:
        RunError: The folder holds a run and ``resume`` is false; nothing to resume; the
            stored configuration differs.
        DataError: A record file is missing or invalid (before any call).
    """
    progress = progress or NoProgress()
    config = with_cache_path(config)
    folder = OtbFolder(config.run_dir)
    items, prompts = load_otb_inputs(config)  # bad input fails before anything is written or asked
    if not check_resume_settings(config, resume):
        # the rubric's copy first (rubric otb: what calibrated guidance and imported ratings of the run
        # are read against); a run folder with a run_config.json always has it
        write_prompts_snapshot(folder.prompts_root, [OTB_RUBRIC_ID], root=config.prompts_root)
        folder.write(folder.CONFIG, otb_config_json(config))
    journal = folder.journal()
    journal.append(Event.OTB_RESUMED if resume else Event.OTB_STARTED, run_id=config.run_id,
                   tasks={t: len(v) for t, v in items.items()}, models=list(config.models))
    counts: dict[tuple[str, str], GenerationCounts] = {}
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client) as client:
        progress.phase("generating", sum(len(v) for v in items.values()) * len(config.models), key=PROGRESS_KEY,
                       unit="generation calls")
        for task, records in items.items():
            for model in config.models:
                counts[(task, model)] = _generate_one(config, client, folder, task, model, records, prompts.get(task, {}),
                                                      progress)
    journal.append(Event.OTB_FINISHED, generated={f"{t}/{m}": vars(c) | {"errors": len(c.errors)}
                                                  for (t, m), c in counts.items()})
    return counts
