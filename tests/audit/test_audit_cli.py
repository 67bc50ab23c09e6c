"""`evolve audit` through the CLI, and the audit of a run folder written by `calibrate` itself."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evolve.audit import AuditResult, audit_run
from evolve.cli import app
from evolve.config import resolve_config
from evolve.llm import ChatRequest, Client, Message, ResponseCache
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import run_calibration as calibrate
from tests.audit.conftest import bag_of_words, fake_auditor

runner = CliRunner()


class _Endpoint(LoopbackChatServer):
    """Chat answers like `fake_auditor`; /v1/embeddings answers 404 unless `embeddings` is on."""

    def __init__(self, embeddings: bool = False) -> None:
        self.embeddings = embeddings
        super().__init__(self._respond)

    def _respond(self, body: dict):
        if "input" in body:  # POST /v1/embeddings
            if not self.embeddings:
                return 404, {"error": {"message": "not found"}}
            data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(body["input"])]
            return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        request = ChatRequest(model=body["model"], messages=tuple(Message(**m) for m in body["messages"]))
        return fake_auditor(request)


def test_cli_audit_offline_writes_files_and_prints_the_table(planted_run):
    result = runner.invoke(app, ["audit", str(planted_run), "--no-llm", "--no-embeddings"])
    assert result.exit_code == 0, result.output  # drift flagged, still exit 0
    assert "| 1. Factual accuracy and sources | `factual_accuracy:m002` |" in result.stdout
    assert "**drift**" in result.stdout and "factual_accuracy: drift" in result.stdout
    audit = AuditResult.model_validate_json((planted_run / "audit.json").read_text())
    assert audit.flags["factual_accuracy"] == "drift" and audit.llm_status == "skipped (--no-llm)"
    assert (planted_run / "audit.md").read_text() in result.stdout


def test_cli_audit_against_an_endpoint_without_embeddings(planted_run, monkeypatch):
    monkeypatch.setenv("AUDIT_KEY", "sk-audit-not-a-real-key-0000000000")
    with _Endpoint(embeddings=False) as endpoint:
        result = runner.invoke(app, ["audit", str(planted_run), "--base-url", endpoint.base_url, "--model", "scripted",
                                     "--api-key-env", "AUDIT_KEY"])
    assert result.exit_code == 0, result.output
    audit = AuditResult.model_validate_json((planted_run / "audit.json").read_text())
    assert audit.embeddings_status.startswith("unavailable (") and "404" in audit.embeddings_status
    assert audit.endpoint_id == endpoint.base_url and audit.llm_model == "scripted"
    assert audit.flags == {"factual_accuracy": "drift", "management": "ok", "clinical_safety": "ok"}
    assert "billing" in audit.criterion("factual_accuracy").winner.llm.verdict.rationale
    chat = [b for b in endpoint.bodies if "messages" in b]
    assert len(chat) == 8 and all(b["temperature"] == 0.0 and b["top_p"] == 1.0 and b["seed"] == 42 for b in chat)
    assert len([b for b in endpoint.bodies if "input" in b]) == 1  # 404 is not retried
    assert set(endpoint.authorizations) == {"Bearer sk-audit-not-a-real-key-0000000000"}
    for path in planted_run.iterdir():
        assert "sk-audit" not in path.read_text(), path.name


def test_cli_audit_with_embeddings(planted_run):
    with _Endpoint(embeddings=True) as endpoint:
        result = runner.invoke(app, ["audit", str(planted_run), "--base-url", endpoint.base_url, "--no-llm"])
    assert result.exit_code == 0, result.output
    audit = AuditResult.model_validate_json((planted_run / "audit.json").read_text())
    assert audit.embeddings_available and audit.llm_status.startswith("skipped")
    drifted, faithful = audit.criterion("factual_accuracy").winner, audit.criterion("management").winner
    assert drifted.embedding.criterion < faithful.embedding.criterion
    assert not any("messages" in b for b in endpoint.bodies)


def test_cli_audit_of_a_missing_folder_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["audit", str(tmp_path / "nope"), "--no-llm"])
    assert result.exit_code == 2 and "config.json" in result.output


def test_cli_audit_endpoint_options_are_checked_naming_the_field(planted_run):
    before = sorted(p.name for p in planted_run.iterdir())
    for args, words in ((["--max-concurrency", "0"], "endpoint options field 'max_concurrency': 0 is out of range"),
                        (["--base-url", "notaurl"], "base_url (--base-url) 'notaurl' is not an http:// or https:// URL")):
        result = runner.invoke(app, ["audit", str(planted_run), *args])
        assert result.exit_code == 2 and words in " ".join(result.output.split()), result.output
        assert "Value error" not in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in planted_run.iterdir()) == before  # nothing written


def test_an_audit_stopped_by_its_endpoint_names_the_command_as_typed(planted_run, monkeypatch):
    import sys

    import evolve.audit
    from evolve.errors import EndpointUnreachableError

    def unreachable(*args, **kwargs):
        raise EndpointUnreachableError("4 connection attempts in a row could not reach the endpoint")

    monkeypatch.setattr(evolve.audit, "audit_run", unreachable)
    args = ["audit", str(planted_run), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    monkeypatch.setattr(sys, "argv", ["evolve", *args])
    result = runner.invoke(app, args)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"Continue with: evolve audit {planted_run} --base-url http://127.0.0.1:9/v1 --model m" in said


@pytest.fixture
def calibrated_run(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    config = resolve_config(
        preset="quick",
        overrides={
            "run_id": "tiny-audit", "pack": tiny_pack_dir, "splits": tiny_splits_dir,
            "archives_dir": tmp_path / "archives", "cache_path": tmp_path / "cache.sqlite",
            "endpoint": {"provider": "fake"},
            "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2},
        },
        environ={},
    )
    return calibrate(config, client=fake_client).run_dir


def test_audit_of_a_run_written_by_calibrate(calibrated_run, tmp_path):
    provider = FakeProvider(fake_auditor, embeddings=bag_of_words)
    with Client(provider, cache=ResponseCache(tmp_path / "audit.sqlite")) as client:
        audit = audit_run(calibrated_run, client=client)
    (crit,) = audit.criteria
    assert crit.criterion == "entailment" and audit.rubric_id == "kqa-entailment"
    assert [a.candidate_id for a in crit.initials] == ["entailment:initial_1", "entailment:initial_2"]
    winner = crit.winner
    # the fake mutation LLM writes 'calibrated rule N' texts, which win; their lineage leads to an initial prompt
    assert winner.origin == "mutation" and winner.reference_rule == "ancestor"
    assert winner.reference_id in {"entailment:initial_1", "entailment:initial_2"}
    assert crit.flag in ("ok", "review") and winner.llm.status == "ok"
    events = [json.loads(line)["event"] for line in (calibrated_run / "journal.jsonl").read_text().splitlines()]
    assert events[-2:] == ["audit_started", "audit_finished"] and "run_finished" in events


def test_cli_audit_rebuilds_the_report_with_the_drift_column(calibrated_run):
    result = runner.invoke(app, ["audit", str(calibrated_run), "--no-llm", "--no-embeddings"])
    assert result.exit_code == 0, result.output
    flag = AuditResult.model_validate_json((calibrated_run / "audit.json").read_text()).flags["entailment"]
    report = json.loads((calibrated_run / "report.json").read_text())
    assert "rebuilt" in result.stdout
    assert report["criteria"]["entailment"]["audit"]["flag"] == flag
