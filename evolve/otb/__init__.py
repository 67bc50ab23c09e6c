"""OpenTumorBoard: the Specialist Turn and Board Simulation benchmark (``../shared/OTB_FORMAT.md``).

OpenTumorBoard turns recorded tumor boards into two tasks on the same material - a case summary
and one caption per slide:

* **Specialist Turn**: a question put to one specialist during the board (``qa_type``,
  ``target_specialist_role``); the model answers in at most three sentences, as
  ``{"answer": ...}``, and the judge rates its *clinical equivalence* to what the specialist
  said (1-5) with two flags, a critical error and an unsupported claim.
* **Board Simulation**: the whole board; the model writes a numbered discussion and one
  conclusion, and the judge rates the conclusion's *alignment* with the board's (1-5) and the
  four decisions (therapy, surgery, next action, clinical trial) the board's conclusion took.

This package reads the released records (:func:`load_board_cases`, :func:`load_turn_questions`;
``.jsonl`` or ``.jsonl.gz``; references never reach a generating model), reads answers the way
the released code does (:func:`extract_board`, :func:`extract_turn`: fallbacks and a
``parse_status``; an answer with nothing usable is *malformed*, kept and counted), and
aggregates judged items as released (:func:`summarize`: malformed answers at the floor of the
mean, judge failures excluded and counted, flag rates over scored items; :func:`rouge_l`).
"""

from evolve.otb._aggregate import DECISIONS, JudgedItem, rouge_l, summarize
from evolve.otb._extract import Extraction, ParseStatus, extract_board, extract_turn, final_text, sentence_count
from evolve.otb._records import (
    NO_SLIDES,
    BoardCase,
    SourceAlias,
    TurnQuestion,
    load_board_cases,
    load_turn_questions,
    open_jsonl,
)

__all__ = [
    "DECISIONS",
    "NO_SLIDES",
    "BoardCase",
    "Extraction",
    "JudgedItem",
    "ParseStatus",
    "SourceAlias",
    "TurnQuestion",
    "extract_board",
    "extract_turn",
    "final_text",
    "load_board_cases",
    "load_turn_questions",
    "open_jsonl",
    "rouge_l",
    "sentence_count",
    "summarize",
]
