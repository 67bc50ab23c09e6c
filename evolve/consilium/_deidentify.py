"""Removing what identifies a published case - and only that - before the consilium sees it.

A case record (NEJM's case records, for instance) can be traced back to its publication, and
so to its diagnosis, through its DOI, its manuscript id, its case-record number, its title line,
the names of the physicians who present it and the hospital where it was seen. Those go. Its
clinical content stays: ages, sexes, symptoms, findings, the services that speak ("Medicine",
"Radiology") - even when a sentence of the text or of a model's opinion repeats words of the
title, which for case records is itself a clinical summary.
"""

from __future__ import annotations

import re

from evolve.data import Case

__all__ = ["strip_identifiers"]

_DOI_CORE = r"10\.\d{4,9}/[^\s()<>\"']*[^\s()<>\"'.,;:]"
_DOI_PREFIX = r"(?:(?:https?://)?(?:dx\.)?doi\.org/|doi\s*:?\s*)?"
_DOI_IN_PARENS = re.compile(r"[ \t]*\(\s*" + _DOI_PREFIX + _DOI_CORE + r"\s*\)", re.IGNORECASE)
_DOI = re.compile(r"(?<![\w/])" + _DOI_PREFIX + _DOI_CORE, re.IGNORECASE)
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"')\]]+[^\s<>\"').,;:\]]", re.IGNORECASE)
_MANUSCRIPT_ID = re.compile(r"\bNEJM[a-z]{0,6}\d{6,}\b", re.IGNORECASE)
_RECORD_NUMBER = re.compile(r"\bCase\s+\d{1,3}-(?:19|20)\d{2}\b[ \t]*:?[ \t]*", re.IGNORECASE)

_NAME = r"[A-Z][a-zA-Z'\-]+"
_FULL_NAME = rf"{_NAME}(?:\s+[A-Z]\.)*(?:\s+{_NAME}){{0,2}}"
_DEGREES = r"(?:,?\s*(?:M\.?D\.?|Ph\.?D\.?|M\.?B\.?,?\s*B\.?S\.?|D\.?O\.?|R\.?N\.?|M\.?P\.?H\.?|N\.?P\.?|P\.?A\.?))+"
_SERVICE = r"(\s*\([^()\n]{1,60}\))?"
# "Dr. Jane Q. Smith (Medicine):" or "Jane Smith, M.D. (Pathology):" opening a line: a speaker
_SPEAKER = re.compile(rf"(?m)^([ \t>*_]*)(?:Drs?\.?\s+{_FULL_NAME}|{_FULL_NAME}{_DEGREES}){_SERVICE}[ \t]*:")
_DOCTOR = re.compile(rf"\bDrs?\.?\s+{_FULL_NAME}")
_WITH_DEGREE = re.compile(rf"\b{_FULL_NAME}{_DEGREES}")
_INSTITUTION = re.compile(
    rf"\b(?:the\s+)?(?:{_NAME}(?:\s+(?:and|of|&|for)\s+|\s+)){{1,5}}"
    r"(?:Hospital|Medical Center|Medical Centre|Health System|Health Center|Infirmary|Medical School|"
    r"School of Medicine|University)\b"
    rf"(?:\s+(?:of|in|at)\s+{_NAME}(?:\s+{_NAME})?)?"
)  # not "Clinic": "the Infectious Diseases Clinic" is a service, and clinical context
_MIN_TITLE_WORDS = 3


def strip_identifiers(text: str, case: Case) -> str:
    """``text`` without what identifies ``case`` (SPEC §5.3: the consilium sees no identifiers).

    Removes: DOI-like strings (with a ``doi:`` or ``https://doi.org/`` prefix; a parenthesised
    one with its parentheses) and any web address; publisher manuscript ids (``NEJMcpc1503831``)
    and the case id wherever it stands as a token; case-record numbers (``Case 12-2015``); a line
    that is the title and nothing else (a heading, optionally ``Title:``). Replaces physicians'
    names: a speaker label ``Dr. Jane Smith (Medicine):`` becomes ``Physician (Medicine):``, a
    mention ``Dr. Smith`` or ``Jane Smith, M.D.`` becomes ``a physician``; named institutions
    (``Massachusetts General Hospital``, ``Harvard Medical School``) become ``a hospital`` or
    ``a university`` (a named clinic is left: "the Infectious Diseases Clinic" is a service).
    Words of the title inside sentences are clinical content and are kept, as is everything
    else; what the removals leave behind is tidied (spaces, stray punctuation), line breaks kept.

    Args:
        text: Any text shown to the consilium (the case, opinions, reports, reviews).
        case: The case whose identifiers are removed.

    Returns:
        The stripped text.
    """
    out = _DOI_IN_PARENS.sub("", text)
    out = _DOI.sub("", out)
    out = _URL.sub("", out)
    out = _MANUSCRIPT_ID.sub("", out)
    if case.case_id:
        out = re.sub(r"(?<![\w./\-])" + re.escape(case.case_id) + r"(?![\w/\-])[ \t]*", "", out)
    out = _RECORD_NUMBER.sub("", out)
    out = _drop_title_lines(out, case.title)
    out = _SPEAKER.sub(lambda m: f"{m.group(1)}Physician{m.group(2) or ''}:", out)
    out = _DOCTOR.sub("a physician", out)
    out = _WITH_DEGREE.sub("a physician", out)
    out = _INSTITUTION.sub(_institution, out)
    return _tidy(out)


def _drop_title_lines(text: str, title: str) -> str:
    """Remove lines that are the title alone (as a heading, optionally ``Title:``-prefixed)."""
    words = title.split()
    if len(words) < _MIN_TITLE_WORDS:
        return text  # a one- or two-word title ("Fever") is ordinary clinical wording
    body = r"\s+".join(re.escape(w) for w in words)
    return re.sub(rf"(?im)^[ \t#*_]*(?:title\s*:\s*)?{body}[ \t.*_]*(?:\n|$)", "", text)


def _institution(match: re.Match[str]) -> str:
    name = match.group(0)
    if re.search(r"Hospital|Medical Cent|Health|Infirmary", name):
        return "a hospital"
    return "a university"


def _tidy(text: str) -> str:
    out = re.sub(r"[ \t]{2,}", " ", text)
    out = re.sub(r"[ \t]+([.,;:])(?=\s|$)", r"\1", out)
    out = re.sub(r"(?m)^[ \t]*[.,;:]+[ \t]*", "", out)
    out = re.sub(r"[,;:]+\.", ".", out)
    out = re.sub(r"\(\s*\)", "", out)
    out = re.sub(r"[ \t]+\n", "\n", out)
    return out.strip()
