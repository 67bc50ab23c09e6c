"""The journal of a resumed run: replayed events are not written twice; usage adds up processes."""

from __future__ import annotations

import json

from evolve.llm import ChatRequest, Client, FakeProvider, Message
from evolve.runs import EndpointSettings, Event, Journal, owned_client, run_usage


def _events(journal: Journal) -> list[str]:
    return [e["event"] for e in journal.events()]


def test_a_replayed_event_is_skipped_and_a_changed_one_is_written(tmp_path):
    first = Journal(tmp_path / "journal.jsonl")
    first.append(Event.RUN_STARTED, run_id="r")
    first.append(Event.CANDIDATE_EVALUATED, criterion="c1", candidate_id="c1:a", train_mae=0.5)
    first.append(Event.CANDIDATE_EVALUATED, criterion="c1", candidate_id="c1:b", train_mae=None)  # failed calls
    first.append(Event.WARNING, message="slow")
    first.append(Event.RACING_NOISE, criterion="c1", noise_sd=0.25, pairs=8)

    resumed = Journal(tmp_path / "journal.jsonl")
    resumed.append(Event.RUN_RESUMED, run_id="r")
    resumed.append(Event.CANDIDATE_EVALUATED, criterion="c1", candidate_id="c1:a", train_mae=0.5)  # from the cache
    resumed.append(Event.CANDIDATE_EVALUATED, criterion="c1", candidate_id="c1:b", train_mae=0.75)  # repaired
    resumed.append(Event.WARNING, message="slow")  # not a replayed kind: always written
    resumed.append(Event.RACING_NOISE, criterion="c1", noise_sd=0.25, pairs=8)  # measured again from the cache

    assert resumed.replayed == 2
    assert _events(resumed) == ["run_started", "candidate_evaluated", "candidate_evaluated", "warning", "racing_noise",
                                "run_resumed", "candidate_evaluated", "warning"]
    assert list(resumed.events())[-2]["train_mae"] == 0.75


def test_events_of_a_fresh_run_are_never_skipped(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    for _ in range(2):
        journal.append(Event.ARCHIVE_SNAPSHOT, criterion="c1", iteration=None, elites=3)
    assert journal.replayed == 0 and _events(journal) == ["archive_snapshot"] * 2


def test_run_usage_takes_the_last_record_of_each_session_and_sums_sessions(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(Event.USAGE, session="a", usage={"judge": {"calls": 3, "prompt_tokens": 30}}, final=False)
    journal.append(Event.USAGE, session="a", usage={"judge": {"calls": 5, "prompt_tokens": 50}})
    journal.append(Event.USAGE, session="b", usage={"judge": {"calls": 2}, "mutation": {"calls": 1}})
    journal.append(Event.USAGE, usage={"audit": {"calls": 4}})  # an old journal: no session
    assert run_usage(journal) == {"judge": {"calls": 7, "prompt_tokens": 50}, "mutation": {"calls": 1},
                                  "audit": {"calls": 4}}
    assert run_usage(Journal(tmp_path / "empty.jsonl")) == {}


def test_an_owned_client_journals_its_usage_while_it_works_and_when_released(tmp_path, monkeypatch):
    """A process killed outright keeps the usage of its last periodic record."""
    import evolve.runs._client

    client = Client(FakeProvider(lambda request: '{"score": 1}'), max_concurrency=1)
    client.usage_interval_s = 0.0  # a record after every call
    monkeypatch.setattr(evolve.runs._client, "open_client", lambda endpoint, cache_path=None, journal=None: (client, None))
    journal = Journal(tmp_path / "journal.jsonl")
    request = ChatRequest(model="m", messages=(Message(role="user", content="hi"),), tag="judge")
    with owned_client(EndpointSettings(provider="fake"), journal=journal) as owned:
        owned.complete(request)
        owned.complete(request.model_copy(update={"seed": 7}))
    records = [e for e in journal.events() if e["event"] == "usage"]
    assert [r["usage"]["judge"]["calls"] for r in records] == [1, 2, 2]
    assert [r.get("final", True) for r in records] == [False, False, True]
    assert {r["session"] for r in records} == {client.session}
    assert run_usage(journal)["judge"]["calls"] == 2


def test_a_borrowed_client_journals_usage_only_when_asked(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    with Client(FakeProvider(lambda request: "ok")) as client:
        with owned_client(EndpointSettings(provider="fake"), journal=journal, client=client):
            pass
        assert not journal.path.exists()
        with owned_client(EndpointSettings(provider="fake"), journal=journal, client=client, journal_usage=True):
            pass
    assert json.loads(journal.path.read_text())["event"] == "usage"
