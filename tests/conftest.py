"""Shared fixtures: a tiny synthetic rating pack, its splits, and a scripted fake endpoint."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, write_pack
from evolve.errors import LocalServerError
from evolve.llm import ChatRequest, ChatResponse, Client, Message, ResponseCache
from evolve.local import DEFAULT_LOCAL_MODEL, InstallInfo, install, model_path, server_binary
from evolve.rubric import load_rubric
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

def pytest_configure(config: pytest.Config) -> None:
    """Garbage collection tuned for one process running thousands of short tests (set before
    collection, whose assert rewriting builds large syntax trees: with Python's defaults it ran
    22 full collections, about 3 s of CPU): a young collection waits for 20,000 new objects
    instead of 700 and the older generations are collected 5 and 10 times less often, so the
    collector stops walking the suite's large, live heap again and again (on tests/cli and
    tests/report, 3.9 s of garbage collection became 2.1 s). Cycles are freed a little later; no
    test depends on when.

    Typer's ``CliRunner`` builds the click command tree of the app it is given on every
    ``invoke`` (about 40 ms for ``evolve.cli.app``, which hundreds of tests invoke); the tree
    does not change, so the tests build it once. Any other app is built as before.

    At the end of the session pytest looks for exceptions raised in finalizers by collecting
    garbage five times over the whole heap (1.8 s of CPU here); one collection frees every
    cycle left, so it collects once.

    Text columns are kept in Python strings, as a core install keeps them: the test extra
    installs pyarrow (for Parquet), and pandas 3 then backs every text column of every small
    frame the engines and reports build with Arrow, which cost the suite 5-7% of its CPU.
    ``tests/outputs/test_string_storage.py`` runs the engines and report writers under
    Arrow storage and checks that they write the same files."""
    import pandas as pd
    import typer.testing
    from _pytest.unraisableexception import gc_collect_iterations_key

    from evolve.cli import app

    gc.set_threshold(20_000, 50, 100)
    pd.set_option("mode.string_storage", "python")
    config.stash[gc_collect_iterations_key] = 1
    build = typer.testing._get_command
    built = functools.cache(lambda: build(app))
    typer.testing._get_command = lambda typer_app: built() if typer_app is app else build(typer_app)  # type: ignore[assignment]


LIGHT_REPORT = {"EVOLVE_REPORT_REPLICATES": "50", "EVOLVE_REPORT_FIGURES": "0"}
"""The report settings of tests that do not test the report (see :func:`light_reports`)."""


@pytest.fixture(autouse=True, scope="module")
def light_reports() -> Iterator[None]:
    """Reports written by tests are light: 50 bootstrap replicates, no PNG figures
    (``EVOLVE_REPORT_*``, read by every report writer and inherited by ``evolve`` subprocesses).

    Module-scoped, so a module's shared run fixtures are light too. Tests marked
    ``full_report`` (they check figures, interval widths or the default replicate count) get
    the full settings (see :func:`full_report_when_marked`).
    """
    with light_report_settings():
        yield


@contextlib.contextmanager
def light_report_settings() -> Iterator[None]:
    """The light report settings inside the block: for session-scoped fixtures, which pytest
    sets up before any module's :func:`light_reports`."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LIGHT_REPORT.items():
            patch.setenv(name, value)
        yield


@contextlib.contextmanager
def full_reports() -> Iterator[None]:
    """The full report settings inside the block (for shared fixtures whose reports tests read)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in LIGHT_REPORT:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(autouse=True)
def full_report_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``full_report`` writes its reports with the default settings."""
    if not request.node.get_closest_marker("full_report"):
        yield
        return
    with full_reports():
        yield


def copy_cached_answers(source: Path, into: Path) -> None:
    """Every answer of the response cache ``source`` into the cache ``into`` (made when missing;
    it may be open in a client): a test's copy of a shared calibration pays nothing again.
    Read through SQLite, so answers still in ``source``'s write-ahead log come along."""
    ResponseCache(into).close()  # the table, when ``into`` is new
    with contextlib.closing(sqlite3.connect(into)) as db, db:
        db.execute("ATTACH DATABASE ? AS shared", (str(source),))
        db.execute("INSERT OR REPLACE INTO responses SELECT * FROM shared.responses")


