"""De-identification keeps the clinical content of a case record and removes what traces it back
to its publication (issue 13, item 6). The case text below is INVENTED in the style of a
published case record; no real case, physician or patient."""

from __future__ import annotations

from evolve.consilium import strip_identifiers
from evolve.data import Case

TITLE = "A 67-Year-Old Woman with Fever, Rash, and Acute Kidney Injury"
CASE = Case(case_id="10.1056/NEJMcpc2099999", title=TITLE, text="t")
RECORD = f"""Case 14-2031: {TITLE}
Presentation of Case
Dr. Maria L. Okafor (Medicine): A 67-year-old woman was evaluated at this hospital because of fever, rash, and acute kidney injury.
The patient had been well until 3 weeks before this presentation, when a pruritic rash developed on her trunk.
She was seen at Riverside Community Hospital in Portland, where allopurinol was stopped.
Dr. Okafor: On examination, the temperature was 38.7°C and the creatinine level 3.1 mg/dl (reference range, 0.6 to 1.0).
Jonathan Reyes, M.D. (Radiology): Computed tomography (CT) of the abdomen showed bilateral enlarged kidneys.
She was referred to the Infectious Diseases Clinic; Dr. Chen reviewed the biopsy with colleagues at Harvard Medical School.
Images are available at https://www.nejm.org/doi/full/10.1056/NEJMcpc2099999 (manuscript NEJMcpc2099999)."""


def test_identifiers_go():
    out = strip_identifiers(RECORD, CASE)
    for gone in ("Okafor", "Maria", "Reyes", "Jonathan", "Chen", "Riverside", "Portland", "Harvard", "14-2031",
                 "NEJMcpc", "nejm.org", "https", "10.1056"):
        assert gone not in out, gone
    assert TITLE not in out  # the heading line


def test_clinical_content_stays():
    out = strip_identifiers(RECORD, CASE)
    for kept in ("Physician (Medicine): A 67-year-old woman was evaluated at this hospital because of fever, rash, "
                 "and acute kidney injury.",  # the title's words inside a sentence are clinical content
                 "a pruritic rash developed on her trunk", "She was seen at a hospital, where allopurinol was stopped.",
                 "Physician: On examination, the temperature was 38.7°C and the creatinine level 3.1 mg/dl",
                 "Physician (Radiology): Computed tomography (CT) of the abdomen showed bilateral enlarged kidneys.",
                 "the Infectious Diseases Clinic", "a physician reviewed the biopsy with colleagues at a university.",
                 "Presentation of Case"):
        assert kept in out, kept


def test_a_model_restating_the_title_keeps_its_words():
    """Before: the title was deleted wherever it appeared, so an opinion that restated the
    presentation lost it before the consilium read it."""
    opinion = "A 67-year-old woman with fever, rash, and acute kidney injury after allopurinol most likely has DRESS."
    assert strip_identifiers(opinion, CASE) == opinion


def test_bare_ids_and_dois_in_addresses_go():
    text = "See NEJMcpc2099999 and https://doi.org/10.1056/NEJMcpc2099999; also www.example.org/case?id=7."
    assert strip_identifiers(text, CASE) == "See and; also."
