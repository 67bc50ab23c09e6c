"""Rebuild ratings/otb-rated-example/: INVENTED clinician ratings of INVENTED answers.

Two invented "models" answer the 4 Specialist Turn questions and the 3 Board Simulation cases of
this folder (the answers below are written by hand, nothing is generated); two invented
oncologists rate every answer on every criterion of rubric ``otb`` that applies to it. The
pack goes through the real importer (``evolve otb import-ratings``'s ``otb_rating_pack``) from
a run folder assembled in a temporary directory.

    python ratings/otb-example/make_rated_example.py
"""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path

from evolve.data import write_pack
from evolve.otb import extract_board, extract_turn, otb_rating_pack, resolve_otb_config
from evolve.runs import OtbFolder

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "otb-rated-example"

ANSWERS = {  # (item id, model) -> raw answer; "close" answers follow the reference, "far" ones do not
    ("qa-ex-01", "invented-close"): '{"answer": "Chemotherapy first; the venous contact makes it borderline resectable."}',
    ("qa-ex-01", "invented-far"): '{"answer": "Go straight to a Whipple; the tumour is small."}',
    ("qa-ex-02", "invented-close"): '{"answer": "It is borderline resectable: contact below 180 degrees, the vein is patent."}',
    ("qa-ex-02", "invented-far"): '{"answer": "The vein is encased and occluded, so it is unresectable."}',
    ("qa-ex-03", "invented-close"): '{"answer": "Sentinel node biopsy during the lumpectomy."}',
    ("qa-ex-03", "invented-far"): '{"answer": "Full axillary dissection, since nodes were seen on PET."}',
    ("qa-ex-04", "invented-close"): '{"answer": "No trial fits now; standard osimertinib is the best option."}',
    ("qa-ex-04", "invented-far"): '{"answer": "Enrol her in the open KRAS G12C trial."}',
    ("sim-ex-01", "invented-close"): "<discussion>\n<turn 1> Surgeon: Borderline.\n</discussion>\n<conclusion>The board "
    "recommended neoadjuvant FOLFIRINOX. Restaging will decide on resection.</conclusion>",
    ("sim-ex-01", "invented-far"): "<discussion>\n<turn 1> Surgeon: Resect.\n</discussion>\n<conclusion>The board "
    "recommended immediate pancreatoduodenectomy. Adjuvant therapy will follow.</conclusion>",
    ("sim-ex-02", "invented-close"): "<discussion>\n<turn 1> Surgeon: Conserve.\n</discussion>\n<conclusion>The board "
    "recommended lumpectomy with sentinel node biopsy. Endocrine therapy and radiotherapy will follow.</conclusion>",
    ("sim-ex-02", "invented-far"): "<discussion>\n<turn 1> Surgeon: Mastectomy.\n</discussion>\n<conclusion>The board "
    "recommended mastectomy with axillary dissection. Chemotherapy will follow.</conclusion>",
    ("sim-ex-03", "invented-close"): "<discussion>\n<turn 1> Oncologist: Osimertinib.\n</discussion>\n<conclusion>The "
    "board recommended osimertinib without brain radiotherapy. An MRI in two months checks the response.</conclusion>",
    ("sim-ex-03", "invented-far"): "<discussion>\n<turn 1> Radiation oncologist: Irradiate.\n</discussion>\n<conclusion>"
    "The board recommended whole-brain radiotherapy first. Systemic therapy will start afterwards.</conclusion>",
}
# per rater: close answers score high with no flags; far answers low, with flags
SCORES = {"invented-close": {"clinical_equivalence": (5, 4), "critical_error": (0, 0), "unsupported_claim": (0, 1),
                             "conclusion_alignment": (5, 4)},
          "invented-far": {"clinical_equivalence": (1, 2), "critical_error": (1, 1), "unsupported_claim": (1, 1),
                           "conclusion_alignment": (1, 1)}}
TURN_CRITERIA = ("clinical_equivalence", "critical_error", "unsupported_claim")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = resolve_otb_config(preset="quick", environ={}, overrides={
            "run_id": "invented", "archives_dir": Path(tmp), "board": HERE / "task1_example.jsonl",
            "turn": HERE / "task2_example.jsonl", "max_items": 10, "models": ("invented-close", "invented-far")})
        folder = OtbFolder(config.run_dir)
        folder.write(folder.CONFIG, config.model_dump_json(indent=2))
        rows = []
        for (item, model), raw in ANSWERS.items():
            task = "board" if item.startswith("sim") else "turn"
            e = extract_board(raw) if task == "board" else extract_turn(raw)
            key = {"simulation_id": item} if task == "board" else {"qa_id": item}
            case = {"qa-ex-01": "ex-case-01", "qa-ex-02": "ex-case-01", "qa-ex-03": "ex-case-02", "qa-ex-04": "ex-case-03",
                    "sim-ex-01": "ex-case-01", "sim-ex-02": "ex-case-02", "sim-ex-03": "ex-case-03"}[item]
            path = folder.responses(task, model)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write(json.dumps({"kind": "response", **key, "case_id": case, "model": model, "raw_response": raw,
                                     "extracted_final_response": e.text, "malformed": e.malformed,
                                     "parse_status": e.parse_status, "usage": {"completion_tokens": 0}}) + "\n")
            for criterion in (TURN_CRITERIA if task == "turn" else ("conclusion_alignment",)):
                for r, score in enumerate(SCORES[model][criterion], start=1):
                    rows.append({"item_id": item, "model": model, "rater_id": f"invented-oncologist-{r}",
                                 "criterion": criterion, "score": score, "comment": "INVENTED rating"})
        ratings = Path(tmp) / "ratings.csv"
        with ratings.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        pack = otb_rating_pack(config.run_dir, ratings, name="otb-rated-example")
        readme = ("# otb-rated-example — INVENTED\n\nInvented answers to the invented records of `../otb-example/`, "
                  "rated by two invented oncologists on rubric `otb`. Rebuild with "
                  "`python ratings/otb-example/make_rated_example.py`. For trying `evolve calibrate` on the "
                  "OpenTumorBoard rubric; it says nothing about any model.\n")
        write_pack(pack, OUT, overwrite=True, extra_files={"README.md": readme})
    print(f"wrote {OUT}: {len(pack.cases)} items, {len(pack.targets)} answers, {len(pack.ratings)} ratings")


if __name__ == "__main__":
    main()