def make_tiny_pack(n_cases: int = 10) -> RatingPack:
    """Synthetic K-QA-style pack: each target's text carries its 'truth' so a fake judge can use it."""
    rubric = load_rubric("kqa-entailment")
    cases, targets, ratings = [], [], []
    for i in range(n_cases):
        cid = f"syn-{i:02d}"
        cases.append(Case(case_id=cid, title=f"Synthetic question {i}", text=f"Synthetic patient question {i}?",
                          reference_answer="Synthetic reference."))
        for j in range(2):
            truth = (i + j) % 3
            tid = f"{cid}-t{j}"
            targets.append(Target(target_id=tid, case_id=cid, component="answer",
                                  text=f"Synthetic answer {i}.{j} (truth {truth})", statement=f"Statement {i}.{j}",
                                  model="synthetic", condition="Must_have"))
            for k, delta in enumerate((0, 1 if truth < 2 else -1)):
                score = truth if k == 0 or (i % 2 == 0) else truth + delta
                ratings.append(Rating(case_id=cid, target_id=tid, rater_id=f"rater-{k + 1}", criterion="entailment",
                                      score=score, comment="synthetic comment" if score == 0 else ""))
    manifest = PackManifest(name="tiny", description="synthetic test pack",
                            rubric=RubricRef(id=rubric.id, version=rubric.version))
    return RatingPack(path=None, manifest=manifest, cases=tuple(cases), targets=tuple(targets), ratings=tuple(ratings))


@pytest.fixture
def tiny_pack_dir(tmp_path: Path) -> Path:
    path = tmp_path / "packs" / "tiny"
    write_pack(make_tiny_pack(), path)
    return path


@pytest.fixture
def tiny_splits_dir(tmp_path: Path, tiny_pack_dir: Path) -> Path:
    from evolve.data import load_pack

    splits = make_splits(load_pack(tiny_pack_dir), holdout_fraction=0.2, validation_fraction=0.4, seed=3)
    path = tmp_path / "splits" / "tiny"
    write_splits(splits, path)
    return path


def request_of(body: dict) -> ChatRequest:
    """The :class:`ChatRequest` behind an HTTP request body (the tag, never sent, is read back
    from the response format's name), so a loopback endpoint can answer like the fake one."""
    name = body["response_format"]["json_schema"]["name"]
    return ChatRequest(
        model=body["model"],
        messages=tuple(Message(**m) for m in body["messages"]),
        seed=body["seed"],
        tag={"guidance_revision": "mutation", "drift_verdict": "audit"}.get(name, "judge"),
    )


def fake_endpoint(request: ChatRequest) -> str:
    """A scripted endpoint for the tiny pack.

    Judge: with guidance containing 'calibrated' it returns the true label; otherwise it
    always answers 2 (a lenient judge). Mutation: proposes 'calibrated rule N' guidance, but
    when the seed is 2 mod 3 it proposes a text over 800 characters (must be rejected).
    Drift audit: the guidance is on topic.
    """
    user = request.messages[-1].content
    if request.tag == "audit":  # the semantic-drift check that ends every run
        return json.dumps({"rationale": "synthetic check", "about_criterion": True,
                           "contradicts_protocol": False, "drift": "none"})
    if request.tag == "mutation":
        n = request.seed
        text = "x" * 900 if n % 3 == 2 else f"calibrated rule {n}: score the statement strictly."
        return json.dumps({"analysis": "too lenient", "guidance": text})
    guidance = user.split("GUIDANCE FOR THIS CRITERION:", 1)[1] if "GUIDANCE FOR THIS CRITERION:" in user else ""
    truth = int(re.search(r"truth (\d)", user).group(1))
    score = truth if "calibrated" in guidance else 2
    return json.dumps({"rationale": "synthetic", "score": str(score)})


@pytest.fixture
def fake_client(tmp_path: Path):
    provider = FakeProvider(fake_endpoint)
    client = Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=2, backoff_initial=0.01)
    yield client
    client.close()


@pytest.fixture(scope="session")
def installed_local_model() -> InstallInfo | None:
    """The default embedded model, installed.

    On CI (``CI=true``) this runs :func:`evolve.local.install` (idempotent: instant when
    ``evolve setup`` already ran). Elsewhere it never installs anything: the test is skipped
    with the reason when the server binary or the weights are missing.
    """
    if os.environ.get("CI") == "true":
        return install(model=DEFAULT_LOCAL_MODEL)
    try:
        server_binary()
    except LocalServerError as exc:
        pytest.skip(f"embedded llama-server not installed; run `evolve setup` ({exc})")
    weights = model_path(DEFAULT_LOCAL_MODEL)
    if not weights.is_file():
        pytest.skip(f"weights of {DEFAULT_LOCAL_MODEL} not installed at {weights}; run `evolve setup`")
    return None


CONSILIUM_ROLES = ("Cardiology", "Nephrology")


def consilium_truth(case_index: int, number: int, component: str) -> int:
    """The synthetic 'true' 0-3 score of a consilium target on criterion ``number``."""
    return (case_index + number + len(component)) % 4


