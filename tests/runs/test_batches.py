"""A run's Batch API submissions in its journal (evolve.runs.JournalBatchLedger) and how a
run's client gets its batch options."""

from __future__ import annotations

from pathlib import Path

from evolve.llm import Client, FakeProvider
from evolve.runs import EndpointSettings, Journal, JournalBatchLedger, run_batch_options
from evolve.runs._client import _batch_by_api


def test_pending_batches_survive_the_process_and_finish(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    ledger = JournalBatchLedger(Journal(path))
    ledger.submitted("b1", ["k1", "k2"])
    ledger.submitted("b2", ["k3"])
    again = JournalBatchLedger(Journal(path))  # another process reads the same journal
    assert again.pending() == [("b1", frozenset({"k1", "k2"})), ("b2", frozenset({"k3"}))]
    again.finished("b1", status="completed", answered=2, failed=0)
    assert JournalBatchLedger(Journal(path)).pending() == [("b2", frozenset({"k3"}))]
    (submitted,) = [e for e in Journal(path).events() if e["event"] == "batch_submitted" and e["batch_id"] == "b1"]
    assert submitted["lines"] == 2 and submitted["custom_ids"] == ["k1", "k2"]


def test_an_uploaded_file_without_a_batch_is_unclaimed_until_a_batch_names_it(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    ledger = JournalBatchLedger(Journal(path))
    ledger.uploaded("f1", ["k1", "k2"])
    ledger.uploaded("f2", ["k3"])
    ledger.submitted("b2", ["k3"], "f2")
    again = JournalBatchLedger(Journal(path))  # the process that uploaded f1 died before its batch was recorded
    assert again.unclaimed() == [("f1", frozenset({"k1", "k2"}))]
    assert again.pending() == [("b2", frozenset({"k3"}))]
    again.submitted("b1", ["k1", "k2"], "f1")
    assert JournalBatchLedger(Journal(path)).unclaimed() == []
    (uploaded,) = [e for e in Journal(path).events() if e["event"] == "batch_uploaded" and e["file_id"] == "f1"]
    assert uploaded["lines"] == 2 and uploaded["custom_ids"] == ["k1", "k2"]


def test_a_run_client_gets_batch_options_only_where_a_batch_api_can_be(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    client = Client(FakeProvider(lambda request: "x"))
    try:
        assert not _batch_by_api(client, EndpointSettings(base_url="http://127.0.0.1:9/v1"), journal)  # --batch off
        assert _batch_by_api(client, EndpointSettings(base_url="http://127.0.0.1:9/v1", batch=True, batch_poll_s=3),
                             journal)
        assert client.batch is not None and client.batch.poll_initial_s == 3 and client.batch.submit
        client.batch = None
        assert not _batch_by_api(client, EndpointSettings(batch=True), journal)  # the embedded server: warned
        assert any("no Batch API" in e.get("message", "") for e in journal.events())
        # --batch off, but a killed process left a batch: it is polled, nothing new submitted
        JournalBatchLedger(journal).submitted("b1", ["k1"])
        assert _batch_by_api(client, EndpointSettings(base_url="http://127.0.0.1:9/v1"), journal)
        assert client.batch is not None and not client.batch.submit
        # ... and so does an input file whose batch a killed process may have created
        client.batch = None
        other = Journal(tmp_path / "other.jsonl")
        JournalBatchLedger(other).uploaded("f1", ["k1"])
        assert _batch_by_api(client, EndpointSettings(base_url="http://127.0.0.1:9/v1"), other)
        assert client.batch is not None and not client.batch.submit
    finally:
        client.close()
    assert run_batch_options(None).ledger is None  # no journal: batches kept in memory
