"""Rating packs: physician ratings of LLM-written clinical text, in one validated format.

A *rating pack* is a directory that holds everything calibration needs from one source
of human ratings, independent of how that source was originally laid out:

* ``pack.json`` - the :class:`PackManifest`: pack name, format version, the rubric (id and
  version under ``judge_prompts/``) that defines the rated criteria, provenance and
  checksums of the imported files;
* ``cases.jsonl`` - one :class:`Case` per line. A case (a vignette, a patient question) is
  the grouping unit: splits never separate the targets of one case;
* ``targets.jsonl`` - one :class:`Target` per line: a piece of LLM output that raters scored
  (an answer, a rationale ...), tagged with the rubric *component* it is;
* ``ratings.csv`` - one :class:`Rating` per row (a long table): one rater's integer score
  (or *not evaluable*) for one target on one rubric criterion, with the rater's comment.

:func:`load_pack` reads and validates a pack (structure, references between files, and
criteria / score scales / components against the rubric) and reports every problem at once
in one :class:`~evolve.errors.PackError`. :func:`write_pack` writes one atomically. Importers
(:data:`IMPORTERS`) convert the original release files of a data set into a pack in memory;
the caller decides where to write it. :func:`import_table` (one or more files; nested JSON
records with ``rows=``, row selection with ``where=``) and
:func:`import_frame` / :meth:`RatingPack.from_frame` (a pandas DataFrame) read any table of
ratings, long or wide, with a column mapping. Imported real data is never committed to the
repository (see ``ratings/README.md``).

For the consilium benchmark: :func:`load_cases` reads NEJM-MedQA-style case files,
:class:`ConsiliumRecord` is the on-disk record of one consilium run on one case (consilium paper, benchmark runner) and
:func:`consilium_targets` turns it into targets, and :func:`import_workbooks` reads the
physicians' per-specialty rating workbooks (consilium paper, physician spreadsheets) into a pack.
"""

from collections.abc import Callable

from evolve.data._cases import (
    CASE_FILE_SUFFIXES,
    CaseColumns,
    case_file,
    generation_input,
    load_cases,
    parse_column_overrides,
    read_case_rows,
)
from evolve.data._consilium import (
    MAX_PANEL_ROLES,
    ConsiliumRecord,
    PanelRole,
    RoleOutput,
    consilium_targets,
    load_consilium_records,
    record_file_stem,
    role_slug,
)
from evolve.data._expertqa import (
    EXPERTQA_DOMAINS,
    EXPERTQA_LABEL_SCORES,
    EXPERTQA_NOT_EVALUABLE,
    expertqa_case_id,
    import_expertqa,
)
from evolve.data._kqa import KQA_LABEL_SCORES, import_kqa, kqa_case_id
from evolve.data._models import PACK_FORMAT_VERSION, Case, PackManifest, Rating, RubricRef, Target
from evolve.data._pack import (
    CASES_FILE,
    MANIFEST_FILE,
    MAX_REPORTED_PROBLEMS,
    RATINGS_COLUMNS,
    RATINGS_FILE,
    TARGETS_FILE,
    PackSummary,
    RatingPack,
    check_pack,
    load_pack,
    pack_json_schemas,
    summarize_pack,
    validate_pack,
    write_pack,
    write_pack_schemas,
)
from evolve.data._savage import import_savage, savage_swapped_case_ids
from evolve.data._table import (
    TABLE_FIELDS,
    TABLE_SUFFIXES,
    TableCounts,
    TableImport,
    import_frame,
    import_table,
    parse_score_map,
    parse_table_columns,
    parse_where,
    read_table,
)
from evolve.data._util import TEXT_PROBLEM_FIX, shorten, text_problem
from evolve.data._workbooks import (
    NOT_EVALUABLE_MARKS,
    STRUCTURAL_EXCLUSIONS_FILE,
    WORKBOOK_HEADERS,
    WORKBOOK_IMPORTER,
    WORKBOOK_RUBRIC_ID,
    WorkbookImport,
    WorkbookImportSummary,
    import_workbooks,
    load_structural_exclusions,
    read_role_map,
    write_workbook_import,
    write_workbook_template,
)

IMPORTERS: dict[str, Callable[..., RatingPack]] = {
    "expertqa": import_expertqa,
    "kqa": import_kqa,
    "savage": import_savage,
}
"""Importer by source name, called as ``IMPORTERS[name](src, prompts_root=None)``; each returns
a validated :class:`RatingPack` and writes nothing."""

__all__ = [
    "CASES_FILE",
    "CASE_FILE_SUFFIXES",
    "EXPERTQA_DOMAINS",
    "EXPERTQA_LABEL_SCORES",
    "EXPERTQA_NOT_EVALUABLE",
    "IMPORTERS",
    "KQA_LABEL_SCORES",
    "MANIFEST_FILE",
    "MAX_PANEL_ROLES",
    "MAX_REPORTED_PROBLEMS",
    "NOT_EVALUABLE_MARKS",
    "PACK_FORMAT_VERSION",
    "RATINGS_COLUMNS",
    "RATINGS_FILE",
    "STRUCTURAL_EXCLUSIONS_FILE",
    "TABLE_FIELDS",
    "TABLE_SUFFIXES",
    "TARGETS_FILE",
    "TEXT_PROBLEM_FIX",
    "WORKBOOK_HEADERS",
    "WORKBOOK_IMPORTER",
    "WORKBOOK_RUBRIC_ID",
    "Case",
    "CaseColumns",
    "ConsiliumRecord",
    "PackManifest",
    "PanelRole",
    "PackSummary",
    "Rating",
    "RatingPack",
    "RoleOutput",
    "RubricRef",
    "TableCounts",
    "TableImport",
    "Target",
    "WorkbookImport",
    "WorkbookImportSummary",
    "check_pack",
    "consilium_targets",
    "expertqa_case_id",
    "generation_input",
    "import_expertqa",
    "import_frame",
    "import_kqa",
    "import_savage",
    "import_table",
    "import_workbooks",
    "kqa_case_id",
    "case_file",
    "load_cases",
    "load_consilium_records",
    "load_pack",
    "load_structural_exclusions",
    "pack_json_schemas",
    "parse_column_overrides",
    "parse_score_map",
    "parse_table_columns",
    "parse_where",
    "read_case_rows",
    "read_role_map",
    "read_table",
    "record_file_stem",
    "role_slug",
    "savage_swapped_case_ids",
    "shorten",
    "summarize_pack",
    "text_problem",
    "validate_pack",
    "write_pack",
    "write_pack_schemas",
    "write_workbook_import",
    "write_workbook_template",
]
