"""De-identification keeps the clinical content of a case and removes what traces it back to its
publication, in every text a generating model sees (issues 13 item 6 and 23 item 7).

Every case text here and in ``data/deidentify_corpus.json`` is INVENTED in the style of a
published case record: no real case, patient or physician.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from evolve.consilium import (
    IDENTIFIER_KINDS,
    ConsiliumPipeline,
    PipelineSettings,
    deidentification_csv,
    deidentify,
    run_bench,
    strip_identifiers,
)
from evolve.data import Case
from evolve.llm import ChatRequest, Client
from evolve.runs import BenchFolder
from evolve.testing import FakeProvider
from tests.consilium.bench_support import make_client, make_config

CORPUS = json.loads((Path(__file__).parent / "data" / "deidentify_corpus.json").read_text(encoding="utf-8"))["cases"]
IDS = [c["case_id"] for c in CORPUS]


def corpus_case(entry: dict) -> Case:
    return Case(case_id=entry["case_id"], title=entry["title"], text="\n".join(entry["text"]),
                reference_answer="INVENTED-REFERENCE-DIAGNOSIS")


# -- the invented corpus --------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_corpus_case_is_stripped_to_its_expected_text(entry):
    case = corpus_case(entry)
    out = deidentify(case.text, case)
    assert out.text == "\n".join(entry["expected"])
    assert {k: v for k, v in out.counts.items() if v} == entry["counts"]
    assert set(out.counts) == set(IDENTIFIER_KINDS)


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_no_planted_identifier_survives_and_the_clinical_text_is_unchanged(entry):
    case = corpus_case(entry)
    out = strip_identifiers(case.text, case)
    for planted in entry["planted"]:
        assert planted in case.text, f"corpus error: {planted!r} is not in the input"
        assert planted not in out, planted
    for kept in entry["kept"]:
        assert kept in case.text or kept in "\n".join(entry["expected"])
        assert kept in out, kept
    assert strip_identifiers(out, case) == out  # nothing left to strip: the output is a fixed point


def test_the_corpus_plants_every_kind_of_identifier():
    planted = sum(len(c["planted"]) for c in CORPUS)
    kinds = {k for c in CORPUS for k in c["counts"]}
    assert planted >= 100 and kinds == set(IDENTIFIER_KINDS)


# -- one class at a time --------------------------------------------------------------------------------

PLAIN = Case(case_id="invented-0001", title="", text="t")


@pytest.mark.parametrize("date", [
    "2019-03-05", "2019/03/05", "2019-03-05T14:30", "03/05/2019", "3/5/2019", "05.03.2019", "5-3-2019", "3/5/19",
    "March 3, 2019", "March 3rd, 2019", "Mar. 3, 2019", "Sept 3, 2019", "3 Mar 2019", "3 March 2019",
    "3rd of March 2019", "the 3rd of March", "March 3", "March 2019", "Tuesday, March 5, 2019", "March 3–5, 2019",
    "3–5 March 2019", "March 30–April 2, 2019", "03/2019", "2019-03", "May 6 '19",
])
def test_every_common_date_format_becomes_one_placeholder(date):
    out = deidentify(f"She was seen on {date} with fever of 39.1°C.", PLAIN)
    assert out.text == "She was seen on [date] with fever of 39.1°C."
    assert out.counts["date"] >= 1


@pytest.mark.parametrize("text", [
    "She had malaria in 2015.", "Fever for 3 weeks and 2 days.", "Muscle strength was 4/5.",
    "Blood pressure 120/80 mm Hg.", "The titer was 1:2048 (1/2048).", "A 67-year-old woman.", "At 10:30 a.m.",
    "Creatinine 1.2 mg/dl on hospital day 3.", "Grade 3 of 4.", "In March she felt well.", "She may return.",
    "In case 2 of the differential, sepsis.", "Graves' disease and Hodgkin's lymphoma.", "Chest radiography (PA and lateral).",
    "The NIH Stroke Scale score was 4.", "On Hospital Day 2 the fever resolved.", "Hospital Anxiety and Depression Scale.",
    "She was seen in the Infectious Diseases Clinic of this hospital.", "Ratio 10.5/20; creatinine 1.2 mg/dl.",
])
def test_clinical_text_that_looks_like_an_identifier_is_kept(text):
    assert strip_identifiers(text, PLAIN) == text


@pytest.mark.parametrize("text, expected", [
    ("Case 12-2019: A man had fever.", "A man had fever."),
    ("Case 12–2019: A man had fever.", "A man had fever."),  # en dash
    ("Case 12—2019. A man had fever.", "A man had fever."),  # em dash
    ("Case No. 12: a man had fever.", "a man had fever."),
    ("CASE #12: a man had fever.", "a man had fever."),
    ("This was discussed (Case 12 of 2019).", "This was discussed."),
    ("A man had fever (case record 12/2019; No. 12-19).", "A man had fever."),
    ("MRN: 88123456. A man had fever.", "[record number]. A man had fever."),
])
def test_case_number_variants_go(text, expected):
    assert strip_identifiers(text, PLAIN) == expected


@pytest.mark.parametrize("text, expected", [
    ("The patient, described in Case 12-2019, had fever.", "The patient, described in a case, had fever."),
    ("Discussed in Case No. 34 last year; fever persisted.", "Discussed in a case last year; fever persisted."),
    ("The Case 12-2019 discussion was long.", "A case discussion was long."),
    ("We present Case 5-2021 of the Case Records of the Massachusetts General Hospital, a woman with fever.",
     "We present a case, a woman with fever."),
])
def test_a_case_number_inside_a_sentence_reads_as_a_case(text, expected):
    """Before: the number was cut out of the sentence ("described, had fever", "We present of, a
    woman"); a sentence running through it now keeps reading, without the number ("a case": the
    case has no title giving its own number, which would read "this case" - tested below)."""
    out = deidentify(text, PLAIN)
    assert out.text == expected
    assert out.counts["case_number"] == 1


@pytest.mark.parametrize("text, expected", [
    ("Fever (see https://www.example.org/case/12) and rash.", "Fever and rash."),
    ("Fever (N Engl J Med 2019;380:1150-7) and rash.", "Fever and rash."),
    ("A similar case was reported (N. Engl. J. Med. 2019; 380: 1150–1157).", "A similar case was reported."),
    ("As described in Lancet 2020;395:1033-4, steroids helped.", "As described, steroids helped."),
    ("Described in JAMA. 2021;325(7):e21123 and in the New England Journal of Medicine.", "Described in a journal."),
    ("Fever (doi:10.1056/NEJMcpc1900001; https://doi.org/10.1056/NEJMcpc1900001) and rash.", "Fever and rash."),
    ("Images are available at www.example.org/images.", "Images are available."),
])
def test_citations_dois_and_urls_leave_no_debris(text, expected):
    """Before (issue 23): "(see )" and "N Engl J Med 2019;" were left behind."""
    assert strip_identifiers(text, PLAIN) == expected


@pytest.mark.parametrize("text, expected", [
    ("Dr. José Núñez-García examined her.", "A physician examined her."),  # before: "a physiciané Núñez-García ..."
    ("Prof. van der Berg reviewed the slides.", "A physician reviewed the slides."),
    ("Jane O'Neil, M.D., reviewed the slides.", "A physician reviewed the slides."),
    ("The slides were reviewed by Jane O'Neil, M.D.", "The slides were reviewed by a physician."),
    ("Then Jane O'Neil, M.D. He agreed.", "Then a physician. He agreed."),
    ("Drs. Søren Holm and Aoife Ní Bhriain agreed.", "Physicians agreed."),
    ("Professor Émile Lefèvre-Dubois agreed.", "A physician agreed."),
    ("Kwame Mensah-Bonsu, MBBS, and Dr. Chen agreed.", "A physician and a physician agreed."),
    ("Mr. Haruto Nakamura-Lee, her brother, had Graves' disease.", "[name], her brother, had Graves' disease."),
    ("Dr. Graves saw her. Graves noted Graves' disease.", "A physician saw her. A physician noted Graves' disease."),
    ("Dr. Tomás Ibáñez-Ruiz (Medicine): A man had fever.", "Physician (Medicine): A man had fever."),
])
def test_names_with_titles_accents_and_particles_go_whole(text, expected):
    assert strip_identifiers(text, PLAIN) == expected


@pytest.mark.parametrize("text, expected", [
    ("He was seen at Massachusetts General Hospital (MGH).", "He was seen at a hospital."),
    ("He was seen at the MGH.", "He was seen at a hospital."),
    ("The MGH team agreed.", "A hospital team agreed."),
    ("He moved to Brigham and Women's last year.", "He moved to a hospital last year."),
    ("Then Riverside Community Hospital in Portland sent him.", "Then a hospital sent him."),
    ("Slides went to the Hospital of the University of Pennsylvania.", "Slides went to a hospital."),
    ("She studied at Harvard Medical School.", "She studied at a university."),
])
def test_hospital_names_and_abbreviations_go(text, expected):
    assert strip_identifiers(text, PLAIN) == expected


def test_title_heading_goes_but_its_words_in_a_sentence_stay():
    case = Case(case_id="10.1056/NEJMcpc2099999", title="Case 14-2031: A 67-Year-Old Woman with Fever and Rash", text="t")
    text = ("Case 14-2031: A 67-Year-Old Woman with Fever and Rash\nA 67-year-old woman with fever and rash was seen.\n"
            "The panel discussed A 67-Year-Old Woman with Fever and Rash at length.")
    assert strip_identifiers(text, case) == (
        "A 67-year-old woman with fever and rash was seen.\nThe panel discussed this case at length.")


def test_counts_name_kinds_never_identifiers():
    case = Case(case_id="10.1056/NEJMcpc2099999", title="", text="t")
    out = deidentify("Dr. Okafor saw her on March 3, 2019 at MGH (doi:10.1056/NEJMcpc2099999).", case)
    assert {k: v for k, v in out.counts.items() if v} == {"person": 1, "date": 1, "institution": 1, "doi": 1}
    assert out.text == "A physician saw her on [date] at a hospital."


# -- what the pipeline sends ------------------------------------------------------------------------------

ROLES = [{"name": "Cardiology", "primary": True, "rationale": "Heart."},
         {"name": "Internal Medicine", "primary": False, "rationale": "Whole patient."}]


class EchoingEndpoint:
    """A consilium endpoint whose every answer quotes ``leak`` (identifiers a model could recall:
    the original case text with all of them); none may travel on to a later stage's request.

    Its role names carry ``name_leak`` (a planted identifier), and its first panel is invalid (two
    primaries), so the re-ask quotes an answer full of identifiers back to the model."""

    def __init__(self, leak: str, name_leak: str = "") -> None:
        self.leak, self.name_leak = leak, name_leak

    def __call__(self, request: ChatRequest) -> str:
        wrapped = (request.response_format or {}).get("json_schema", {}).get("name") == "free_text"
        answer = self._answer(request, structured=request.response_format is not None and not wrapped)
        return json.dumps({"text": answer}) if wrapped else answer

    def _answer(self, request: ChatRequest, *, structured: bool) -> str:
        tag, leak = request.tag, self.leak
        if tag in ("role_assignment", "role_worker", "role_consolidation"):
            roles = [dict(r, name=f"{r['name']} ({self.name_leak})"[:80]) for r in ROLES]
            if not any(m.role == "assistant" for m in request.messages):  # first answer: invalid, re-asked
                roles = [dict(r, primary=True, rationale=f"{r['rationale']} {leak}") for r in roles]
            return json.dumps({"roles": roles, "panel_rationale": f"Panel for {leak}."})
        if tag in ("opinion", "opinion_worker", "opinion_consolidation"):
            if structured:
                return json.dumps({k: f"{k}: {leak}." for k in (
                    "subjective_objective", "syndromes_mechanisms", "differential_diagnosis", "tactics", "final_opinion")})
            return f"Reasoning about {leak}.\n\nFINAL OPINION:\nOpinion on {leak}."
        if tag in ("synthesis",):
            return f"REPORT on {leak}."
        if tag == "vote":
            if "round 1." in request.messages[-1].content:
                return json.dumps({"vote": "no", "critique": f"Critique: {leak}.", "proposed_revision": f"Say {leak}."})
            return json.dumps({"vote": "yes", "critique": "", "proposed_revision": ""})
        if tag == "moderator":
            return json.dumps({"decision": "revise", "summary": f"Accepted {leak}.", "revised_report": f"REVISED {leak}."})
        if tag == "finalizer":
            if structured:
                return json.dumps({k: f"{leak}." for k in (
                    "summary", "resolved_disagreements", "unresolved_disagreements", "final_differential",
                    "diagnostic_plan", "management_plan", "safety_warnings", "final_second_opinion")} | {"confidence": "low"})
            return f"FINAL {leak}."
        raise AssertionError(f"unexpected tag {tag!r}")


def _request_text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages)  # a re-ask's quoted answer included


@pytest.mark.parametrize("condition", ["free-form", "structured"])
@pytest.mark.parametrize("topology", ["single", "n+1"])
def test_no_request_the_pipeline_sends_holds_a_planted_identifier(condition, topology):
    """Before (issue 23): role assignment and the opinions received the DOI, the case number and
    the names unchanged, and the consolidator read identifiers the workers quoted; then role names
    a model wrote and the answer a re-ask quotes went out as written."""
    extra = {"workers": ["w1", "w2"]} if topology == "n+1" else {}
    for entry in CORPUS:
        case = corpus_case(entry)
        # every answer restates the original case; role names carry a planted identifier
        name_leak = next((p for p in entry["planted"] if p not in strip_identifiers(p, case)), "MGH")  # one that reads as such alone
        provider = FakeProvider(EchoingEndpoint(case.text, name_leak=name_leak))
        with Client(provider, max_concurrency=4, backoff_initial=0.01) as client:
            run = ConsiliumPipeline(client, PipelineSettings()).run_case(
                case, model="m", condition=condition, topology=topology, **extra)
        assert run.stop_reason == "consensus", run.error
        assert {r.tag for r in provider.requests} >= {"synthesis", "vote", "moderator", "finalizer"}
        assert any(m.role == "assistant" for r in provider.requests for m in r.messages)  # a re-ask was sent
        assert all(r.name.startswith(("Cardiology", "Internal Medicine")) for r in run.roles)
        for request in provider.requests:
            text = _request_text(request)
            assert case.case_id not in text and "INVENTED-REFERENCE" not in text and name_leak not in text
            for planted in entry["planted"]:
                assert planted not in text, (entry["case_id"], request.tag, planted)
            for kept in entry["kept"]:
                assert kept in text, (entry["case_id"], request.tag, kept)  # the clinical text arrives whole


def test_a_bench_run_writes_the_per_case_report_and_sends_no_identifier(tmp_path):
    entries = CORPUS[:3]  # the quick preset takes 3 cases
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text("".join(json.dumps({
        "doi": e["case_id"] if e["case_id"].startswith("10.") else f"10.9999/{e['case_id']}", "title": e["title"],
        "case_text": "\n".join(e["text"]), "answer": "INVENTED-REFERENCE-DIAGNOSIS"}, ensure_ascii=False) + "\n"
        for e in entries), encoding="utf-8")
    config = make_config(tmp_path, cases_file, conditions=("free-form",))
    client, provider = make_client(tmp_path, EchoingEndpoint("Dr. Ibáñez-Ruiz at MGH on March 3rd, 2029 (Case 12-2029)"))
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    assert result.n_ok == len(entries)
    for request in provider.requests:
        text = _request_text(request)
        assert not any(p in text for e in entries for p in e["planted"])
        assert "Ibáñez" not in text and "MGH" not in text and "March 3rd" not in text and "12-2029" not in text

    folder = BenchFolder(result.run_dir)
    report = (folder / folder.DEIDENTIFICATION).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(report)))
    assert [r["kind"] for r in rows[: len(IDENTIFIER_KINDS)]] == list(IDENTIFIER_KINDS)
    assert len(rows) == len(entries) * len(IDENTIFIER_KINDS)
    for entry in entries:
        mine = {r["kind"]: int(r["count"]) for r in rows if r["case_id"].endswith(entry["case_id"].split("/")[-1])}
        assert {k: v for k, v in mine.items() if v} == entry["counts"]
    assert {r["kind"] for r in rows} == set(IDENTIFIER_KINDS) and all(r["count"].isdigit() for r in rows)
    assert set(rows[0]) == {"case_id", "kind", "count"}  # kinds and counts, never an identifier found in the text


def test_report_csv_has_a_row_per_case_and_kind():
    cases = [corpus_case(e) for e in CORPUS[:2]]
    rows = list(csv.reader(io.StringIO(deidentification_csv(cases))))
    assert rows[0] == ["case_id", "kind", "count"] and len(rows) == 1 + 2 * len(IDENTIFIER_KINDS)
    assert all(r[2].isdigit() for r in rows[1:])


# -- what a new user found (issue 23 check): invented hospitals, titles and case numbers ---------------


@pytest.mark.parametrize("text, expected", [
    ("He was sent to Saint Elowen Memorial Hospital (SEMH). SEMH's team and SEMH agreed.",
     "He was sent to a hospital. The hospital's team and the hospital agreed."),
    ("Northgate University Medical Center (NUMC) referred her; at NUMC a biopsy was done.",
     "A hospital referred her; at the hospital a biopsy was done."),
    ("Seen at Hôpital Européen Georges-Pompidou (HEGP). The HEGP team agreed.",
     "Seen at a hospital. The hospital team agreed."),
    ("She studied at Wexford College of Medicine (WCM); WCM awarded her.",
     "She studied at a university; the university awarded her."),
    # letters that do not spell the name are clinical, not an abbreviation of it
    ("Then Riverside Community Hospital (ICU) sent him to the ICU.", "Then a hospital (ICU) sent him to the ICU."),
    ("Saint Elowen Memorial Hospital (MRI) and MRI of the head.", "A hospital (MRI) and MRI of the head."),
])
def test_an_abbreviation_introduced_after_a_hospital_goes_with_it_and_later(text, expected):
    """Before: only the known list (MGH, BIDMC ...) was caught: "a hospital (SEMH)" and every later
    bare "SEMH" stayed."""
    assert strip_identifiers(text, PLAIN) == expected


def test_an_abbreviation_introduced_in_the_case_text_goes_from_a_later_opinion_and_is_counted():
    case = Case(case_id="invented-0002", title="", text="She was seen at Saint Elowen Memorial Hospital (SEMH).")
    assert deidentify(case.text, case).counts["institution"] == 2  # the name and its abbreviation
    out = deidentify("Transfer her back to SEMH for follow-up.", case)
    assert out.text == "Transfer her back to the hospital for follow-up."
    assert out.counts["institution"] == 1


@pytest.mark.parametrize("text, expected", [
    ("Stanford Health Care sent the slides.", "A hospital sent the slides."),
    ("She was treated at Hôpital Européen Georges-Pompidou in Paris.", "She was treated at a hospital in Paris."),
    ("He was admitted to Hospital Universitario La Paz.", "He was admitted to a hospital."),
    ("Biopsy at Klinikum Großhadern, then Universitätsklinikum Hamburg-Eppendorf.", "Biopsy at a hospital, then a hospital."),
    ("She came from Ospedale San Raffaele with fever.", "She came from a hospital with fever."),
    ("Centre Hospitalier Universitaire de Bordeaux sent her.", "A hospital sent her."),
])
def test_institutions_named_in_other_words_and_languages_go(text, expected):
    assert strip_identifiers(text, PLAIN) == expected


@pytest.mark.parametrize("text", [
    "She needed Home Health Care after discharge.", "On Hospital Day 2 the fever resolved.",
    "The Hospital Anxiety and Depression Scale score was 12.", "She was seen in the Infectious Diseases Clinic.",
])
def test_wording_near_the_new_institution_rules_is_kept(text):
    assert strip_identifiers(text, PLAIN) == text


@pytest.mark.parametrize("text, expected", [
    ("Dr. med. Hans-Jürgen Müller examined her.", "A physician examined her."),
    ("Dr. med. dent. Lena Vogt examined her teeth.", "A physician examined her teeth."),
    ("Priv.-Doz. Dr. Jörg Weiß reviewed the slides; Weiß agreed.", "A physician reviewed the slides; a physician agreed."),
    ("Univ.-Prof. Dr. med. Anna Kühn agreed.", "A physician agreed."),
    ("Prof. Dr. Emil Brandt-Ohlsen (Pathology): The biopsy showed granulomas.",
     "Physician (Pathology): The biopsy showed granulomas."),
])
def test_german_academic_titles_go_with_the_name(text, expected):
    """Before: "Dr. med. Hans-Jürgen Müller" survived whole."""
    assert strip_identifiers(text, PLAIN) == expected


@pytest.mark.parametrize("text, expected", [
    ("J. Smith, RN, examined her.", "A clinician examined her."),
    ("Maria Olsen, N.P., and Dr. Chen agreed; Olsen wrote the note.",
     "A clinician and a physician agreed; a clinician wrote the note."),
    ("Aled Price, P.A. (Surgery): The wound was clean.", "Clinician (Surgery): The wound was clean."),
    ("Jane O'Neil, M.D., R.N., agreed.", "A physician agreed."),  # a physician's degree decides
])
def test_a_nurse_or_assistant_is_a_clinician_not_a_physician(text, expected):
    """Before: "J. Smith, RN" became "a physician"."""
    assert strip_identifiers(text, PLAIN) == expected


TITLED = "A 34-Year-Old Woman with Progressive Dyspnea"


@pytest.mark.parametrize("title, first_line", [
    (f"Case No. 15 of 2031: {TITLED}", f"Case No. 15 of 2031: {TITLED}"),
    (f"Case No. 15 of 2031: {TITLED}", TITLED),  # the title has the prefix, the text line not
    (TITLED, f"Case 15-2031: {TITLED}"),  # and the other way round
    (f"Case 15–2031. {TITLED}", f"CASE 15-2031 — {TITLED}"),
    (f"Case 15-2031: {TITLED}", f"Case No. 15 of 2031: {TITLED}"),
])
def test_a_title_line_goes_whatever_case_number_prefix_either_side_carries(title, first_line):
    """Before: a title field starting "Case No. 15 of 2031:" no longer equalled its line once the
    line's case number was gone, and the title line reached every stage."""
    case = Case(case_id="invented-0003", title=title, text="t")
    out = deidentify(f"{first_line}\nA 34-year-old woman had progressive dyspnea.", case)
    assert out.text == "A 34-year-old woman had progressive dyspnea."
    assert out.counts["title"] == 1


@pytest.mark.parametrize("title, text, expected", [
    ("", "A similar presentation was described in Case 22–2029 of this series.",
     "A similar presentation was described in a case of this series."),
    ("Case 12-2029: A Man with Fever and Rash", "As in Case 12-2029, he had fever; unlike Case 3-2027, no rash.",
     "As in this case, he had fever; unlike a case, no rash."),
    ("Case No. 12 of 2029: A Man with Fever and Rash", "The Case 12–2029 discussion was long.",
     "This case discussion was long."),
    ("", "The Case 12-2019 discussion was long.", "A case discussion was long."),
])
def test_a_case_number_in_a_sentence_is_this_case_only_when_it_is_the_cases_own(title, text, expected):
    """Before: every case number a sentence ran through read "this case", also another case's
    ("described in Case 22-2029 of this series" -> "described in this case of this series")."""
    case = Case(case_id="invented-0004", title=title, text="t")
    out = deidentify(text, case)
    assert out.text == expected
    assert out.counts["case_number"] == text.count("Case ")
