"""The benchmark runner end to end on the fake provider: artifacts, records, pack, manifest,
role reuse, resume after an interruption, refused resumes, packs as case sources."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.consilium import (
    CaseRun,
    RoleFile,
    load_bench_manifest,
    load_case_runs,
    prompt_catalog,
    run_bench,
)
from evolve.data import (
    Case,
    PackManifest,
    RatingPack,
    RubricRef,
    load_consilium_records,
    load_pack,
    write_pack,
)
from evolve.errors import DataError, RunError
from evolve.llm import ChatRequest, Client, ResponseCache
from tests.conftest import SHARED_DATA, HangingEndpoint
from tests.consilium.bench_support import (
    consilium_endpoint,
    make_client,
    make_config,
    standin_backend,
    standin_endpoint,
    write_cases,
)


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    return write_cases(tmp_path / "cases.jsonl", n=2)


def test_end_to_end_with_the_real_pipeline(tmp_path, cases_file, monkeypatch):
    """2 cases x 1 model x 2 conditions: artifacts, records, pack, manifest, roles assigned once."""
    monkeypatch.setenv("EVOLVE_API_KEY", "sk-bench-secret-000000000000")
    config = make_config(tmp_path, cases_file)
    client, provider = make_client(tmp_path)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    run = tmp_path / "archives" / "b"
    assert result.run_dir == run and result.n_ok == 4 and result.n_failed == 0

    # one CaseRun artifact per case x condition, named after the case, model, condition, topology
    names = sorted(p.name for p in (run / "cases").glob("*.json"))
    assert names == [f"10.0000_bench-0{i}.model-a.{c}.single.json" for i in range(2) for c in ("free-form", "structured")]
    runs = load_case_runs(run)
    assert [(r.case_id, r.condition) for r in runs] == [
        (f"10.0000/bench-0{i}", c) for i in range(2) for c in ("free-form", "structured")]
    assert all(r.stop_reason == "consensus" and r.rounds_completed == 2 for r in runs)

    # role assignment: one call per case and model, reused by both conditions (consilium paper, role assignment)
    assert sum(r.tag == "role_assignment" for r in provider.requests) == 2
    for i in range(2):
        roles = RoleFile.model_validate_json((run / "roles" / f"10.0000_bench-0{i}.model-a.json").read_text())
        assert [r.name for r in roles.roles] == ["Cardiology", "Nephrology"] and roles.roles[0].primary
        same = [r for r in runs if r.case_id == roles.case_id]
        assert all(r.roles == roles.roles for r in same)

    # records: what physicians rate; the workbook importer's folder format
    records = load_consilium_records(run / "records" / "model-a")
    assert sorted(records) == ["10.0000/bench-00", "10.0000/bench-01"]
    assert {rec.condition for recs in records.values() for rec in recs} == {"free-form", "structured"}
    assert result.records == {"model-a": run / "records" / "model-a"}

    # the outputs are targets of a rating pack without ratings
    pack = load_pack(run / "pack" / "model-a")
    assert pack.manifest.rubric.id == "consilium" and pack.ratings == ()
    assert [c.case_id for c in pack.cases] == ["10.0000/bench-00", "10.0000/bench-01"]
    assert pack.cases[0].reference_answer == "Synthetic reference diagnosis 0"
    assert len(pack.targets) == 4 * (2 * 2 + 2)  # per record: reasoning+opinion per role, final, case
    assert (run / "pack" / "model-a" / "ratings.csv").read_text().strip() == (
        "case_id,target_id,rater_id,criterion,score,not_evaluable,comment")

    # manifest: models, endpoint without key, prompts with hashes, decoding, limits, cases
    manifest = load_bench_manifest(run)
    raw = json.loads((run / "manifest.json").read_text())
    assert manifest.models == {"model-a": "model-a"}
    assert raw["endpoint"] == {"provider": "fake", "base_url": None, "model": "model-a", "local_model": None}
    assert raw["config"]["endpoint"]["api_key_env"] == "EVOLVE_API_KEY"
    catalog = prompt_catalog()
    assert set(manifest.prompts) == set(catalog) and catalog
    for name, text in catalog.items():
        assert manifest.prompts[name].text == text
        assert manifest.prompts[name].sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert manifest.decoding == {"temperature": 0.0, "top_p": 1.0, "seed": 42, "max_rounds": 2}
    assert manifest.limits.role_assignment == 600 and manifest.limits.finalizer == 700
    assert manifest.cases_sha256 == hashlib.sha256(cases_file.read_bytes()).hexdigest()
    assert manifest.case_ids == ("10.0000/bench-00", "10.0000/bench-01")
    assert manifest.pipeline_version and manifest.package_version and manifest.created
    assert set(manifest.pipeline["response_formats"]) >= {"role_assignment", "vote", "structured_final"}
    for path in run.rglob("*"):
        if path.is_file():
            assert "sk-bench-secret" not in path.read_text(errors="ignore"), path

    # journal and every generating request at temperature 0 / top_p 1 / seed 42 with stage limits
    events = [e["event"] for e in _events(run)]
    assert events[0] == "bench_started" and events[-1] == "bench_finished"
    assert events.count("case_started") == events.count("case_finished") == 4
    assert events.count("roles_assigned") == 2
    finished = [e for e in _events(run) if e["event"] == "case_finished"]
    assert all(e["stop_reason"] == "consensus" and e["rounds"] == 2 and e["tokens"] > 0 for e in finished)
    assert {(r.temperature, r.top_p, r.seed) for r in provider.requests} == {(0.0, 1.0, 42)}
    limits = {r.tag: r.max_tokens for r in provider.requests}
    assert limits["role_assignment"] == 600 and limits["opinion"] == 600 and limits["vote"] == 500
    assert limits["finalizer"] == 700
    # no generating prompt carries the reference answer (consilium paper, pre-consilium opinions)
    assert not any("Synthetic reference diagnosis" in m.content for r in provider.requests for m in r.messages)


def test_roles_are_assigned_once_per_case_and_model_with_a_stand_in(tmp_path, cases_file):
    backend, made = standin_backend()
    config = make_config(tmp_path, cases_file, models=("model-a", "org/model-b"), parallel_cases=3)
    client, _ = make_client(tmp_path, standin_endpoint)
    try:
        result = run_bench(config, client=client, backend=backend)
    finally:
        client.close()
    assert result.n_ok == 8
    assert [(r.case_id, r.model, r.condition) for r in result.runs] == [  # run order, whatever finished first
        (f"10.0000/bench-0{i}", m, c) for i in range(2) for m in ("model-a", "org/model-b")
        for c in ("free-form", "structured")]
    (pipe,) = made
    assert sorted(pipe.assigned) == sorted((f"10.0000/bench-0{i}", m) for i in range(2) for m in ("model-a", "org/model-b"))
    run = result.run_dir
    assert (run / "roles" / "10.0000_bench-00.org-model-b.json").is_file()
    assert set(result.records) == {"model-a", "org-model-b"}
    for key in ("model-a", "org-model-b"):
        assert len(load_consilium_records(run / "records" / key)) == 2
        assert len(load_pack(run / "pack" / key).targets) == 2 * 2 * 6
    manifest = load_bench_manifest(run)
    assert manifest.pipeline_version == "standin-1" and set(manifest.prompts) == {"opinion.user", "final.user"}


def _interrupting(after: int, answered: set[str]):
    """The scripted endpoint, raising KeyboardInterrupt on call number ``after + 1``."""
    seen = [0]

    def respond(request: ChatRequest) -> str:
        seen[0] += 1
        if seen[0] > after:
            raise KeyboardInterrupt
        answered.add(request.cache_key("fake://"))
        return consilium_endpoint(request)

    return respond


def test_resume_after_an_interruption_mid_consilium_pays_no_finished_call_twice(tmp_path, cases_file):
    config = make_config(tmp_path, cases_file)
    answered: set[str] = set()
    # first case, free-form: role assignment (1), two opinions (2), synthesis (1), round-1 votes
    # (2) -> interrupted inside the consilium, at the moderator
    client, _ = make_client(tmp_path, _interrupting(6, answered), concurrency=1)
    with pytest.raises(KeyboardInterrupt):
        run_bench(config, client=client)
    client.close(cancel=True)  # its loop died of the interrupt: closing must not raise
    run = config.run_dir
    assert _events(run)[-1]["event"] == "interrupted"
    assert not list(run.glob("cases/*.json"))  # no pipeline run finished
    assert (run / "roles" / "10.0000_bench-00.model-a.json").is_file()  # written as soon as assigned
    assert len(answered) == 6

    client, provider = make_client(tmp_path)
    try:
        result = run_bench(config, client=client, resume=True)
    finally:
        client.close()
    assert result.n_ok == 4
    paid_again = {r.cache_key("fake://") for r in provider.requests}
    assert not paid_again & answered  # nothing answered before the interruption is paid twice
    events = [e["event"] for e in _events(run)]
    assert events.count("bench_started") == 1 and events.count("bench_resumed") == 1
    assert "roles_reused" in events
    first = CaseRun.model_validate_json((run / "cases" / "10.0000_bench-00.model-a.free-form.single.json").read_text())
    cached = [c.stage for c in first.calls if c.cached]
    assert cached == ["opinion", "opinion", "synthesis", "vote", "vote"]  # the interrupted case's calls came from the cache

    # the resumed run produced the same records as an uninterrupted run
    fresh = make_config(tmp_path / "fresh", cases_file)
    client, _ = make_client(tmp_path / "fresh")
    try:
        run_bench(fresh, client=client)
    finally:
        client.close()
    for path in (run / "records" / "model-a").glob("*.json"):
        assert path.read_text() == (fresh.run_dir / "records" / "model-a" / path.name).read_text()


@pytest.mark.timeout(120)  # before the fix this waited for the hanging call (an hour)
@pytest.mark.parametrize("owned", [False, True], ids=["borrowed-client", "owned-client"])
def test_ctrl_c_while_a_call_is_in_flight_stops_at_once_and_records_no_failure(tmp_path, cases_file, owned, monkeypatch,
                                                                               ctrl_c_when):
    """Ctrl-C reaches the caller while a worker thread waits on a slow call: the run does not wait
    for that call (measured before the fix: the run sat until the local model finished, minutes),
    the interrupted case run is not recorded as a failure, and closing the client frees the worker."""
    config = make_config(tmp_path, cases_file, parallel_cases=1)
    endpoint = HangingEndpoint(consilium_endpoint, after=3)  # role assignment, two opinions, then the synthesis hangs
    client = Client(endpoint, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=1)
    if owned:  # run_bench opens (and must close) the client itself
        import evolve.runs._client

        monkeypatch.setattr(evolve.runs._client, "open_client", lambda endpoint, cache_path=None, journal=None: (client, None))
    ctrl_c_when(endpoint.hanging)
    with pytest.raises(KeyboardInterrupt):
        run_bench(config, client=None if owned else client)
    assert endpoint.hanging.is_set() and not endpoint.answered_late
    client.close(cancel=True)  # the owner's part (a no-op when run_bench owned and closed it)
    for worker in [t for t in threading.enumerate() if t.name.startswith("bench")]:
        worker.join(timeout=30)
        assert not worker.is_alive()
    events = [e["event"] for e in _events(config.run_dir)]
    # an owned client journals the interrupted process's usage as it is released (the 3 answered calls)
    assert (events[-2:] == ["interrupted", "usage"]) if owned else events[-1] == "interrupted"
    assert "case_failed" not in events
    if owned:
        assert sum(u["calls"] for u in _events(config.run_dir)[-1]["usage"].values()) == 3
    assert not list(config.run_dir.glob("cases/*.json"))  # nothing recorded for the cancelled case run


def test_closing_a_client_whose_loop_died_of_an_interrupt_does_not_raise(tmp_path):
    """A KeyboardInterrupt raised inside the client's loop ends it; close() (with or without
    cancel) must not raise again, or it would hide the interrupt in every ``finally``."""
    def respond(request):
        raise KeyboardInterrupt

    for cancel in (False, True):
        client, _ = make_client(tmp_path, respond)
        with pytest.raises(BaseException) as info:
            client.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=5))
        assert isinstance(info.value, KeyboardInterrupt) or "KeyboardInterrupt" in repr(info.value)
        client.close(cancel=cancel)
        client.close(cancel=cancel)  # idempotent


def test_outputs_rated_in_workbooks_feed_back_into_a_calibration_pack(tmp_path, cases_file):
    """The issue's loop: bench outputs -> a physician's filled workbook -> the workbook importer
    -> a rating pack on those outputs, valid for calibration (consilium paper, benchmark runner-§6)."""
    from openpyxl import load_workbook

    from evolve.data import import_workbooks, validate_pack, write_workbook_template

    config = make_config(tmp_path, cases_file, conditions=("free-form",))
    client, _ = make_client(tmp_path)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    run = result.run_dir
    records = load_consilium_records(run / "records" / "model-a")
    case_ids = sorted(records)
    path = write_workbook_template(tmp_path / "workbooks" / "cardio.xlsx", specialty="Cardiology", case_ids=case_ids)
    book = load_workbook(path)
    for row in range(5, 5 + len(case_ids)):
        for col in range(2, 29):  # every score column: reasoning_1 ... case_10
            book.active.cell(row, col, 2)
    book.save(path)

    # the run folder is the case source (its cases.jsonl is in evolve's own case format)
    imported = import_workbooks(tmp_path / "workbooks", cases=run, outputs=run / "records" / "model-a",
                                condition="free-form")
    pack = imported.pack
    validate_pack(pack)
    assert imported.summary.raters == ("cardio/Cardiology",)
    cli = CliRunner().invoke(app, ["ratings", "import-workbooks", str(tmp_path / "workbooks"), "--cases", str(run),
                                   "--outputs", str(run / "records" / "model-a"), "--condition", "free-form",
                                   "--out", str(tmp_path / "rated")])
    assert cli.exit_code == 0, cli.output
    assert load_pack(tmp_path / "rated").ratings == pack.ratings
    rated_targets = {r.target_id for r in pack.ratings}
    bench_targets = {t.target_id for t in load_pack(run / "pack" / "model-a").targets}
    assert rated_targets and rated_targets <= bench_targets  # the ratings sit on the generated outputs
    assert {r.case_id for r in pack.ratings} == set(case_ids) and {r.score for r in pack.ratings} == {2}


def test_a_second_resume_is_free_and_reuses_artifacts(tmp_path, cases_file):
    config = make_config(tmp_path, cases_file)
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        n = provider.calls
        again = run_bench(config, client=client, resume=True)
    finally:
        client.close()
    assert provider.calls == n and all(s.reused for s in again.runs) and again.n_ok == 4
    assert [e["event"] for e in _events(config.run_dir)].count("case_reused") == 4


def test_failed_runs_are_recorded_and_regenerated_on_resume(tmp_path, cases_file):
    from evolve.errors import EndpointError

    config = make_config(tmp_path, cases_file, conditions=("structured",))

    def broken_finalizer(request: ChatRequest):
        if request.tag == "finalizer":
            raise EndpointError("HTTP 400: finalizer refused")
        return consilium_endpoint(request)

    client, _ = make_client(tmp_path, broken_finalizer)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    assert result.n_ok == 0 and result.n_failed == 2
    failed = CaseRun.model_validate_json(result.runs[0].path.read_text())
    assert failed.stop_reason == "failure" and "finalizer" in failed.error and failed.rounds_completed == 2
    assert not (config.run_dir / "records").exists() and result.packs == {}
    events = [e for e in _events(config.run_dir) if e["event"] == "case_failed"]
    assert len(events) == 2 and "finalizer refused" in events[0]["error"]

    client, provider = make_client(tmp_path)
    try:
        result = run_bench(config, client=client, resume=True)
    finally:
        client.close()
    assert result.n_ok == 2
    assert [r.tag for r in provider.requests] == ["finalizer", "finalizer"]  # only the failed calls are paid


def test_resume_refuses_a_changed_run(tmp_path, cases_file):
    config = make_config(tmp_path, cases_file, conditions=("structured",))
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        n = provider.calls
        with pytest.raises(RunError, match="already holds a benchmark run"):
            run_bench(config, client=client)
        changed = make_config(tmp_path, cases_file, conditions=("free-form", "structured"))
        with pytest.raises(RunError, match=r"differs from this one in \['conditions'\]"):
            run_bench(changed, client=client, resume=True)
        limits = make_config(tmp_path, cases_file, conditions=("structured",),
                             generation={"limits": {"opinion": 999}})
        with pytest.raises(RunError, match="generation"):
            run_bench(limits, client=client, resume=True)
        # where the folder is and how many units run at once do not matter
        run_bench(config.model_copy(update={"parallel_cases": 2}), client=client, resume=True)
        # a changed case file or pipeline is refused too
        backend, _ = standin_backend()
        with pytest.raises(RunError, match="prompt templates|pipeline"):
            run_bench(config, client=client, resume=True, backend=backend)
        cases_file.write_text(cases_file.read_text() + "\n")
        with pytest.raises(RunError, match="changed since the run started"):
            run_bench(config, client=client, resume=True)
        with pytest.raises(RunError, match="nothing to resume"):
            run_bench(config.model_copy(update={"run_id": "other"}), client=client, resume=True)
    finally:
        client.close()
    assert provider.calls == n  # refused before any call


def test_a_rating_pack_folder_is_a_case_source_with_max_cases(tmp_path):
    cases = [Case(case_id=f"savage-{i}", title=f"vignette {i}", text=f"A synthetic vignette {i}.",
                  reference_answer=f"answer {i}") for i in range(5)]
    pack = RatingPack(path=None, manifest=PackManifest(name="p", rubric=RubricRef(id="consilium", version="1")),
                      cases=cases, targets=(), ratings=())
    write_pack(pack, tmp_path / "ratings" / "p")
    backend, _ = standin_backend()
    config = make_config(tmp_path, tmp_path / "ratings" / "p", max_cases=2, conditions=("structured",))
    client, _ = make_client(tmp_path, standin_endpoint)
    try:
        result = run_bench(config, client=client, backend=backend)
    finally:
        client.close()
    assert [r.case_id for r in result.runs] == ["savage-0", "savage-1"]
    manifest = load_bench_manifest(result.run_dir)
    assert manifest.cases_file.endswith("cases.jsonl") and manifest.case_ids == ("savage-0", "savage-1")
    assert load_pack(result.packs["model-a"]).cases[1].reference_answer == "answer 1"


def test_savage_vignettes_as_cases(tmp_path):
    """`evolve ratings import savage ... --out ratings/savage` then `--cases ratings/savage`."""
    source = SHARED_DATA / "savage2024-dr-ratings"
    if not source.exists():
        pytest.skip(f"{source} not available")
    from evolve.data import import_savage

    write_pack(import_savage(source), tmp_path / "ratings" / "savage")
    backend, _ = standin_backend()
    config = make_config(tmp_path, tmp_path / "ratings" / "savage", conditions=("free-form",))
    client, _ = make_client(tmp_path, standin_endpoint)
    try:
        result = run_bench(config, client=client, backend=backend)
    finally:
        client.close()
    source_order = [c.case_id for c in load_pack(tmp_path / "ratings" / "savage").cases]
    assert [r.case_id for r in result.runs] == source_order[:3]  # quick preset: the first 3 cases
    assert load_pack(result.packs["model-a"]).cases[0].reference_answer == "Cholesterol embolization"


def test_n_plus_one_topology_writes_its_own_records_and_pack(tmp_path, cases_file):
    config = make_config(tmp_path, cases_file, conditions=("free-form",), topologies=("single", "n+1"),
                         workers=("worker-1", "worker-2"))
    client, provider = make_client(tmp_path)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    assert result.n_ok == 4 and set(result.records) == {"model-a", "model-a.n+1"}
    nplus = CaseRun.model_validate_json(
        (result.run_dir / "cases" / "10.0000_bench-00.model-a.free-form.n+1.json").read_text())
    assert nplus.workers == ("worker-1", "worker-2") and nplus.consolidator == "model-a"
    assert {r.model for r in provider.requests if r.tag == "opinion_worker"} == {"worker-1", "worker-2"}
    assert sum(r.tag == "role_assignment" for r in provider.requests) == 2  # shared by both topologies
    for key in ("model-a", "model-a.n+1"):
        recs = load_consilium_records(result.run_dir / "records" / key)
        assert len(recs) == 2
        assert load_pack(result.packs[key]).manifest.name.startswith("b.model-a")
    assert {rec.topology for recs in load_consilium_records(result.run_dir / "records" / "model-a.n+1").values()
            for rec in recs} == {"n+1"}


def test_bad_cases_fail_before_any_call(tmp_path):
    bad = tmp_path / "cases.jsonl"
    bad.write_text(json.dumps({"doi": "a/b", "case_text": "x", "title": "", "answer": ""}) + "\n"
                   + json.dumps({"doi": "a_b", "case_text": "y", "title": "", "answer": ""}) + "\n")
    client, provider = make_client(tmp_path)
    try:
        with pytest.raises(DataError, match="same file name"):
            run_bench(make_config(tmp_path, bad), client=client)
        with pytest.raises(DataError, match="not found"):
            run_bench(make_config(tmp_path, tmp_path / "missing.jsonl"), client=client)
        (tmp_path / "empty").mkdir()
        with pytest.raises(DataError, match="without cases.jsonl"):
            run_bench(make_config(tmp_path, tmp_path / "empty"), client=client)
    finally:
        client.close()
    assert provider.calls == 0 and not (tmp_path / "archives").exists()
