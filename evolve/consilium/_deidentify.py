"""Removing what identifies a published case - and only that - before any generating model sees it.

A case record (NEJM's case records, for instance) can be traced back to its publication, and so
to its published diagnosis, through its DOI or web address, its manuscript id, its case-record
number ("Case 12-2019", "Case No. 12", "Case 12 of 2019"), a journal citation ("N Engl J Med
2019;380:1150-7"), its title line, the dates it carries, the names of the physicians who present
it and of the hospitals where it was seen. :func:`strip_identifiers` takes those out and keeps
the clinical content: ages, sexes, symptoms, findings, durations ("3 weeks before"), the services
that speak ("Medicine", "Radiology"), this hospital or "the emergency department" - also when a
sentence repeats words of the title, which for case records is itself a clinical summary.

**Which stages see what.** Every generating stage (role assignment, its ``n+1`` workers and
consolidator, every opinion, worker and consolidation, the synthesis, the votes, the moderator,
the finalizer) sees the same case: the case *text* after :func:`strip_identifiers`, never the
case id, the title or the reference answer (:func:`~evolve.consilium._prompts.case_block`). Text
a model wrote earlier and a later stage reads (panel proposals, opinions, reports, reviews,
moderator summaries) goes through the same function before it is shown, so an identifier a model
recalls cannot travel on. What is *recorded* (the CaseRun, the ConsiliumRecord) keeps the
model's words as written. The consilium paper lists "DOI, title, case text" as the pre-consilium input;
giving it the DOI would let a model recall the published answer and carry identifiers into the
consilium (consilium paper, interactive consilium), so no stage gets it.

**What replaces what.** Removed outright, together with what only introduced them ("see",
"available at", "doi:", a parenthesis left empty, a clause left with nothing else): DOIs, web
addresses, e-mail addresses, manuscript ids, the case id, journal citations and the case-record
series name, case-record numbers heading a line or standing in a parenthesis or list,
medical-record numbers, title lines (also when the title field and the line differ by a case-number
prefix: "Case No. 15 of 2031: A ..." against "A ..." or "Case 15-2031: A ..."). Replaced by a
neutral phrase so the sentence still reads: a case-record number a sentence runs through by "this
case" when it is the case's own number - the one opening its title or its text's first line, the
only places that say so - and by "a case" otherwise ("described in Case 22-2029 of this series"
names another case of the series: "described in a case of this series"); a date by ``[date]`` (a
range by one ``[date]``); a titled or degreed person by "a physician" (titles in chains and German
academic titles included: "Univ.-Prof. Dr. med.", "Priv.-Doz.", "Dr. med. dent."; a speaker label
``Dr. Jane Smith (Medicine):`` by ``Physician (Medicine):``) - by "a clinician" (``Clinician
(Surgery):``) when the only degrees are a nurse's, physician assistant's or pharmacist's (RN, N.P.,
PA, PharmD) -, "Mr./Mrs./Ms. Doe" by ``[name]``, a later bare mention of a surname seen with a
title by the same phrase; a hospital (by name or known abbreviation: "Massachusetts General
Hospital", "MGH", "Brigham and Women's", "Stanford Health Care"; head first in other languages:
"Hôpital Européen Georges-Pompidou", "Klinikum Großhadern", "Ospedale San Raffaele", "Centre
Hospitalier Universitaire de Bordeaux", "Hospital Universitario La Paz") by "a hospital", a
university or medical school by "a university", a named journal by "a journal". An abbreviation
in parentheses right after such a name goes with it when its letters are, in order, initials of
the name ("Saint Elowen Memorial Hospital (SEMH)"; "(ICU)" or "(MRI)" after a name are clinical
and stay) and is remembered: its later bare mentions, also in a model's text about the case, read
"the hospital" ("SEMH's team" -> "the hospital's team"). A bare year ("in 2015") is kept (as in
HIPAA's safe harbour); so are relative times, ages and eponyms ("Graves' disease").

**Left on purpose.** A clinic named by a place ("Harbourview Clinic"): "Clinic" follows a service
as often as a name ("the Infectious Diseases Clinic", "the Memory Clinic", "the Pain Clinic"), and
telling a place word from a service word would need a list of every service, so only the known
names ("Mayo Clinic", "Cleveland Clinic") go. Generic words before "Hospital" or "Health Care"
("General Hospital", "Home Health Care") name a kind of care, not a place, and stay. Initials in
parentheses after a person are not taken: a parenthesis there is the speaker's service.

**Why rules of our own, not a tool.** Two PII tools were considered (December 2026).
``scrubadub`` 2.0.1 (its last release 2023) was installed and run on an invented record: out
of the box it found only the web address, the e-mail address and the phone number - no date,
name, case number, citation or hospital - and it brings scikit-learn, NLTK and TextBlob with it.
Presidio finds names and dates through a spaCy model, but no spaCy English model is published
on PyPI by spaCy's authors (only third-party re-uploads), and loading one from a hub at run
time is not possible here, so it was not run; moreover the DATE label of OntoNotes-trained
models covers ages and durations ("67-year-old", "3 weeks") by that corpus's guidelines, which
would strip clinical content. Neither knows DOIs, case-record numbers or journal citations. So the classes are written out here as a small, tested rule set
(``tests/consilium/test_deidentify.py`` and the invented corpus in ``tests/consilium/data/``).

**How it works.** Each rule replaces what it finds with a private-use placeholder (no later rule
can match inside it, and nothing is half-replaced: names are matched on Unicode letters, so
"José" or "Núñez-García" are taken whole), counted by kind (:data:`IDENTIFIER_KINDS`); a tidying pass then
drops what only introduced a removed identifier and renders the placeholders.
:func:`deidentify` returns the text and the counts; :func:`deidentification_csv` gives the
per-case report (``deidentification.csv`` of a bench run folder: case, kind, count - never the
identifier itself).
"""

