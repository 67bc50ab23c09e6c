"""`evolve calibrate --base-url A --base-url B`: two loopback replicas share a run by prefix affinity."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.layering import env_overrides
from tests.cli.test_cli_calibrate import _Endpoint
from tests.conftest import request_of

runner = CliRunner()


class _Sick(_Endpoint):
    """A replica whose server fails every chat call with HTTP 503."""

    def _respond(self, body: dict):
        return 503, {"error": {"message": "overloaded"}}


@pytest.fixture
def two():
    servers = [_Endpoint(), _Endpoint()]
    yield servers
    for s in servers:
        s.close()


def _pair_of(body: dict) -> str:
    """The case-and-target part of a judge prompt (from the case marker to the end of the target)."""
    user = request_of(body).messages[-1].content
    start = user.index("<<<CASE>>>")
    return user[start:user.index("<<<END TARGET>>>", start)]


def _judge_pairs(servers) -> dict[str, set[int]]:
    seen: dict[str, set[int]] = defaultdict(set)
    for i, server in enumerate(servers):
        for body in server.bodies:
            if "messages" in body and request_of(body).tag == "judge":
                seen[_pair_of(body)].add(i)
    return seen


def _judge_cases(servers) -> dict[str, set[int]]:
    """Servers per case: the case block of a judge prompt (up to the target)."""
    seen: dict[str, set[int]] = defaultdict(set)
    for i, server in enumerate(servers):
        for body in server.bodies:
            if "messages" in body and request_of(body).tag == "judge":
                seen[_pair_of(body).split("<<<TARGET")[0]].add(i)
    return seen


def _args(tmp_path, pack, splits, run_id: str, urls: list[str]) -> list[str]:
    args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", run_id,
            "--archives-dir", str(tmp_path / "archives"), "--model", "scripted", "--max-concurrency", "4",
            "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--train-repeats", "1"]  # few calls: the routing is tested
    for url in urls:
        args += ["--base-url", url]
    return args


def test_two_loopback_endpoints_share_a_calibration_with_prefix_affinity(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                          two, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    result = runner.invoke(app, _args(tmp_path, tiny_pack_dir, tiny_splits_dir, "two", [s.base_url for s in two]))
    assert result.exit_code == 0, result.output
    pairs = _judge_pairs(two)
    assert len(pairs) >= 4 and all(len(where) == 1 for where in pairs.values()), pairs  # one server per pair
    cases = _judge_cases(two)
    assert all(len(where) == 1 for where in cases.values()), cases  # indeed one server per case (the judge's key)
    assert {i for where in pairs.values() for i in where} == {0, 1}  # both servers served pairs
    run = tmp_path / "archives" / "two"
    config = json.loads((run / "config.json").read_text())["endpoint"]
    assert config["base_urls"] == [s.base_url for s in two] and config["base_url"] == two[0].base_url
    report = (run / "report.md").read_text()
    assert "### Calls per endpoint" in report
    usage = json.loads((run / "report.json").read_text())["usage"]
    by_endpoint = usage["by_endpoint"]
    assert set(by_endpoint) == {s.base_url for s in two}
    chats = [sum("messages" in b for b in s.bodies) for s in two]
    assert [by_endpoint[s.base_url]["calls"] for s in two] == chats  # per endpoint = what each server answered
    chat_tags = {tag: c for tag, c in usage["by_tag"].items() if tag != "audit_embedding"}  # embeddings: no replica
    assert sum(chats) == sum(int(c.get("calls", 0)) for c in chat_tags.values())  # per endpoint adds up to the total

    # the replicas listed the other way round share the cache: a rerun pays no chat call
    before = sum(chats)
    again = runner.invoke(app, _args(tmp_path, tiny_pack_dir, tiny_splits_dir, "again", [s.base_url for s in two[::-1]]))
    assert again.exit_code == 0, again.output
    assert sum(sum("messages" in b for b in s.bodies) for s in two) == before

    # its replicas gone (a restart on other ports), the run resumes on new ones: the group's name keys the cache
    fresh = [_Endpoint(), _Endpoint()]
    try:
        moved = runner.invoke(app, ["calibrate", "--resume", str(run), "--max-concurrency", "2",
                                    *[a for s in fresh for a in ("--base-url", s.base_url)]])
        alone = runner.invoke(app, ["calibrate", "--resume", str(run), "--base-url", fresh[0].base_url])
    finally:
        for server in fresh:
            server.close()
    assert moved.exit_code == 0, moved.output
    assert not any("messages" in b for s in fresh for b in s.bodies)  # every answer came from the cache
    assert json.loads((run / "config.json").read_text())["endpoint"]["base_urls"] == [s.base_url for s in two]
    assert alone.exit_code == 2 and "would leave it and pay every finished call again" in " ".join(alone.output.split())

    # evolve judge over the same two replicas (URLs in one option, by a comma); its resume may list them reversed
    judge = ["judge", str(tiny_pack_dir), "--judge", str(run), "--run-id", "scored", "--archives-dir",
             str(tmp_path / "archives"), "--model", "scripted"]
    for server in two:
        server.bodies.clear()
    scored = runner.invoke(app, [*judge, "--base-url", f"{two[0].base_url},{two[1].base_url}"])
    assert scored.exit_code == 0, scored.output
    pairs = _judge_pairs(two)
    assert pairs and all(len(where) == 1 for where in pairs.values())
    paid = sum(len(s.bodies) for s in two)
    resumed = runner.invoke(app, [*judge, "--base-url", two[1].base_url, "--base-url", two[0].base_url, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert sum(len(s.bodies) for s in two) == paid  # the group's cache: nothing paid twice


def test_a_failing_replica_is_taken_out_and_the_run_completes_on_the_other(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                            monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    good, sick = _Endpoint(), _Sick()
    try:
        result = runner.invoke(app, _args(tmp_path, tiny_pack_dir, tiny_splits_dir, "sick", [good.base_url, sick.base_url]))
    finally:
        good.close()
        sick.close()
    assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "sick"
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    warnings = [e["message"] for e in events if e["event"] == "warning" and "taken out" in e.get("message", "")]
    assert len(warnings) == 1 and sick.base_url in warnings[0]
    assert 1 <= len(sick.bodies) <= 4  # two attempts take it out (a few more may have been in flight)
    scores = (run / "scores.csv").read_text()
    assert "model_failure" not in scores
    by_endpoint = json.loads((run / "report.json").read_text())["usage"]["by_endpoint"]
    assert by_endpoint[sick.base_url]["taken_out"] == 1 and by_endpoint[sick.base_url]["calls"] == 0
    assert by_endpoint[sick.base_url]["failed_attempts"] >= 2
    report = (run / "report.md").read_text()
    assert f"Taken out during the run (its calls went to the next replica; the journal's warnings say when and why): " \
           f"`{sick.base_url}`." in report


def test_a_replica_listed_twice_is_refused_before_any_call(tmp_path, tiny_pack_dir, tiny_splits_dir, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    url = "http://127.0.0.1:9/v1"
    result = runner.invoke(app, _args(tmp_path, tiny_pack_dir, tiny_splits_dir, "dup", [url, url]))
    assert result.exit_code != 0 and "twice" in result.output and "Traceback" not in result.output


def test_base_urls_from_the_environment_separated_by_commas() -> None:
    endpoint = env_overrides({"EVOLVE_BASE_URL": "http://a:8000/v1, http://b:8000/v1"})["endpoint"]
    assert endpoint["base_urls"] == ("http://a:8000/v1", "http://b:8000/v1") and endpoint["base_url"] == "http://a:8000/v1"
    assert env_overrides({"EVOLVE_BASE_URL": "http://a:8000/v1"})["endpoint"]["base_urls"] == ()


def test_bench_run_keeps_each_case_of_the_pipeline_on_one_replica(tmp_path, monkeypatch):
    from evolve.testing import LoopbackChatServer
    from tests.cli.test_cli_bench import _tag, respond
    from tests.consilium.bench_support import write_cases

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    cases = write_cases(tmp_path / "cases.jsonl", n=4)
    servers = [LoopbackChatServer(respond), LoopbackChatServer(respond)]
    try:
        result = runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", "b", "--archives-dir",
                                     str(tmp_path / "archives"), "--model", "scripted", "--max-concurrency", "4",
                                     "--base-url", servers[0].base_url, "--base-url", servers[1].base_url])
    finally:
        for server in servers:
            server.close()
    assert result.exit_code == 0, result.output
    where: dict[int, set[int]] = defaultdict(set)
    for i, server in enumerate(servers):
        for body in server.bodies:
            if "messages" in body and _tag(body) != "judge":
                text = json.dumps(body["messages"])
                where[next(c for c in range(4) if f"patient {c} with" in text)].add(i)
    assert len(where) >= 3 and all(len(s) == 1 for s in where.values()), where  # a case's calls: one replica
    report = (tmp_path / "archives" / "b" / "bench_report.md").read_text()
    used = set().union(*where.values())  # the ports are random, so 4 cases land on one replica 1 time in 8
    assert "### Calls per endpoint" in report and all(servers[i].base_url in report for i in used)
