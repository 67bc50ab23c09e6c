"""From physician workbooks and a case file to a calibration run's inputs, in one step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evolve.data import CaseColumns, import_workbooks, load_cases, write_workbook_import
from evolve.errors import RunError
from evolve.runs import locks_run
from evolve.splits import CaseList, make_frame_splits, read_manifest, write_splits

PAPER_FRAME = (110, 80, 30)
"""consilium paper, calibration: 110 physician-rated cases, split DOI-disjoint into 80 training + 30 validation."""


@dataclass(frozen=True)
class WorkbookInputs:
    """Where :func:`prepare_workbook_inputs` wrote the pack and the split, and what it saw.

    Attributes:
        pack: The imported rating pack folder.
        splits: The split folder (frame = rated cases or the manifest; holdout = the rest of
            the case file, in source order).
        warnings: Import warnings (e.g. a 0 or 1 without a comment) and split warnings.
        counts: Cases / targets / ratings / structural exclusions imported, and split sizes.
    """

    pack: Path
    splits: Path
    warnings: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)


@locks_run(lambda *_, into, **__: into)  # one process writes a run folder
def prepare_workbook_inputs(
    workbooks: Path,
    *,
    cases: Path,
    outputs: Path,
    into: Path,
    condition: str | None = None,
    role_map: Path | None = None,
    case_columns: CaseColumns | None = None,
    frame_manifest: Path | None = None,
    seed: int = 42,
    name: str | None = None,
    prompts_root: Path | str | None = None,
    headerless: bool = False,
) -> WorkbookInputs:
    """Import physician workbooks into ``into/pack`` and split into ``into/splits``.

    The frame is the supplied ``frame_manifest`` (verified against the case file) or, by
    default, the cases the physicians rated; the holdout is the exact complement in the case
    file, in source order. A 110-case frame is split 80 training / 30 validation exactly as in
    the paper (consilium paper, calibration); any other frame size keeps the paper's proportion (30/110 to
    validation). Nothing is written unless the import and the split are both valid.

    Args:
        workbooks: Folder of ``.xlsx``/``.csv`` workbooks, one per specialty (consilium paper, physician spreadsheets).
        cases: The case file (``.jsonl``/``.csv``/``.parquet``, see :func:`evolve.data.load_cases`).
        outputs: Folder of consilium records the workbooks rate.
        into: Folder that receives ``pack/`` and ``splits/`` (a calibration run folder).
        condition: Which consilium condition the workbooks rate, when records have several.
        role_map: CSV ``specialty,role`` for specialties that do not name a panel role.
        case_columns: Column mapping of the case file.
        frame_manifest: One case id per line: the calibration frame (default: rated cases).
        seed: Seed of the train/validation draw.
        name: Pack name (default: the workbook folder's name).
        prompts_root: Where the ``consilium`` rubric is looked up before the shipped rubrics.
        headerless: Read sheets without a header row by position (see
            :func:`evolve.data.import_workbooks`); without it they are refused.

    Raises:
        PackError: Invalid workbooks (every problem, with workbook, sheet, row, column and fix).
        SplitError: An invalid frame manifest or impossible sizes.
        RunError: ``into`` already holds a pack or a split.
    """
    into = Path(into)
    pack_dir, split_dir = into / "pack", into / "splits"
    for path in (pack_dir, split_dir):
        if path.exists() and any(path.iterdir()):
            raise RunError(f"{path} already exists; choose another --run-id, or resume the run with --resume {into}.")
    result = import_workbooks(workbooks, cases=cases, outputs=outputs, condition=condition, role_map=role_map,
                              name=name, case_columns=case_columns, prompts_root=prompts_root, headerless=headerless)
    pack = result.pack
    universe = CaseList.from_cases(load_cases(cases, mapping=case_columns), path=Path(cases))
    if frame_manifest is not None:
        frame: Path | list[str] = Path(frame_manifest)
        n_frame = len(read_manifest(Path(frame_manifest)).ids)
    else:
        frame = [c.case_id for c in pack.cases]
        n_frame = len(frame)
    if n_frame == PAPER_FRAME[0]:
        sizes: dict = {"n_train": PAPER_FRAME[1], "n_validation": PAPER_FRAME[2]}
    else:
        sizes = {"validation_fraction": PAPER_FRAME[2] / PAPER_FRAME[0]}
    splits = make_frame_splits(universe, pack_name=pack.manifest.name, frame=frame, seed=seed, **sizes)
    write_workbook_import(result, pack_dir)
    write_splits(splits, split_dir)
    summary = result.summary
    return WorkbookInputs(
        pack=pack_dir,
        splits=split_dir,
        warnings=tuple(str(w) for w in summary.warnings),
        counts={
            "cases": len(pack.cases), "targets": len(pack.targets), "ratings": len(pack.ratings),
            "structural_exclusions": len(result.structural_exclusions), **splits.counts(),
        },
    )