from __future__ import annotations

import csv
import functools
import io
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from evolve.data import Case

__all__ = ["IDENTIFIER_KINDS", "Deidentified", "deidentification_csv", "deidentify", "strip_identifiers"]

IDENTIFIER_KINDS: tuple[str, ...] = (
    "doi", "url", "email", "manuscript_id", "case_id", "citation", "journal", "case_number",
    "record_number", "title", "date", "person", "institution", "phone",
)
"""The kinds of identifier counted, in report order."""


@dataclass(frozen=True)
class Deidentified:
    """What :func:`deidentify` returns.

    Attributes:
        text: The text without identifiers.
        counts: Identifiers replaced, by kind (every kind of :data:`IDENTIFIER_KINDS`, zeros included).
    """

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)


# -- placeholders ---------------------------------------------------------------------------------

_OPEN, _CLOSE = "\ue000", "\ue001"


@dataclass(frozen=True)
class _Slot:
    kind: str
    phrase: str  # "" = removed


_SLOTS: dict[str, _Slot] = {
    "doi": _Slot("doi", ""), "url": _Slot("url", ""), "email": _Slot("email", "[email]"),
    "manuscript_id": _Slot("manuscript_id", ""), "case_id": _Slot("case_id", ""),
    "citation": _Slot("citation", ""), "series": _Slot("journal", ""), "journal": _Slot("journal", "a journal"),
    "case_number": _Slot("case_number", ""), "case_mention": _Slot("case_number", "this case"),
    "record_number": _Slot("record_number", "[record number]"),
    "this_case": _Slot("title", "this case"), "date": _Slot("date", "[date]"), "physician": _Slot("person", "a physician"),
    "physicians": _Slot("person", "physicians"), "speaker": _Slot("person", "Physician"),
    "name": _Slot("person", "[name]"), "hospital": _Slot("institution", "a hospital"),
    "university": _Slot("institution", "a university"), "phone": _Slot("phone", "[phone]"),
    "another_case": _Slot("case_number", "a case"), "clinician": _Slot("person", "a clinician"),
    "clinician_speaker": _Slot("person", "Clinician"), "hospital_again": _Slot("institution", "the hospital"),
    "university_again": _Slot("institution", "the university"),
}
_CODE = {name: chr(0xE010 + k) for k, name in enumerate(_SLOTS)}
_SLOT_OF_CODE = {code: _SLOTS[name] for name, code in _CODE.items()}


def _token(name: str) -> str:
    return f"{_OPEN}{_CODE[name]}{_CLOSE}"


_ANY_TOKEN = f"{_OPEN}[\ue010-\ue0ff]{_CLOSE}"
_REMOVED = f"{_OPEN}[{''.join(_CODE[n] for n, s in _SLOTS.items() if not s.phrase)}]{_CLOSE}"

# -- building blocks --------------------------------------------------------------------------------

_UPPER = "".join(c for c in map(chr, range(0x41, 0x250)) if c.isupper() and c.isalpha())
_U = f"[{_UPPER}]"
_L = r"[^\W\d_]"  # any letter, accents included
_NAME_PART = rf"{_U}(?:['’]{_U})?{_L}+(?:['’]{_L}+)*"
_NAME = rf"{_NAME_PART}(?:-{_NAME_PART})*"  # O'Neil, Núñez-García, McDonald
_INITIAL = rf"{_U}\."
_PARTICLE = r"(?:van|von|der|den|de|del|della|dello|di|da|das|dos|du|la|le|ten|ter|bin|ibn|al|el|Van|Von|De|Del|Di|Da|Du|La|Le)"
_PERSON = rf"(?:(?:{_NAME}|{_INITIAL})\s+){{0,3}}(?:{_PARTICLE}\s+){{0,3}}(?:(?:al|el)-)?{_NAME}"
_DEGREE = (r"(?:M\.D\.|MD|Ph\.D\.|PhD|M\.B\.,?\s?B\.S\.|MBBS|MBChB|D\.Phil\.|DPhil|M\.P\.H\.|MPH|FRCP[A-Z]?"
           r"|R\.N\.|N\.P\.|P\.A\.|D\.O\.|Pharm\.D\.|PharmD)")
_DEGREE_COMMA = r"(?:RN|NP|PA|DO|DNP|MSN)"  # ambiguous letters ("PA and lateral"): only after a comma
_DEGREES = rf"(?:(?:\s*,\s*|\s+){_DEGREE}|\s*,\s*{_DEGREE_COMMA}\b)+"
_ACADEMIC = r"(?:med|dent|vet|phil|habil|rer\.\s?nat|rer\.\s?medic|sc\.\s?hum)\."  # "Dr. med. dent."
_ONE_TITLE = rf"(?:Drs?\.?(?:\s+{_ACADEMIC})*|Doctor|(?:Univ\.-|apl\.\s?)?Prof\.?|Professor|Priv\.-Doz\.|PD(?=\s+Dr))"
_TITLE_DR = rf"(?:{_ONE_TITLE})(?:\s+{_ONE_TITLE})*"  # "Univ.-Prof. Dr. med."
# degrees of clinicians who are not physicians: alone, their holder is "a clinician"
_NON_PHYSICIAN = re.compile(r"R\.N\.|N\.P\.|P\.A\.|Pharm\.D\.|PharmD|\b(?:RN|NP|PA|DNP|MSN)\b")
_PHYSICIAN_DEGREE = re.compile(r"M\.D\.|\bMD\b|M\.B\.|MBBS|MBChB|D\.O\.|\bDO\b|FRCP")
_TITLE_MR = r"(?:Mr|Mrs|Ms|Mx)\.?"

# words that open a sentence and so look like part of a name at its start
_STOPWORDS = frozenset("""
a an the at in on of to from for by with and or but then when while after before during since until as
she he they we it her his their our its this that these those there here both all each
admitted transferred seen referred evaluated treated followed discharged presented returned
monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
""".split())

