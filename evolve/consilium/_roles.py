"""Harmonising the role labels models write ("Cardiologist", "cardiology consultant") into
specialty categories, for counting panels by specialty (Table 4, the role table)."""

from __future__ import annotations

import re

__all__ = ["harmonise_role"]

_TITLE_WORDS = frozenset({
    "consultant", "specialist", "specialists", "physician", "physicians", "doctor", "dr", "md",
    "attending", "senior", "junior", "expert", "clinician", "lead", "chief", "registrar",
    "resident", "fellow", "team", "service",
})
_EDGE_WORDS = frozenset({"in", "of", "for", "the", "and"})
_WORDS = {  # single words: person -> specialty, and British -> American spelling
    "internist": "internal medicine", "hospitalist": "internal medicine", "intensivist": "critical care",
    "anaesthetist": "anesthesiology", "anesthetist": "anesthesiology", "surgeon": "surgery",
    "neurosurgeon": "neurosurgery", "obstetrician": "obstetrics", "geneticist": "genetics",
    "pharmacist": "pharmacy", "dietitian": "nutrition", "dietician": "nutrition", "nutritionist": "nutrition",
    "physiotherapist": "physiotherapy", "haematology": "hematology", "haematological": "hematological",
    "paediatrics": "pediatrics", "paediatric": "pediatric", "anaesthesiology": "anesthesiology",
    "anaesthesia": "anesthesia", "gynaecology": "gynecology", "orthopaedics": "orthopedics",
    "orthopaedic": "orthopedic", "oesophageal": "esophageal", "tumour": "tumor",
}
_SYNONYMS = {  # whole normalised labels -> category
    "infectious diseases": "infectious disease", "infectiology": "infectious disease", "id": "infectious disease",
    "infection": "infectious disease", "infectious disease medicine": "infectious disease",
    "ent": "otorhinolaryngology", "otolaryngology": "otorhinolaryngology", "ear nose and throat": "otorhinolaryngology",
    "ent surgery": "otorhinolaryngology", "ob gyn": "obstetrics and gynecology",
    "ob and gyn": "obstetrics and gynecology", "obgyn": "obstetrics and gynecology", "obstetrics": "obstetrics and gynecology",
    "gynecology": "obstetrics and gynecology", "obstetrics gynecology": "obstetrics and gynecology",
    "emergency": "emergency medicine", "emergency department": "emergency medicine",
    "intensive care": "critical care", "intensive care medicine": "critical care", "icu": "critical care",
    "critical care medicine": "critical care",
    "general practice": "family medicine", "general practitioner": "family medicine", "gp": "family medicine",
    "family": "family medicine", "primary care": "family medicine",
    "internal": "internal medicine", "general internal medicine": "internal medicine", "general medicine": "internal medicine",
    "pulmonary medicine": "pulmonology", "respiratory medicine": "pulmonology", "pneumology": "pulmonology",
    "respirology": "pulmonology", "pulmonary": "pulmonology", "respiratory": "pulmonology",
    "hematology oncology": "hematology and oncology",
    "orthopedic surgery": "orthopedics", "orthopedic": "orthopedics", "anesthesia": "anesthesiology",
    "surgery": "general surgery", "genetics": "medical genetics", "clinical genetics": "medical genetics",
    "pharmacy": "clinical pharmacology", "clinical pharmacy": "clinical pharmacology", "pharmacology": "clinical pharmacology",
    "renal medicine": "nephrology", "renal": "nephrology",
}


def harmonise_role(label: str) -> str:
    """Map an exact, model-written role label to a specialty category (lexical, deliberately small).

    Steps, in order: lowercase; drop parenthesised qualifiers; ``&`` and ``/`` become "and",
    other punctuation a space; drop title words (consultant, specialist, physician, doctor,
    attending, senior, expert ...) and a leading or trailing "in"/"of"/"for"/"the"/"and"; map
    person forms to the specialty word by word (``-ologist`` -> ``-ology``, ``-iatrist`` ->
    ``-iatry``, ``-iatrician`` -> ``-iatrics``, plus a few explicit words such as internist ->
    internal medicine, surgeon -> surgery) and British to American spelling; finally a small
    synonym table on the whole label (ENT -> otorhinolaryngology, intensive care -> critical
    care, ID -> infectious disease ...). A label the rules leave empty keeps its lowercased form.
    Subspecialties stay their own category (interventional cardiology is not cardiology), so
    the collapse is conservative and never a clinical judgement.

    Examples: "Cardiologist", "cardiology", "Cardiology consultant" -> "cardiology";
    "Infectious Diseases Specialist" -> "infectious disease"; "Paediatrician" -> "pediatrics".
    """
    text = re.sub(r"\([^)]*\)", " ", label.lower())
    text = text.replace("&", " and ").replace("/", " and ")
    raw = " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())
    words = [w for w in raw.split() if w not in _TITLE_WORDS]
    while words and words[0] in _EDGE_WORDS:
        words.pop(0)
    while words and words[-1] in _EDGE_WORDS:
        words.pop()
    out = []
    for w in words:
        w = _WORDS.get(w, w)
        w = re.sub(r"ologist$", "ology", w)
        w = re.sub(r"iatrist$", "iatry", w)
        w = re.sub(r"iatrician$", "iatrics", w)
        out.append(_WORDS.get(w, w))
    name = " ".join(" ".join(out).split())
    if not name:
        return raw or label.strip().lower()
    return _SYNONYMS.get(name, name)