def make_consilium_pack(n_cases: int = 12) -> RatingPack:
    """Synthetic consilium-rubric pack: 2 roles per case, reasoning/opinion per role, final, case.

    Each target's text lists its true score per criterion number (``truths 1:2 2:0 ...``) so a
    fake judge can answer correctly when guided. Raters: one per specialty; a role's
    reasoning/opinion is rated by its own specialty, the final report and the case target by
    both (their ratings sometimes differ by one). Only applicable (criterion, component)
    pairs are rated.
    """
    rubric = load_rubric("consilium")
    cases, targets, ratings = [], [], []
    for i in range(n_cases):
        cid = f"10.0000/syn-{i:03d}"
        cases.append(Case(case_id=cid, title=f"SYNTHETIC case {i}", text=f"Synthetic patient {i}: chest pain and rising creatinine.",
                          reference_answer=f"Synthetic diagnosis {i}"))
        units = [(f"{cid}:s:{r.lower()}:{comp}", comp, r) for r in CONSILIUM_ROLES for comp in ("reasoning", "opinion")]
        units += [(f"{cid}:s:final", "final", ""), (f"{cid}:s:case", "case", "")]
        for tid, comp, role in units:
            truths = " ".join(f"{c.number}:{consilium_truth(i, c.number, comp)}" for c in rubric.criteria)
            targets.append(Target(target_id=tid, case_id=cid, component=comp, role=role,
                                  text=f"Synthetic {comp} text. truths {truths}", model="synthetic", condition="structured"))
            raters = [role] if role else list(CONSILIUM_ROLES)
            for c in rubric.criteria:
                if comp not in c.components:
                    continue
                truth = consilium_truth(i, c.number, comp)
                for k, rater in enumerate(raters):
                    score = truth if k == 0 or (i + c.number) % 3 else min(3, truth + 1)
                    ratings.append(Rating(case_id=cid, target_id=tid, rater_id=rater.lower(), criterion=c.criterion_id,
                                          score=score, comment="synthetic" if score < 2 else ""))
    manifest = PackManifest(name="consilium-tiny", description="synthetic consilium pack",
                            rubric=RubricRef(id=rubric.id, version=rubric.version))
    return RatingPack(path=None, manifest=manifest, cases=tuple(cases), targets=tuple(targets), ratings=tuple(ratings))


@functools.cache
def _consilium_numbers() -> dict[str, int]:
    """Criterion name -> number of the shipped consilium rubric (read once: the fake endpoint
    answers thousands of calls per test)."""
    return {c.name: c.number for c in load_rubric("consilium").criteria}


def fake_consilium_endpoint(request: ChatRequest) -> str:
    """Scripted endpoint for the consilium pack: guided by 'calibrated' guidance the judge
    returns the true score of the criterion it is asked about, otherwise always 2. Mutations
    as in :func:`fake_endpoint`."""
    user = request.messages[-1].content
    if request.tag != "judge":
        return fake_endpoint(request)
    number = _consilium_numbers()[re.search(r"^CRITERION: (.+)$", user, re.M).group(1)]
    truth = int(re.search(rf"\b{number}:(\d)", user.split("truths", 1)[1]).group(1))
    guidance = user.split("GUIDANCE FOR THIS CRITERION:", 1)[1] if "GUIDANCE FOR THIS CRITERION:" in user else ""
    return json.dumps({"rationale": "synthetic", "score": str(truth if "calibrated" in guidance else 2)})


class HangingEndpoint:
    """A provider answering with ``respond`` for ``after`` calls, then with a call that never
    returns (a local model generating for minutes); ``hanging`` is set once it is in flight."""

    endpoint_id = "fake://"

    def __init__(self, respond, after: int) -> None:
        self.respond = respond
        self.after = after
        self.calls = 0
        self.hanging = threading.Event()
        self.answered_late = False

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls > self.after:
            self.hanging.set()
            await anyio.sleep(3600)
            self.answered_late = True
        return ChatResponse(text=self.respond(request), prompt_tokens=100, completion_tokens=20)


@pytest.fixture
def ctrl_c_when():
    """``ctrl_c_when(event)``: send SIGINT to the main thread once ``event`` is set, from a
    daemon thread (a real signal interrupts the main thread's blocking wait as Ctrl-C does;
    ``_thread.interrupt_main`` does not). Python's Ctrl-C handler is installed for the test:
    a shell starts background jobs with SIGINT ignored, and pytest would inherit that."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def arm(event: threading.Event) -> None:
        def send() -> None:
            if event.wait(30):
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

        threading.Thread(target=send, daemon=True).start()

    yield arm
    signal.signal(signal.SIGINT, previous)


def readme_python_block(marker: str) -> str:
    """The Python block between ``<!-- {marker}:start -->`` and ``<!-- {marker}:end -->`` of
    README.md (each marker once)."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.count(start) == 1 and text.count(end) == 1, f"README.md must mark its {marker} block once"
    block = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert block.startswith("```python\n") and block.endswith("\n```"), block[:80]
    return block.removeprefix("```python\n").removesuffix("\n```") + "\n"