_EPONYM_NEXT = (r"(?:disease|syndrome|signs?|phenomenon|test|maneuver|manoeuvre|reflex|criteria|palsy|lymphoma|"
                r"sarcoma|tumou?r|ulcers?|nodes?|triad|score|scale|classification|procedure|operation|law|"
                r"stain|cells?|bod(?:y|ies)|nodules?|spots?|lines?|fracture|hernia|aneurysm|anomaly|ratio|index|"
                r"thyroiditis|encephalopathy|encephalitis|contracture|esophagus|diverticulum|node)")

# -- the rules ---------------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"')\]]+[^\s<>\"').,;:\]]", re.IGNORECASE)
_DOI_CORE = r"10\.\d{4,9}/[^\s()<>\"']*[^\s()<>\"'.,;:]"
_DOI = re.compile(r"(?<![\w/])(?:doi\s*:?\s*)?" + _DOI_CORE, re.IGNORECASE)
_MANUSCRIPT_ID = re.compile(r"\bNEJM[a-z]{0,6}\d{6,}\b", re.IGNORECASE)

_JOURNAL_NAMES = (
    r"N(?:ew)?\.?\s?Engl(?:and)?\.?\s?J(?:ournal)?\.?\s?(?:of\s+)?Med(?:icine)?\.?|NEJM|Lancet|JAMA|BMJ|"
    r"Ann\.?\s+Intern\.?\s+Med\.?|Annals\s+of\s+Internal\s+Medicine|Nat\.?\s+Med\.?|Am\.?\s+J\.?\s+Med\.?"
)
_CITATION_TAIL = (r"(?:\s*[,.;]?\s*\(?(?:19|20)\d{2}\)?)?(?:\s*[;,]\s*\d+\s*(?:\(\s*[\w-]+\s*\))?)?"
                  r"(?:\s*[:,]\s*(?:[A-Za-z]?\d+|e\d+)(?:\s*[-–]\s*[A-Za-z]?\d+)?)?")
_CITATION_CORE = r"(?:19|20)\d{2}\s*;\s*\d+\s*(?:\(\s*[\w-]+\s*\))?\s*:\s*[A-Za-z]?\d+(?:\s*[-–]\s*[A-Za-z]?\d+)?"
_NAMED_CITATION = re.compile(rf"\b(?:{_JOURNAL_NAMES})(?=[\s.,;(]|$){_CITATION_TAIL}")
_GENERIC_CITATION = re.compile(rf"(?:\b(?:{_U}[a-z]*\.?\s+){{0,6}})?{_CITATION_CORE}")
_SERIES = re.compile(r"\b(?:the\s+)?Case\s+Records\s+of\s+the\s+Massachusetts\s+General\s+Hospital\b\.?", re.IGNORECASE)

_NUMBER_WORD = r"(?:No\.?|Number|Nr\.?|#)"
_CASE_NUMBER = re.compile(
    rf"\b(?:[Cc]ase|CASE)(?:\s+(?:[Rr]ecords?|[Rr]eport))?\s*(?:{_NUMBER_WORD}\s*)?\d{{1,4}}"
    r"(?:\s*[-–—/]\s*(?:19|20)?\d{2}\b|\s+of\s+(?:19|20)\d{2}\b)(?:[ \t]*:[ \t]*)?"
    rf"|\b(?:Case|CASE)\s*{_NUMBER_WORD}\s*\d{{1,5}}\b(?:[ \t]*:[ \t]*)?"
    r"|\b(?:No|Nr)\.\s*\d{1,5}(?:\s*[-–—/]\s*(?:19|20)?\d{2})?\b"
    r"|\bCase\s+\d{1,4}\b(?!\s*(?:years?|days?|weeks?|months?|hours?|patients?|%))(?:[ \t]*:[ \t]*)?"
)
_RECORD_NUMBER = re.compile(
    r"\b(?:MRN|medical[- ]record\s+(?:number|no\.?)|hospital\s+(?:number|no\.?)|patient\s+(?:ID|number|no\.?))"
    r"\s*[:#]?\s*[A-Z]{0,3}\d[\d-]{3,}\b", re.IGNORECASE)

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
          r"(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?)")
_WEEKDAY = r"(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\.?,?\s+"
_ORD = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?(?![\d.,]\d)"
_DAYS = rf"{_ORD}(?:\s*(?:[-–—]|to|through|and)\s*{_ORD})?"
_YEAR = r"(?:(?:19|20)\d{2}|['’]\d{2})"
_DATES = [
    re.compile(rf"\b(?:{_WEEKDAY})?{_MONTH}\s+{_DAYS}(?:,?\s+{_YEAR})?(?!\w)"),  # March 3rd, 2019; Mar 3-5
    re.compile(rf"\b(?:{_WEEKDAY})?(?:the\s+)?{_DAYS}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?(?!\w)"),  # 3 Mar 2019
    re.compile(rf"\b{_MONTH}(?:\s+of)?,?\s+{_YEAR}(?!\w)"),  # March 2019
    re.compile(r"\b(?:19|20)\d{2}([-/.])(?:0?[1-9]|1[0-2])\1(?:[12]\d|3[01]|0?[1-9])"
               r"(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\d/])"),  # ISO
    re.compile(r"(?<![\d/.])(?:[12]\d|3[01]|0?[1-9])([-/.])(?:[12]\d|3[01]|0?[1-9])\1(?:19|20)\d{2}(?![\d/])"),
    re.compile(r"(?<![\d/.])(?:[12]\d|3[01]|0?[1-9])/(?:[12]\d|3[01]|0?[1-9])/\d{2}(?![\d/])"),  # 3/5/19
    re.compile(r"(?<![\d/.:])(?:0?[1-9]|1[0-2])/(?:19\d{2}|20[0-3]\d)(?![\d/])"),  # 03/2019
    re.compile(r"\b(?:19|20)\d{2}-(?:0[1-9]|1[0-2])(?![\d-])"),  # 2019-03
]
_DATE_RANGE = re.compile(rf"{re.escape(_token('date'))}\s*[-–—]\s*{re.escape(_token('date'))}")

