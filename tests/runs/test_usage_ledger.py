"""Usage journaled with every paid call (``sent`` before it leaves, ``calls`` once counted), so a
process killed outright leaves every call it paid for; summed without double counting against
the periodic and final ``usage`` snapshots; older journals still read."""

from __future__ import annotations

import json

from evolve.llm import ChatRequest, Client, Message
from evolve.report import render_usage, usage_report
from evolve.runs import EndpointSettings, Event, Journal, owned_client, run_usage
from evolve.testing import FakeProvider


def test_calls_events_and_snapshots_of_a_session_count_once_and_unanswered_sends_are_in_flight(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    for _ in range(4):
        journal.note(Event.SENT, session="killed", tag="judge")
    for _ in range(3):  # answered; the fourth was out when the process died
        journal.note(Event.CALLS, session="killed", counts={"judge": [1, 0, 0, 0, 10, 2]})
    journal.append(Event.USAGE, session="killed", usage={"judge": {"calls": 2, "prompt_tokens": 20}}, final=False)
    for _ in range(2):  # a process released normally: its final snapshot equals its events
        journal.note(Event.SENT, session="done", tag="mutation")
        journal.note(Event.CALLS, session="done", counts={"mutation": [1, 0, 0, 0, 5, 1]})
    journal.note(Event.CALLS, session="done", counts={"mutation": [0, 7, 0, 0, 35, 7]})  # cache hits, batched
    journal.append(Event.USAGE, session="done", usage={"mutation": {"calls": 2, "cache_hits": 7, "prompt_tokens": 45,
                                                                    "completion_tokens": 9}})
    journal.append(Event.USAGE, usage={"audit": {"calls": 4}})  # a journal older than sessions
    assert run_usage(journal) == {
        "judge": {"calls": 3, "prompt_tokens": 30, "completion_tokens": 6, "in_flight": 1},
        "mutation": {"calls": 2, "cache_hits": 7, "prompt_tokens": 45, "completion_tokens": 9},
        "audit": {"calls": 4},
    }
    report = usage_report(journal)
    assert report["total"]["calls_made"] == 9 and report["total"]["in_flight"] == 1
    assert "1 more call was in flight" in "\n".join(render_usage(report))


def test_an_owned_client_leaves_each_paid_call_in_the_journal_before_any_snapshot(tmp_path, monkeypatch):
    """What a ``kill -9`` leaves: the journal read while the client is still open (no final snapshot,
    no periodic one within 30 s) already counts every answered call; a resume's cache hits are
    batched, not one line each."""
    import evolve.runs._client

    client = Client(FakeProvider(lambda request: '{"score": 1}'), max_concurrency=1)
    monkeypatch.setattr(evolve.runs._client, "open_client", lambda endpoint, cache_path=None, journal=None: (client, None))
    journal = Journal(tmp_path / "journal.jsonl")
    request = ChatRequest(model="m", messages=(Message(role="user", content="hi"),), tag="judge")
    with owned_client(EndpointSettings(provider="fake"), journal=journal) as owned:
        for seed in range(5):
            owned.complete(request.model_copy(update={"seed": seed}))
        usage = run_usage(journal)  # as a kill now would leave it
        assert usage["judge"]["calls"] == 5 and "in_flight" not in usage["judge"]
        assert not [e for e in journal.events() if e["event"] == "usage"]
        lines = journal.path.read_text().splitlines()
        assert len(lines) == 10 and max(len(line) for line in lines) < 140  # compact: one short line per send and per call
    assert run_usage(journal)["judge"]["calls"] == 5  # the final snapshot does not add them again
    assert json.loads(journal.path.read_text().splitlines()[-1])["event"] == "usage"


def test_calls_that_found_no_connection_are_not_in_flight_when_the_endpoint_stops_the_run(tmp_path, monkeypatch):
    """A run stopped by an unreachable endpoint leaves its calls unanswered; when every attempt of
    a call found the connection refused it never left, so it is not counted as possibly paid.
    A call whose connection dropped once may have been received: it still counts."""
    import pytest

    import evolve.runs._client
    from evolve.errors import EndpointConnectionError, EndpointUnreachableError
    from evolve.llm import ChatResponse

    class Refusing:
        endpoint_id = "http://127.0.0.1:9/v1"

        def __init__(self, dropped_first: bool) -> None:
            self.dropped_first, self.attempts = dropped_first, 0

        async def complete(self, request: ChatRequest) -> ChatResponse:
            self.attempts += 1
            raise EndpointConnectionError("no connection", unsent=not (self.dropped_first and self.attempts == 1))

    request = ChatRequest(model="m", messages=(Message(role="user", content="q"),), tag="judge")
    for dropped_first, in_flight in ((False, None), (True, 1)):
        client = Client(Refusing(dropped_first), max_concurrency=1, backoff_initial=0.001, max_retries=5)
        monkeypatch.setattr(evolve.runs._client, "open_client",
                            lambda endpoint, cache_path=None, journal=None, client=client: (client, None))
        journal = Journal(tmp_path / f"{dropped_first}.jsonl")
        with pytest.raises(EndpointUnreachableError):
            with owned_client(EndpointSettings(provider="fake"), journal=journal) as owned:
                owned.complete(request)
        kinds = [e["event"] for e in journal.events()]
        assert kinds.count("sent") == 1 and kinds.count("unsent") == (0 if dropped_first else 1)
        assert run_usage(journal).get("judge", {}).get("in_flight") == in_flight
