"""Regenerate the synthetic physician-workbook example (cases, consilium records, workbooks).

Everything written here is invented for software tests: the cases, DOIs (``10.0000/...``),
role texts, reports, scores and comments describe no real patient and give no medical advice.

Usage (from the repository root)::

    python ratings/example-workbooks/make_example.py            # rewrite this folder
    python ratings/example-workbooks/make_example.py /tmp/ex    # write a copy elsewhere

The output is deterministic: JSON/CSV files are byte-identical on every run, and the .xlsx
files get fixed zip timestamps and document dates (their bytes may still differ between
openpyxl versions; their cell contents do not).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import zipfile
from pathlib import Path

from openpyxl import Workbook, load_workbook

from evolve.data import WORKBOOK_HEADERS, record_file_stem, write_workbook_template

HERE = Path(__file__).resolve().parent
NOTE = "SYNTHETIC CASE, invented for software testing; not a real patient and not medical advice. "
_FIXED_ZIP_TIME = (2024, 1, 1, 0, 0, 0)
_FIXED_DOC_TIME = "2024-01-01T00:00:00Z"

CASES = [
    {
        "doi": "10.0000/synthetic-001",
        "title": "SYNTHETIC: Breathlessness, leg swelling and a rising creatinine",
        "case_text": NOTE + (
            "A 71-year-old man with long-standing hypertension reports three weeks of increasing shortness of "
            "breath on exertion, waking at night short of breath, and swollen ankles. Examination: pulse 104/min "
            "and irregular, blood pressure 150/90 mmHg, raised jugular venous pressure, crackles at both lung "
            "bases, pitting oedema to the knees. Creatinine 168 umol/L (95 umol/L six months ago), potassium "
            "5.4 mmol/L, NT-proBNP markedly raised. ECG: atrial fibrillation. Echocardiography: left ventricular "
            "ejection fraction 30%."
        ),
        "answer": (
            "Invented reference: decompensated heart failure with reduced ejection fraction and new atrial "
            "fibrillation, with worsening kidney function (cardiorenal picture)."
        ),
    },
    {
        "doi": "10.0000/synthetic-002",
        "title": "SYNTHETIC: New confusion and a very low sodium",
        "case_text": NOTE + (
            "A 64-year-old woman is brought in after two days of increasing confusion and one fall. She started "
            "a thiazide diuretic for high blood pressure four weeks ago and has been drinking large amounts of "
            "water during a heat wave. Examination: drowsy but rousable, no focal neurological signs, blood "
            "pressure 132/78 mmHg, no signs of fluid overload or dehydration. Sodium 118 mmol/L, potassium "
            "3.1 mmol/L, plasma osmolality 250 mOsm/kg, urine osmolality 410 mOsm/kg, urine sodium 45 mmol/L. "
            "CT of the head: no acute abnormality."
        ),
        "answer": (
            "Invented reference: severe symptomatic hyponatraemia, most likely caused by the thiazide, needing "
            "careful and limited correction."
        ),
    },
    {
        "doi": "10.0000/synthetic-003",
        "title": "SYNTHETIC: Brief loss of speech and an irregular pulse",
        "case_text": NOTE + (
            "A 58-year-old man had 20 minutes of difficulty finding words and weakness of the right hand this "
            "morning; both resolved completely. He has type 2 diabetes. Examination now: normal neurological "
            "findings, irregularly irregular pulse 88/min, blood pressure 162/94 mmHg. ECG: atrial fibrillation, "
            "not known before. CT of the head: no bleeding, no established infarct. Glucose 7.8 mmol/L."
        ),
        "answer": (
            "Invented reference: transient ischaemic attack, probably embolic from newly found atrial "
            "fibrillation; high early risk of stroke."
        ),
    },
]


def _role(name: str, rationale: str, reasoning: str, opinion: str, primary: bool = False) -> dict:
    return {"name": name, "primary": primary, "rationale": rationale, "reasoning": reasoning, "opinion": opinion}


PANELS = {
    "10.0000/synthetic-001": (
        "Heart, kidney and stroke-prevention questions interact in this case.",
        [
            _role("Cardiologist", "Leads on the failing heart and the new arrhythmia.",
                  "Low ejection fraction, congestion and a fast irregular rhythm point to decompensated heart "
                  "failure, possibly worsened by the arrhythmia. Ischaemia should be looked for.",
                  "Decompensated heart failure with reduced ejection fraction and new atrial fibrillation; "
                  "diurese, control the rate, then start disease-modifying drugs step by step.", primary=True),
            _role("Nephrologist", "Rising creatinine and potassium change diuretic and drug choices.",
                  "Creatinine has risen by about 75% in six months; congestion of the kidneys from heart failure "
                  "is the likeliest cause. Potassium is high-normal to high.",
                  "Cardiorenal worsening; decongest with loop diuretics and watch creatinine and potassium daily."),
            _role("Neurologist", "New atrial fibrillation raises the question of stroke prevention.",
                  "No neurological symptoms are reported. Atrial fibrillation with heart failure, hypertension and "
                  "age over 65 gives a high stroke risk score.",
                  "No neurological disease now; stroke prevention with anticoagulation is indicated once bleeding "
                  "risk is checked."),
        ],
        "Decompensated heart failure with reduced ejection fraction and new atrial fibrillation, with a "
        "cardiorenal fall in kidney function. Plan: loop diuretic with daily weight, creatinine and potassium; "
        "rate control; anticoagulation after a bleeding-risk check; look for ischaemia; add heart-failure drugs "
        "as kidney function and potassium allow. Unresolved: whether the arrhythmia caused the decline.",
    ),
    "10.0000/synthetic-002": (
        "Sodium disorder with brain symptoms and a drug cause in a patient treated for hypertension.",
        [
            _role("Nephrologist", "Leads on the sodium disorder and its correction.",
                  "Low plasma osmolality with concentrated urine and high urine sodium fits a thiazide effect, "
                  "with heavy water intake adding to it. Adrenal and thyroid causes still need excluding.",
                  "Severe symptomatic thiazide-associated hyponatraemia; stop the thiazide, give small hypertonic "
                  "saline boluses, limit the rise to a safe daily maximum.", primary=True),
            _role("Neurologist", "Confusion and a fall need a brain cause excluded.",
                  "Drowsiness without focal signs and a normal CT fit a metabolic encephalopathy from the low "
                  "sodium. Too fast correction risks osmotic demyelination.",
                  "Metabolic encephalopathy from hyponatraemia; neurological checks during correction."),
            _role("Cardiologist", "The blood pressure treatment will have to change.",
                  "Blood pressure is controlled; the thiazide must be stopped for good.",
                  "Replace the thiazide with another antihypertensive once sodium is stable."),
        ],
        "Severe symptomatic hyponatraemia, most likely from the thiazide with high water intake. Plan: stop the "
        "thiazide, hypertonic saline in small boluses with sodium checks every few hours and a cap on the daily "
        "rise, check cortisol and thyroid function, neurological observation, new antihypertensive later.",
    ),
    "10.0000/synthetic-003": (
        "A transient neurological event with a likely heart source.",
        [
            _role("Neurologist", "Leads on the transient neurological event.",
                  "Sudden, fully resolved speech and hand symptoms fit a transient ischaemic attack in the left "
                  "hemisphere. CT excludes bleeding. The new atrial fibrillation is the likeliest source.",
                  "Transient ischaemic attack, probably embolic; urgent vascular imaging and early "
                  "anticoagulation.", primary=True),
            _role("Cardiologist", "Newly found atrial fibrillation as the embolic source.",
                  "New atrial fibrillation with diabetes, hypertension and a recent ischaemic event gives a high "
                  "stroke risk.",
                  "Start anticoagulation soon; echocardiography; control rate and blood pressure."),
        ],
        "Transient ischaemic attack, probably embolic from new atrial fibrillation. Plan: anticoagulation "
        "started early after a bleeding-risk check, carotid imaging, echocardiography, blood pressure and "
        "glucose control, follow-up in the stroke clinic.",
    ),
}


def _record(case_id: str) -> dict:
    rationale, roles, final = PANELS[case_id]
    return {
        "version": 1,
        "case_id": case_id,
        "model": "synthetic-model",
        "condition": "free-form",
        "topology": "single",
        "roles": [{"name": r["name"], "primary": r["primary"], "rationale": r["rationale"]} for r in roles],
        "panel_rationale": rationale,
        "outputs": [{"role": r["name"], "reasoning": r["reasoning"], "opinion": r["opinion"]} for r in roles],
        "final": final,
        "rounds": 2,
        "consensus": True,
        "stop_reason": "consensus",
    }


NE = "NE"
# (case id, reasoning 1-8, opinion 1-8, final 1-8, (panel, complexity, overall), comment)
CARDIOLOGY = [
    ("10.0000/synthetic-001", [3, 3, 2, 3, 2, 2, 3, 3], [3, 3, 2, 3, 3, 2, 2, 3], [3, 2, 3, 3, 2, 3, 2, 3],
     (2, 2, 2), "Panel: the neurologist adds little; stroke prevention could be handled by cardiology."),
    ("10.0000/synthetic-002", [3, 2, 2, 3, 1, 2, 2, 3], [3, 2, 2, 2, 2, 2, 2, 3], [3, 3, 3, 3, 2, 3, 3, 2],
     (3, 2, 2), "Reasoning: the differential leaves out adrenal and thyroid causes (differential scored 1)."),
    ("10.0000/synthetic-003", [3, 3, 3, 3, 3, 2, 3, 3], [3, 3, 3, 3, 3, 3, 3, 3], [3, 3, 3, 3, 3, 3, 2, 2],
     (3, 2, 3), ""),
]
NEPHROLOGY = [
    ("10.0000/synthetic-001", [2, 2, 1, 2, 2, 2, 1, 2], [2, 2, 2, 2, 2, 2, 2, 2], [3, 2, 2, 3, 2, 3, 2, 2],
     (3, 2, 2), "Reasoning ignores the potassium of 5.4 when choosing drugs (data use 1, management 1)."),
    ("10.0000/synthetic-002", [3, 3, 3, 3, 2, 3, 3, 3], [3, 3, 2, 3, 3, 3, 2, 3], [3, 3, 3, 3, 3, 3, 3, 3],
     (3, 2, 3), ""),
]
NEUROLOGY = [
    ("10.0000/synthetic-001", [2, 2, 2, 2, 2, 2, 2, 2], [NE, 2, 2, 2, 2, 2, 2, 2], [3, 2, 2, 3, 2, 3, 2, 2],
     (2, 2, 2), "Opinion factual accuracy NE: the opinion states no patient facts that could be checked."),
    ("10.0000/synthetic-002", [3, 3, 2, 3, 2, 2, 2, 3], [3, 3, 2, 3, 2, 3, 2, 3], [3, 3, 3, 3, 2, 3, 3, 3],
     (3, 2, 2), ""),
    ("10.0000/synthetic-003", [3, 3, 3, 3, 2, 3, 3, 1], [3, 3, 3, 3, 3, 3, 3, 1], [3, 3, 3, 3, 3, 3, 3, 3],
     (2, 2, 2), "Safety scored 1: no word on checking bleeding risk before anticoagulation."),
]
CSV_HEADERS = [
    "Case ID", *[f"Reasoning {k}" for k in range(1, 9)], *[f"Opinion {k}" for k in range(1, 9)],
    *[f"Final {k}" for k in range(1, 9)], "Panel adequacy", "Case complexity", "Overall quality", "Comment",
]


def _row(entry: tuple) -> list:
    case_id, reasoning, opinion, final, case_level, comment = entry
    return [case_id, *reasoning, *opinion, *final, *case_level, comment]


def _save_deterministic(book: Workbook, path: Path) -> None:
    """Save an openpyxl workbook with fixed document dates and zip timestamps."""
    raw = io.BytesIO()
    book.save(raw)
    out = io.BytesIO()
    with zipfile.ZipFile(raw) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                text = data.decode("utf-8")
                text = re.sub(r"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)",
                              rf"\g<1>{_FIXED_DOC_TIME}\g<3>", text)
                data = text.encode("utf-8")
            entry = zipfile.ZipInfo(info.filename, date_time=_FIXED_ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o600 << 16
            dst.writestr(entry, data)
    path.write_bytes(out.getvalue())


def build(out: Path = HERE) -> list[Path]:
    """Write the example into ``out``; returns the written files."""
    out = Path(out)
    (out / "outputs").mkdir(parents=True, exist_ok=True)
    (out / "workbooks").mkdir(parents=True, exist_ok=True)
    written = []

    cases = out / "cases.jsonl"
    cases.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES), encoding="utf-8")
    written.append(cases)
    for case in CASES:
        path = out / "outputs" / f"{record_file_stem(case['doi'])}.json"
        path.write_text(json.dumps(_record(case["doi"]), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)

    # cardiology.xlsx: made from the template (Specialty and Rater labels, criterion legend, header in row 4).
    cardiology = out / "workbooks" / "cardiology.xlsx"
    write_workbook_template(cardiology, specialty="Cardiology", rater="synthetic-cardiologist-1", overwrite=True,
                            case_ids=[entry[0] for entry in CARDIOLOGY])
    book = load_workbook(cardiology)
    sheet = book.active
    for offset, entry in enumerate(CARDIOLOGY):
        for col, value in enumerate(_row(entry), start=1):
            sheet.cell(row=5 + offset, column=col, value=value)
    _save_deterministic(book, cardiology)
    written.append(cardiology)

    # nephrology.xlsx: a plain sheet named after the specialty; header in row 1, no labels.
    nephrology = out / "workbooks" / "nephrology.xlsx"
    book = Workbook()
    sheet = book.active
    sheet.title = "Nephrology"
    sheet.append(list(WORKBOOK_HEADERS))
    for entry in NEPHROLOGY:
        sheet.append(_row(entry))
    _save_deterministic(book, nephrology)
    written.append(nephrology)

    # neurology.csv: specialty from the file name; human-style headers ("Reasoning 1").
    neurology = out / "workbooks" / "neurology.csv"
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADERS)
    writer.writerows(_row(entry) for entry in NEUROLOGY)
    neurology.write_text(buf.getvalue(), encoding="utf-8")
    written.append(neurology)
    return written


if __name__ == "__main__":
    for written_path in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(written_path)