_SPEAKER = re.compile(
    rf"(?m)^([ \t>*_]*)(?:{_TITLE_DR}\s+{_PERSON}(?:{_DEGREES})?|{_PERSON}{_DEGREES})(\s*\([^()\n]{{1,60}}\))?[ \t]*:"
)
_DOCTORS = re.compile(rf"\bDrs\.?\s+{_PERSON}(?:\s*,\s*{_PERSON})*,?\s+and\s+{_PERSON}")
_DOCTOR = re.compile(rf"\b{_TITLE_DR}\s+({_PERSON})(?:{_DEGREES}(?:,(?=\s))?)?")
_WITH_DEGREE = re.compile(rf"\b({_PERSON}){_DEGREES}(?:,(?=\s))?")  # "Jane Doe, M.D., said": both commas go
_MISTER = re.compile(rf"\b{_TITLE_MR}\s+({_PERSON})")

_HOSPITAL_NAMES = (
    r"Massachusetts\s+General\s+Hospital|Mass(?:achusetts)?\s+General(?:\s+Brigham)?|"
    r"Brigham\s+and\s+Women['’]s(?:\s+Faulkner)?(?:\s+Hospital)?|Beth\s+Israel\s+Deaconess(?:\s+Medical\s+Center)?|"
    r"Dana[-–]Farber(?:\s+Cancer\s+Institute)?|Boston\s+Children['’]s(?:\s+Hospital)?|Mayo\s+Clinic|"
    r"Cleveland\s+Clinic|(?:MD|M\.\s?D\.)\s+Anderson(?:\s+Cancer\s+Center)?|Memorial\s+Sloan[-–\s]Kettering"
    r"(?:\s+Cancer\s+Center)?|Mount\s+Sinai(?:\s+Hospital)?|NYU\s+Langone(?:\s+Health)?|Kaiser\s+Permanente|"
    r"Partners\s+HealthCare|Spaulding\s+Rehabilitation(?:\s+Hospital)?|Johns\s+Hopkins(?:\s+Hospital|\s+Medicine)?"
)
_HOSPITAL_ABBREVIATIONS = r"MGH|BWH|BIDMC|DFCI|MGB|MEEI|CHOP|MSKCC|MDACC|UPMC|JHH|OHSU|UTSW"
_UNIVERSITY_NAMES = (r"Harvard(?:\s+Medical\s+School|\s+University)?|University\s+of\s+California,?\s+"
                     r"(?:San\s+Francisco|Los\s+Angeles|San\s+Diego|Davis|Irvine)|UCSF|UCLA|HMS|NYU")
# an abbreviation in parentheses right after a name ("Saint Elowen Memorial Hospital (SEMH)")
_ABBREVIATION = r"(?P<paren>[ \t]*\([ \t]*(?P<abbr>[A-Z]{2,8})[ \t]*\))?"
_KNOWN_HOSPITAL = re.compile(rf"\b(?:{_HOSPITAL_NAMES}|{_HOSPITAL_ABBREVIATIONS})\b{_ABBREVIATION}")
_KNOWN_UNIVERSITY = re.compile(rf"\b(?:{_UNIVERSITY_NAMES})\b{_ABBREVIATION}")
_PLACE_WORD = rf"(?:{_NAME}|St\.|Saint)"
_INSTITUTION_HEAD = (r"Hospitals?|Medical\s+Cent(?:er|re)|Health\s+(?:System|Cent(?:er|re)|Care)|Infirmary|Medical\s+School|"
                     r"School\s+of\s+Medicine|College\s+of\s+Medicine|University|Cancer\s+(?:Center|Centre|Institute)")
_INSTITUTION = re.compile(
    rf"\b(?:{_PLACE_WORD}(?:\s+(?:and|of|for|&)\s+|\s+)){{1,5}}(?:{_INSTITUTION_HEAD})\b"
    rf"(?:\s+(?:of|in|at)\s+{_NAME}(?:\s+{_NAME})?)?{_ABBREVIATION}"
)  # not "Clinic": "the Infectious Diseases Clinic" is a service, and clinical context
_OF_INSTITUTION = re.compile(
    rf"\b(?:(?:Hospital|University|Infirmary)\s+of\s+(?:the\s+)?)+(?:University\s+of\s+)?{_NAME}(?:\s+{_NAME}){{0,2}}"
    rf"{_ABBREVIATION}"
)
# hospitals named head first, in other languages: "Hôpital Européen Georges-Pompidou", "Klinikum
# Großhadern", "Ospedale San Raffaele", "Centre Hospitalier Universitaire de Bordeaux"; the English
# spelling only before a Spanish or Portuguese word ("Hospital Universitario La Paz"), so "Hospital
# Day 2" and "Hospital Anxiety and Depression Scale" stay
_FOREIGN_HEAD = (r"H[ôo]pital|Klinikum|Universitätsklinikum|Uniklinikum|Ospedale|Policlinico|"
                 r"Centre\s+Hospitalier(?:\s+Universitaire|\s+R[ée]gional)?|"
                 r"Hospital(?=\s+(?:Universitari[oa]|General\s+(?:de|del|Universitario)|Cl[ií]nic[oa]?|de|del|do|da|das|dos|"
                 r"San|Santa|Santo|São|Sant|Italiano|Israelita)\b)")
_FOREIGN_PARTICLE = r"(?:de|del|della|di|da|do|das|dos|du|des|la|le|les|y|e|der|rechts\s+der|links\s+der)"
_FOREIGN_INSTITUTION = re.compile(
    rf"\b(?:{_FOREIGN_HEAD})(?:\s+(?:{_FOREIGN_PARTICLE}\s+){{0,2}}{_NAME}){{1,4}}{_ABBREVIATION}")
# capitalized words that name a kind of care, not a place: "Home Health Care", "Community Hospital"
_GENERIC_PLACE_WORDS = frozenset("""
home primary public mental community behavioral behavioural managed acute intensive critical urgent palliative
skilled private general regional county state district city local veterans rural
""".split())
_PHONE = re.compile(r"(?<![\w/.-])(?:\+?1[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[.-]\d{4}(?![\w/])")

_MIN_TITLE_WORDS = 3
_AFTER_NUMBER = r"[ \t:.–—-]*"  # what separates a case number from the title it heads
_TITLE_PREFIX = re.compile(rf"^[ \t#*_]*(?:{_CASE_NUMBER.pattern}){_AFTER_NUMBER}")


class _Marks:
    """Replaces matches by placeholders and counts them by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def sub(self, pattern: re.Pattern[str], slot: str, text: str,
            keep: Callable[[re.Match[str]], tuple[str, str, str] | None] | None = None,
            slot_of: Callable[[re.Match[str]], str] | None = None) -> str:
        """Replace every match of ``pattern`` by the placeholder of ``slot``.

        ``keep`` may split a match into (kept prefix, identifier, kept suffix), or return None
        to leave the match as it is; ``slot_of`` (called first) may choose the slot per match.
        """
        def one(m: re.Match[str]) -> str:
            name = slot_of(m) if slot_of is not None else slot
            head, tail = "", ""
            if keep is not None:
                split = keep(m)
                if split is None:
                    return m.group(0)
                head, _, tail = split
            self.counts[_SLOTS[name].kind] += 1
            return head + _token(name) + tail
        return pattern.sub(one, text)


def deidentify(text: str, case: Case) -> Deidentified:
    """``text`` without what identifies ``case``, and what was replaced (consilium paper, interactive consilium).

    See the module docstring for the classes removed and replaced, and what is kept.

    Args:
        text: Any text a generating model will see (the case text, a prior model's output).
        case: The case whose identifiers (its id, its title) are also removed.

    Returns:
        The stripped text and the count of identifiers replaced per kind.
    """
    marks = _Marks()
    out = marks.sub(_EMAIL, "email", text)
    out = marks.sub(_URL, "url", out)
    out = marks.sub(_DOI, "doi", out)
    out = marks.sub(_MANUSCRIPT_ID, "manuscript_id", out)
    if _is_distinctive(case.case_id):
        case_id = re.compile(r"(?<![\w./\-])" + re.escape(case.case_id) + r"(?![\w/\-])")
        out = marks.sub(case_id, "case_id", out)
    out = marks.sub(_SERIES, "series", out)
    out = _NAMED_CITATION.sub(lambda m: _journal_or_citation(m, marks), out)
    out = marks.sub(_GENERIC_CITATION, "citation", out)
    out = _case_numbers(out, marks, _own_numbers(case.title, case.text))
    out = marks.sub(_RECORD_NUMBER, "record_number", out)
    for pattern in _DATES:
        out = marks.sub(pattern, "date", out)
    out = _DATE_RANGE.sub(_token("date"), out)
    out = _drop_title_lines(out, case.title, marks)
    out = _people(out, marks, dict(_names_in_case(case.text)))
    out = _institutions(out, marks, dict(_abbreviations_in_case(case.text)))
    out = marks.sub(_PHONE, "phone", out)
    counts = {k: marks.counts.get(k, 0) for k in IDENTIFIER_KINDS}
    if not any(counts.values()):
        return Deidentified(text.strip(), counts)  # nothing found: not a character changed
    return Deidentified(_render(_tidy_removed(out)), counts)


def strip_identifiers(text: str, case: Case) -> str:
    """``text`` without what identifies ``case`` (:func:`deidentify`'s text).

    The one function every text a generating model sees goes through (module docstring). A
    pipeline shows the same opinions to many stages, so the answer is remembered per text and
    case.
    """
    return _stripped(text, case)


@functools.lru_cache(maxsize=4096)
def _stripped(text: str, case: Case) -> str:
    return deidentify(text, case).text


def deidentification_csv(cases: Iterable[Case]) -> str:
    """The per-case report of a run: columns ``case_id, kind, count``, one row per case and kind
    of :data:`IDENTIFIER_KINDS` (zeros included), counting what :func:`deidentify` replaced in each case's
    text - never the identifier itself."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["case_id", "kind", "count"])
    for case in cases:
        counts = deidentify(case.text, case).counts
        writer.writerows([case.case_id, kind, counts[kind]] for kind in IDENTIFIER_KINDS)
    return buffer.getvalue()


# -- rules that need more than a pattern ---------------------------------------------------------------


def _case_numbers(text: str, marks: _Marks, own: frozenset[tuple[int, int | None]]) -> str:
    """Case-record numbers: removed where they head a line or stand in a parenthesis or list; where
    a sentence runs through one it reads "this case" when it is the case's own number (``own``)
    and "a case" otherwise ("similar to Case 22-2029" names another case of the series)."""
    def one(m: re.Match[str]) -> str:
        before = m.string[:m.start()].rsplit("\n", 1)[-1].rstrip()
        in_sentence = bool(before) and before[-1].isalpha() and not m.group(0).rstrip().endswith(":")
        marks.counts["case_number"] += 1
        if not in_sentence:
            return _token("case_number")
        return _token("case_mention" if _is_own(_number_of(m.group(0)), own) else "another_case")
    return _CASE_NUMBER.sub(one, text)


def _number_of(mention: str) -> tuple[int, int | None]:
    """(number, two-digit year or None) of a case-number mention: "Case No. 12 of 2019" -> (12, 19)."""
    digits = [int(d) for d in re.findall(r"\d+", mention)]
    return digits[0], (digits[1] % 100 if len(digits) > 1 else None)


def _is_own(number: tuple[int, int | None], own: frozenset[tuple[int, int | None]]) -> bool:
    """The same number, and the same year where both give one ("Case No. 12" is "Case 12-2019")."""
    return any(number[0] == n and (number[1] is None or y is None or number[1] == y) for n, y in own)


@functools.lru_cache(maxsize=64)
def _own_numbers(title: str, text: str) -> frozenset[tuple[int, int | None]]:
    """The case's own case-record number(s): one opening its title or its text's first line
    (nothing else says which number is the case's own; a case id such as a DOI carries none)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    found = (re.match(rf"[ \t#*_]*(?:{_CASE_NUMBER.pattern})", head) for head in (title, first))
    return frozenset(_number_of(m.group(0)) for m in found if m is not None)


def _is_distinctive(case_id: str) -> bool:
    """An id worth removing wherever it stands: long enough and with a digit (not "c" or "fever")."""
    return len(case_id) >= 3 and any(ch.isdigit() for ch in case_id)


def _journal_or_citation(m: re.Match[str], marks: _Marks) -> str:
    """A named journal with a year or volume is a citation (removed); alone it is "a journal"."""
    slot = "citation" if re.search(r"\d", m.group(0)) else "journal"
    marks.counts[_SLOTS[slot].kind] += 1
    return _token(slot) + _sentence_stop(m)


def _sentence_stop(m: re.Match[str]) -> str:
    """"." when the match swallowed an abbreviation's full stop that also ends the sentence."""
    return "." if m.group(0).endswith(".") and re.match(r"\s*(?:$|\n|[A-Z(])", m.string[m.end():]) else ""


def _drop_title_lines(text: str, title: str, marks: _Marks) -> str:
    """Remove lines that are the title alone (a heading, optionally ``Title:``-prefixed, or after
    a removed case number); a case-number prefix of the title itself is not compared, so the
    title field and the line may each carry one or not."""
    words = title.split()
    if len(words) < _MIN_TITLE_WORDS:
        return text  # a one- or two-word title ("Fever") is ordinary clinical wording
    words = _TITLE_PREFIX.sub("", title).split() or words  # "Case No. 15 of 2031: A ..." -> "A ..."
    body = r"\s+".join(re.escape(w) for w in words)
    line = re.compile(rf"(?im)^[ \t#*_]*(?:{_ANY_TOKEN}{_AFTER_NUMBER})*(?:title\s*:[ \t*_]*)?{body}[ \t.*_]*(?:\n|$)")
    # the title in its own capitals opening a line, as a heading run into the text ("Title. A man ...")
    heading = re.compile(rf"(?m)^([ \t#*_]*)(?:{_ANY_TOKEN}{_AFTER_NUMBER})*{body}[ \t*_]*(?:[.:]|(?=\n))[ \t]*")

    def drop(m: re.Match[str]) -> str:
        marks.counts["title"] += 1
        return m.group(1) if m.re is heading else ""
    out = heading.sub(drop, line.sub(drop, text))
    if sum(w[:1].isupper() for w in words[1:]) >= 2:  # a title in title case: its verbatim capitals identify it
        verbatim = re.compile(rf"(?<!\w){body}(?!\w)")
        out = marks.sub(verbatim, "this_case", out)
    return out


def _is_eponym(m: re.Match[str]) -> bool:
    return re.match(rf"['’]?s?['’]?\s+{_EPONYM_NEXT}\b", m.string[m.end():]) is not None


@functools.lru_cache(maxsize=64)
def _names_in_case(text: str) -> tuple[tuple[str, str], ...]:
    """The names (given names and surnames, with their placeholder) of the people a case text
    introduces with a title or degree: a later text about the case (an opinion, a review) that
    names them bare loses them too."""
    found: dict[str, str] = {}
    _people(text, _Marks(), found)
    return tuple(found.items())


def _people(text: str, marks: _Marks, names: dict[str, str] | None = None) -> str:
    """Speaker labels, titled and degreed names, then later bare mentions of the names seen.

    Args:
        text: The text.
        marks: Where the replacements are counted.
        names: Names known beforehand (from the case text) -> placeholder; names found here are
            added to it.
    """
    surnames: dict[str, str] = names if names is not None else {}
    slot = {"now": "physician"}  # what a later bare mention of the name being remembered becomes

    def remember(name: str) -> None:
        words = name.replace(".", " ").split()
        for word in words + [part for w in words if "-" in w for part in w.split("-")]:
            if len(word) > 2 and word.lower() not in _STOPWORDS and word[0].isupper():
                surnames.setdefault(word, slot["now"])

    def by_degree(m: re.Match[str]) -> str:
        slot["now"] = _person_slot(m.group(0)[m.end(1) - m.start():])
        return slot["now"]

    def speaker(m: re.Match[str]) -> str:
        person = m.group(0)[len(m.group(1)):m.start(2) - m.start() if m.group(2) else None]
        titled = re.match(rf"\s*{_TITLE_DR}\s", person) is not None
        slot["now"] = "physician" if titled else _person_slot(person)
        names = re.findall(_NAME, re.sub(rf"{_DEGREES}|^\s*{_TITLE_DR}\s+", "", person.rstrip(": \t")))
        if names:
            remember(" ".join(names))
        marks.counts["person"] += 1
        label = "speaker" if slot["now"] == "physician" else "clinician_speaker"
        return f"{m.group(1)}{_token(label)}{m.group(2) or ''}:"

    out = _SPEAKER.sub(speaker, text)
    slot["now"] = "physician"
    out = marks.sub(_DOCTORS, "physicians", out, keep=lambda m: _names_seen(m, remember))
    out = marks.sub(_DOCTOR, "physician", out, keep=lambda m: _person_split(m, remember))
    out = marks.sub(_WITH_DEGREE, "physician", out, keep=lambda m: _person_split(m, remember, trim=True),
                    slot_of=by_degree)
    slot["now"] = "name"  # later bare mentions of "Mr. Doe" are "[name]"
    out = marks.sub(_MISTER, "name", out, keep=lambda m: _person_split(m, remember))
    for surname in sorted(surnames, key=len, reverse=True):
        bare = re.compile(rf"(?<![\w'’-]){re.escape(surname)}(?![\w-])")
        out = marks.sub(bare, surnames[surname], out, keep=lambda m: None if _is_eponym(m) else ("", m.group(0), ""))
    return out


def _person_slot(degrees: str) -> str:
    """"clinician" for a nurse's, physician assistant's or pharmacist's degrees alone (RN, N.P.,
    PA, PharmD), else "physician" (an M.D., D.O. or MBBS among them decides)."""
    if _NON_PHYSICIAN.search(degrees) and not _PHYSICIAN_DEGREE.search(degrees):
        return "clinician"
    return "physician"


def _names_seen(m: re.Match[str], remember: Callable[[str], None]) -> tuple[str, str, str]:
    for name in re.split(r"\s*,\s*|\s+and\s+", re.sub(r"^Drs\.?\s+", "", m.group(0))):
        if name:
            remember(name)
    return "", m.group(0), ""


def _person_split(m: re.Match[str], remember: Callable[[str], None], *, trim: bool = False
                  ) -> tuple[str, str, str] | None:
    """Keep sentence words a name pattern swallowed at its start ("Then Jane O'Neil, M.D.",
    "Echocardiography Rebecca Lindqvist, M.D.": an untitled name is at most two name words, with
    initials and particles), and the full stop of a degree that also ends the sentence."""
    whole, person = m.group(0), m.group(1)
    head = ""
    if trim:
        words = person.split()
        full = [k for k, w in enumerate(words) if not re.fullmatch(rf"{_INITIAL}|{_PARTICLE}", w)]
        start = full[-2] if len(full) >= 2 else 0
        while start < len(words) - 1 and words[start].lower() in _STOPWORDS:
            start += 1
        head = person[: len(person) - len(" ".join(words[start:]))]
        whole, person = whole[len(head):], person[len(head):]
        if not re.match(_U, whole):
            return None
    remember(person)
    return head, whole, _sentence_stop(m)


def _institutions(text: str, marks: _Marks, abbreviations: dict[str, str] | None = None) -> str:
    """Named hospitals and universities (known names and abbreviations first, then the patterns),
    with an abbreviation introduced in parentheses after a name, then its later bare mentions.

    Args:
        text: The text.
        marks: Where the replacements are counted.
        abbreviations: Abbreviations known beforehand (from the case text) -> "hospital" or
            "university"; abbreviations introduced here are added to it.
    """
    found: dict[str, str] = abbreviations if abbreviations is not None else {}
    out = _KNOWN_HOSPITAL.sub(lambda m: _institution(m, marks, found, "hospital"), text)
    out = _KNOWN_UNIVERSITY.sub(lambda m: _institution(m, marks, found, "university"), out)
    out = _FOREIGN_INSTITUTION.sub(lambda m: _institution(m, marks, found, "hospital"), out)
    for pattern in (_OF_INSTITUTION, _INSTITUTION):
        out = pattern.sub(lambda m: _institution(m, marks, found), out)
    # "Massachusetts General Hospital (MGH)": the abbreviation repeats the name
    for slot in ("hospital", "university"):
        t = re.escape(_token(slot))
        out = re.sub(rf"{t}\s*\(\s*{_ANY_TOKEN}\s*\)", _token(slot), out)
    for abbreviation in sorted(found, key=len, reverse=True):  # "SEMH", "SEMH's" -> "the hospital"
        bare = re.compile(rf"(?<![\w-]){re.escape(abbreviation)}(?![\w-])")
        out = marks.sub(bare, f"{found[abbreviation]}_again", out)
    return out


@functools.lru_cache(maxsize=64)
def _abbreviations_in_case(text: str) -> tuple[tuple[str, str], ...]:
    """The institution abbreviations a case text introduces ("... Hospital (SEMH)"): a later text
    about the case (an opinion, a review) that writes "SEMH" bare loses it too."""
    found: dict[str, str] = {}
    _institutions(text, _Marks(), found)
    return tuple(found.items())


def _kind_of(name: str) -> str:
    hospital = r"Hospital|H[ôo]pital|Medical Cent|Health|Infirmary|Clinic|[Kk]linik|Ospedale|Policlinico|Cancer"
    return "hospital" if re.search(hospital, name) else "university"


def _institution(m: re.Match[str], marks: _Marks, found: dict[str, str], kind: str | None = None) -> str:
    """One institution match: its placeholder, and its abbreviation in parentheses taken with it
    (and remembered in ``found``) when the letters spell the name - else "(ICU)" is kept."""
    name_end = m.start("paren") if m.group("paren") else m.end()
    name, paren = m.string[m.start():name_end], m.group("paren") or ""
    split = (("", name) if kind is not None else _named_place(name))
    if split is None:
        return m.group(0)
    head, rest = split
    kind = kind or _kind_of(rest)
    marks.counts["institution"] += 1
    if paren and _spells(m.group("abbr"), rest):
        marks.counts["institution"] += 1
        found.setdefault(m.group("abbr"), kind)
        paren = ""
    return head + _token(kind) + paren


def _spells(abbreviation: str, name: str) -> bool:
    """Whether ``abbreviation``'s letters are, in order, initials of ``name``'s words, the first
    one first ("SEMH" of "Saint Elowen Memorial Hospital", "HEGP" of "Hôpital Européen
    Georges-Pompidou", "BWH" of "Brigham and Women's Hospital"); a clinical "(ICU)" or "(MRI)" is not."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    initials = [w[0].upper() for w in re.split(r"[\s-]+", plain) if w[:1].isalpha()]
    if not initials or abbreviation[0] != initials[0]:
        return False
    rest = iter(initials)
    return all(letter in rest for letter in abbreviation)


def _named_place(name: str) -> tuple[str, str] | None:
    """Keep leading sentence words ("Then", "She", "At") a place pattern swallowed; None when no
    name word is left before the institution word ("On Hospital Day 2") or only words naming a
    kind of care are ("Home Health Care")."""
    words = name.split(" ")
    head = ""
    while len(words) > 1 and words[0].lower() in _STOPWORDS:
        head += words.pop(0) + " "
    rest = " ".join(words)
    if re.match(rf"(?:{_INSTITUTION_HEAD})\b", rest) and not re.match(r"(?:Hospital|University|Infirmary)\s+of\s", rest):
        return None
    before_head = re.split(rf"\s(?:{_INSTITUTION_HEAD})\b", rest, maxsplit=1)[0].split()
    if re.match(rf"(?:{_INSTITUTION_HEAD})\s", " ".join(words[len(before_head):]) + " ") and all(
            w.lower() in _GENERIC_PLACE_WORDS for w in before_head):
        return None
    return head, rest


# -- tidying --------------------------------------------------------------------------------------------

_FILLER = (r"(?:see|also|at|in|from|via|on|online|available|doi|ref|refs|reference|references|cf|e\.g|manuscript|"
           r"case|record|published|and|or|the|no|pp|p|vol|for|more|full|text|article|details|images?|figures?|videos?|"
           r"supplementary|appendix|material|information|here)")
_LEAD_IN = r"(?:see|at|from|in|of|via|online|under|doi|published|reported|case|record|no\.?)"


def _tidy_removed(text: str) -> str:
    """Drop what only introduced a removed identifier, then the removed placeholders themselves."""
    r = _REMOVED
    out = re.sub(rf"{r}(?:\s*(?:,|;|and|or|&)\s*{r})+", lambda m: m.group(0)[:3], text)  # "X and Y" -> one
    group = rf"[ \t]*[(\[]\s*(?:(?:{r}|\b{_FILLER}\b\.?|[,;:.])\s*)*{r}(?:\s*(?:{r}|\b{_FILLER}\b\.?|[,;:.]))*\s*[)\]]"
    out = re.sub(group, "", out, flags=re.IGNORECASE)
    # "in R and in a journal" -> "in a journal"; "X and R" -> "X"
    out = re.sub(rf"(?:\b{_LEAD_IN}\b\s*:?\s*)*{r},?\s+(?:and|or)\s+(?!{r})", "", out, flags=re.IGNORECASE)
    out = re.sub(rf"(?<=\w),?\s+(?:and|or)\s+(?:\b{_LEAD_IN}\b\s*:?\s*)*({r})", r"\1", out, flags=re.IGNORECASE)
    out = re.sub(rf"(?:\b{_LEAD_IN}\b\s*:?\s*)+({r})(?:\s+(?:online|here|below)\b)?(?=\s*(?:[.;,)\n]|$))", r"\1", out,
                 flags=re.IGNORECASE)
    out = "\n".join(_drop_empty_clauses(line) for line in out.split("\n"))
    out = re.sub(r, "", out)
    return out


def _drop_empty_clauses(line: str) -> str:
    """Remove the clauses of a line left with nothing but removed identifiers and filler words."""
    parts = re.split(r"(?<=[.;!?])(\s+)", line)
    kept: list[str] = []
    for part in parts:
        if re.search(_REMOVED, part):
            rest = re.sub(rf"{_REMOVED}|\b{_FILLER}\b\.?|[\s,;:.!?()\[\]*_#>\-–—]", "", part, flags=re.IGNORECASE)
            if not rest:
                continue
        kept.append(part)
    out = "".join(kept)
    if line.strip() and not out.strip():
        return ""
    return out


def _render(text: str) -> str:
    """Placeholders to phrases ("a hospital", "[date]"), articles and capitals fixed, spaces tidied."""
    def phrase(m: re.Match[str]) -> str:
        the, code = m.group(1), m.group(2)
        slot = _SLOT_OF_CODE[code]
        words = slot.phrase
        start = m.start() == 0 or re.search(r"(?:^|[.!?]\s+|\n[ \t>*_#]*)$", m.string[:m.start()]) is not None
        if (the and the[0] == "T") or (start and not the):
            words = words[:1].upper() + words[1:]
        if slot.kind not in ("institution", "journal") and the and not slot.phrase.startswith(("this ", "a ")):
            words = the + words
        return words

    out = re.sub(rf"(\b[Tt]he\s+)?{_OPEN}([\ue010-\ue0ff]){_CLOSE}", phrase, text)
    return _tidy(out)


def _tidy(text: str) -> str:
    out = re.sub(r"[ \t]{2,}", " ", text)
    out = re.sub(r"[ \t]+([.,;:)\]])", r"\1", out)
    out = re.sub(r"([(\[])[ \t]+", r"\1", out)
    out = re.sub(r"\(\s*[,;:.]*\s*\)|\[\s*[,;:.]*\s*\]", "", out)
    out = re.sub(r"(?m)^([ \t>*_#]*)[.,;:]+[ \t]*", r"\1", out)
    out = re.sub(r"[,;:]+([.;])", r"\1", out)
    out = re.sub(r"([.;,])\1+", r"\1", out)
    out = re.sub(r"[ \t]{2,}", " ", out)
    out = re.sub(r"[ \t]+\n", "\n", out)
    out = re.sub(r"\n{3,}", "\n\n", out)
    return out.strip()
