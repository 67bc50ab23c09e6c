"""``evolve ratings`` and ``evolve splits``: rating packs (import, check, physician workbooks) and their
case-disjoint split manifests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from evolve.cli._app import _fail, _or_fail, _say, err, escape, out, ratings_app, splits_app
from evolve.cli._options import Given, OptionGroup, PromptsRootOption, grouped, in_range, table_layout
from evolve.errors import EvolveError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


TABLE: Any = OptionGroup({
    "rubric": Annotated[Optional[str], typer.Option("--rubric", help="table: id of the rubric the ratings use (required).")],
    "columns": Annotated[Optional[list[str]], typer.Option("--column", help=(
        "table: FIELD=COLUMN, repeatable. Fields: case, case_text, case_title, target, target_text, statement, "
        "reference, rater, criterion, score, comment, component, model, condition; wide tables also "
        "criterion:<criterion_id>=COLUMN and comment:<criterion_id>=COLUMN. Unmapped fields use a column named "
        "like the field (or case_id, target_id, rater_id, title, reference_answer)."))],
    "layout": Annotated[Optional[str], typer.Option(
        "--layout", help="table: long (one rating per row; default) or wide (one score column per criterion).")],
    "not_evaluable": Annotated[Optional[list[str]], typer.Option(
        "--not-evaluable", help="table: a cell value that marks a rating not evaluable, e.g. Unsure; '' for blank cells (repeatable).")],
    "score_map": Annotated[Optional[list[str]], typer.Option(
        "--score-map", help="table: CRITERION:LABEL=N maps a label to a score, e.g. 'correctness:Definitely correct=3' "
                            "('*:LABEL=N' for every criterion; repeatable).")],
    "skip_empty": Annotated[bool, typer.Option(
        "--skip-empty", help="table: skip empty score cells (they are counted) instead of failing.")],
    "rows": Annotated[Optional[str], typer.Option("--rows", help=(
        "table, .jsonl only: one row per element this dotted path reaches in each record, e.g. 'answers.*.claims.*' "
        "('*' = every list item or object value; records it misses are counted). Columns are then dotted paths from "
        "the record's top, each '*' being the row's own element (answers.*.annotator_id); answers.*.@key is the key "
        "'*' stepped through."))],
    "where": Annotated[Optional[list[str]], typer.Option("--where", help=(
        "table: COLUMN=VALUE keeps only rows whose cell is exactly VALUE (repeatable; all must hold), e.g. "
        "'metadata.field=Healthcare / Medicine'."))],
}, {"skip_empty": False})
"""The options of ``ratings import table`` (how a table's columns and cells are read)."""
TABLE_FLAGS = {"rubric": "rubric", "columns": "column", "layout": "layout", "not_evaluable": "not-evaluable",
               "score_map": "score-map", "skip_empty": "skip-empty", "rows": "rows", "where": "where"}
"""The option (without ``--``) of each member of :data:`TABLE`."""

PackNameOption = Annotated[Optional[str], typer.Option(
    "--name", help="table, expertqa: pack name (default: table, the --out folder's name, so splits go to splits/<name>; "
                   "expertqa, expertqa-<domain>).")]
DomainOption = Annotated[Optional[str], typer.Option(
    "--domain", help="expertqa: medicine (= 'Healthcare / Medicine', the default) or any metadata.field of the files.")]


@ratings_app.command("import")
@grouped
def ratings_import(
    source: str = typer.Argument(..., help="Importer: table, expertqa, kqa or savage."),
    paths: list[Path] = typer.Argument(..., help="table: one or more table files of one format (.csv/.jsonl/.parquet/"
                                       ".xlsx), read as one table in the order given; expertqa: the folder with "
                                       "rand_test.jsonl and rand_val.jsonl; kqa: the data set's folder; savage: the .xlsx file or its folder."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Pack folder to write, e.g. ratings/kqa."),
    overwrite: bool = typer.Option(False, help="Replace an existing pack folder."),
    prompts_root: PromptsRootOption = None,
    table: Given = TABLE,
    name: PackNameOption = None,
    domain: DomainOption = None,
) -> None:
    """Import ratings into a rating pack: any table (long or wide), or a real data set (read by path;
    never commit the result)."""
    from evolve.data import write_pack
    from evolve.rubric import resolve_prompts_root

    _or_fail(_check_importer, source, paths, table, name=name, domain=domain)
    root = resolve_prompts_root(prompts_root)  # the option, else $EVOLVE_PROMPTS_ROOT, else the shipped rubrics
    pack, note = _or_fail(_import_pack, source, paths, table, name=name, domain=domain, root=root, out_dir=out_dir)
    _or_fail(write_pack, pack, out_dir, overwrite=overwrite)
    _say(f"wrote {out_dir}: {len(pack.cases)} cases, {len(pack.targets)} targets, "
         f"{len(pack.ratings)} ratings by {len(pack.raters)} raters")
    if note:
        _say(note)


def _check_importer(source: str, paths: list[Path], table: Given, *, name: str | None, domain: str | None) -> None:
    """Refuse an unknown importer, options another importer takes, several paths but for ``table``.

    Raises:
        EvolveError: Naming the importers, or the options to drop.
    """
    from evolve.data import IMPORTERS
    from evolve.errors import ConfigError

    sources = ["table", *sorted(IMPORTERS)]
    if source not in sources:
        raise EvolveError(f"unknown importer {source!r}; choose one of {sources}.")
    table_only = {TABLE_FLAGS[k]: (v or None) if k == "skip_empty" else v for k, v in table.items()}
    allowed = {"table": set(table_only) | {"name"}, "expertqa": {"name", "domain"}}.get(source, set())
    owners = {**dict.fromkeys(table_only, "table"), "name": "table and expertqa", "domain": "expertqa"}
    given = [f"--{k} (an option of `import {owners[k]}`)"
             for k, v in {**table_only, "name": name, "domain": domain}.items() if v not in (None, []) and k not in allowed]
    if given:
        raise ConfigError(f"`ratings import {source}` does not take {', '.join(given)}; drop "
                          f"{'it' if len(given) == 1 else 'them'}.")
    if source != "table" and len(paths) > 1:
        raise ConfigError(f"`ratings import {source}` reads one path, got {len(paths)}; only `import table` "
                          "takes several files.")


def _import_pack(source: str, paths: list[Path], table: Given, *, name: str | None, domain: str | None,
                 root: Path | None, out_dir: Path) -> tuple[Any, str]:
    """The pack ``source`` imports from ``paths``, and a note on what was read ("" for none).

    Raises:
        EvolveError: The input cannot be read as this importer's (the message says why).
    """
    from evolve.data import IMPORTERS, import_table, parse_score_map, parse_table_columns, parse_where
    from evolve.errors import ConfigError

    if source == "expertqa":
        pack = IMPORTERS[source](paths[0], domain=domain or "medicine", name=name, prompts_root=root)
        return pack, pack.manifest.description
    if source != "table":
        return IMPORTERS[source](paths[0], prompts_root=root), ""
    if table.rubric is None:
        raise ConfigError("`ratings import table` needs --rubric ID (the rubric the ratings use; "
                          "`evolve rubric new` writes one).")
    result = import_table(
        paths, rubric=table.rubric, name=name or out_dir.name, columns=parse_table_columns(table.columns or []),
        layout=table_layout(table.layout) or "long", not_evaluable=table.not_evaluable or (),
        score_map=parse_score_map(table.score_map or []), skip_empty=table.skip_empty, prompts_root=root,
        rows=table.rows, where=parse_where(table.where or []),
    )
    return result.pack, result.counts.describe()


class _RowsProgress:
    """Progress of reading a large ``ratings.csv`` on stderr: a bar on a terminal, else one line
    per 50,000 rows (the library reports nothing for a smaller file)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, rows: int, done: int, total: int) -> None:
        if not err.is_terminal:
            err.print(f"ratings.csv: {rows:,} rows checked ({done / max(total, 1):.0%} of the file)")
            return
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16), TimeElapsedColumn(),
                                console=err.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("ratings.csv", total=total)
        assert self.task is not None
        self.bar.update(self.task, completed=done, description=f"ratings.csv: {rows:,} rows")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@ratings_app.command("check")
def ratings_check(pack_dir: Path = typer.Argument(..., help="Pack folder."), prompts_root: PromptsRootOption = None) -> None:
    """Validate a rating pack and print its counts (an empty pack is refused; large files show progress)."""
    from evolve.data import check_pack

    progress = _RowsProgress()
    try:
        summary = check_pack(pack_dir, prompts_root=prompts_root, progress=progress)
    except EvolveError as exc:
        progress.close()
        _fail(exc)
    progress.close()
    out.print(summary.model_dump_json(indent=2))


@ratings_app.command("import-workbooks")
def ratings_import_workbooks(
    src: Path = typer.Argument(..., help="Folder of physician workbooks (.xlsx/.csv, one per specialty), or one workbook."),
    cases: Path = typer.Option(..., "--cases",
        help="Case file (.jsonl/.csv/.parquet) the workbooks' case ids refer to, or a bench run / rating-pack folder (its cases.jsonl)."),
    outputs: Path = typer.Option(..., "--outputs", help="Folder of consilium records (*.json) the physicians rated."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Pack folder to write."),
    condition: Optional[str] = typer.Option(None, "--condition", help="Record condition to use when a case has several."),
    role_map: Optional[Path] = typer.Option(None, "--role-map", help="CSV with columns specialty,role for specialties named unlike their panel role."),
    name: Optional[str] = typer.Option(None, "--name", help="Pack name (default: the --out folder's name, so splits go to splits/<name>)."),
    columns: Optional[list[str]] = typer.Option(None, "--column",
        help="Case file column mapping FIELD=COLUMN (doi, title, text, answer, case_id); repeatable."),
    overwrite: bool = typer.Option(False, help="Replace an existing pack folder."),
    no_header: bool = typer.Option(False, "--no-header", help="Read sheets without a header row by position: you vouch "
        "that their columns are A..AC in the consilium paper's workbook order (without it such sheets are refused: shifted columns look "
        "like correct ones)."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Import physician rating workbooks of consilium records (consilium paper, physician spreadsheets) into a rating pack."""
    from evolve.data import import_workbooks, parse_column_overrides, write_workbook_import

    try:
        result = import_workbooks(
            src, cases=cases, outputs=outputs, condition=condition, role_map=role_map, name=name or out_dir.name,
            case_columns=parse_column_overrides(columns) if columns else None, prompts_root=prompts_root,
            headerless=no_header,
        )
        write_workbook_import(result, out_dir, overwrite=overwrite)
    except EvolveError as exc:
        _fail(exc)
    s = result.summary
    for warning in s.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(warning))}", markup=True)
    out.print(
        f"wrote {out_dir}: {s.n_cases} cases, {s.n_targets} targets, {s.n_ratings} ratings by {len(s.raters)} raters "
        f"({s.n_workbooks} workbooks, {s.n_sheets} sheets, {s.n_rows} rows); {s.n_structural_exclusions} cells of "
        f"structurally inapplicable pairs kept in structural_exclusions.csv; {s.n_warnings} warning(s)")


@ratings_app.command("workbook-template")
def ratings_workbook_template(
    path: Path = typer.Argument(..., help="The .xlsx file to write."),
    specialty: str = typer.Option(..., "--specialty", help="Specialty of the rater, e.g. Cardiology."),
    rater: str = typer.Option("", "--rater", help="Rater id to pre-fill (default: derived on import)."),
    case_ids: Optional[list[str]] = typer.Option(None, "--case-id", help="Case id to pre-fill in column A (repeatable)."),
    overwrite: bool = typer.Option(False, help="Replace an existing file."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Write an empty, correctly headed physician rating workbook for one specialty."""
    from evolve.data import write_workbook_template

    try:
        write_workbook_template(path, specialty=specialty, rater=rater, case_ids=case_ids or [], overwrite=overwrite,
                                prompts_root=prompts_root)
    except EvolveError as exc:
        _fail(exc)
    out.print(f"wrote {path}")


FRAME: Any = OptionGroup({
    "cases": Annotated[Optional[Path], typer.Option(
        "--cases", help="Case file (.jsonl/.csv/.parquet/.txt) with the full source-ordered universe; "
        "the frame defaults to the pack's rated cases and the holdout is its exact complement.")],
    "frame_manifest": Annotated[Optional[Path], typer.Option(
        "--frame-manifest", help="Calibration manifest to verify and use (one case id a line, # comments).")],
    "frame_size": Annotated[Optional[int], typer.Option(
        "--frame-size", callback=in_range(2, 10_000_000), help="Draw a frame of N cases with the seed.")],
    "train_size": Annotated[Optional[int], typer.Option(
        "--train-size", callback=in_range(1, 10_000_000), help="Exact number of training cases.")],
    "validation_size": Annotated[Optional[int], typer.Option(
        "--validation-size", callback=in_range(1, 10_000_000), help="Exact number of validation cases.")],
    "train_manifest": Annotated[Optional[Path], typer.Option(
        "--train-manifest", help="Supplied training manifest to verify and use.")],
    "validation_manifest": Annotated[Optional[Path], typer.Option(
        "--validation-manifest", help="Supplied validation manifest to verify and use.")],
    "preset": Annotated[Optional[str], typer.Option(
        "--preset", help="'paper': 300 cases, frame 110 (190 held out), train 80 / validation 30, all verified.")],
    "case_column": Annotated[Optional[list[str]], typer.Option(
        "--column", help="With --cases: case_id=COLUMN and/or doi=COLUMN when the case file names them "
        "differently (default: case_id, else doi, else id); repeatable.")],
})
"""How ``splits make`` fixes the frame: the case universe, manifests, sizes or a preset."""


@splits_app.command("make")
@grouped
def splits_make(
    pack_dir: Path = typer.Argument(..., help="Pack folder."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Manifest folder (default: splits/<pack name>)."),
    holdout_fraction: Optional[float] = typer.Option(
        None, help="Share of the pack held out of the frame (fraction splits only; default 0.2)."),
    validation_fraction: Optional[float] = typer.Option(None, help="Share of the frame used for validation (default 0.3)."),
    seed: int = typer.Option(42, callback=in_range(0, 2**31 - 1), help="Seed of every draw."),
    frame: Given = FRAME,
    overwrite: bool = typer.Option(False, help="Replace different manifests already in the folder."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Write a deterministic case-disjoint frame/held-out and train/validation partition.

    Without frame options the holdout is drawn from the pack by --holdout-fraction. With
    --cases, --frame-manifest, --frame-size, sizes or --preset the frame is fixed first and the
    holdout is its exact complement in source order (see splits/README.md).
    """
    target, result, unchanged = _or_fail(_make_splits, pack_dir, out_dir, frame, holdout_fraction=holdout_fraction,
                                         validation_fraction=validation_fraction, seed=seed, overwrite=overwrite,
                                         prompts_root=prompts_root)
    for note in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(note))}", markup=True)
    splits = result.splits
    out.print(
        f"{'unchanged (already written)' if unchanged else 'wrote'} {target}: frame {len(splits.frame)} (train "
        f"{len(splits.train)}, validation {len(splits.validation)}), held-out {len(splits.holdout)} cases")


def _make_splits(pack_dir: Path, out_dir: Path | None, frame: Given, *, holdout_fraction: float | None,
                 validation_fraction: float | None, seed: int, overwrite: bool,
                 prompts_root: Path | None) -> tuple[Path, Any, bool]:
    """``splits make``: the partition built and written; the folder, the build's result and
    whether the folder already held exactly these splits.

    Raises:
        EvolveError: As :func:`~evolve.splits.build_splits` and :func:`~evolve.splits.write_splits`.
    """
    from evolve.data import load_pack
    from evolve.splits import build_splits, holds_splits, write_splits

    pack = load_pack(pack_dir, prompts_root=prompts_root)
    result = build_splits(
        pack, cases=_case_universe(frame.cases, frame.case_column), frame_manifest=frame.frame_manifest,
        frame_size=frame.frame_size, n_train=frame.train_size, n_validation=frame.validation_size,
        train_manifest=frame.train_manifest, validation_manifest=frame.validation_manifest, preset=frame.preset,
        holdout_fraction=holdout_fraction, validation_fraction=validation_fraction, seed=seed,
    )
    target = out_dir or Path("splits") / pack.manifest.name
    unchanged = holds_splits(target, result.splits)
    if not unchanged:  # write_splits would find the same and leave them
        write_splits(result.splits, target, overwrite=overwrite)
    return target, result, unchanged


def _case_universe(cases: Path | None, case_column: list[str] | None):
    """``--cases`` as given, or read with the ``--column`` mapping of its id and DOI columns."""
    from evolve.splits import read_case_ids

    if not case_column:
        return cases
    if cases is None:
        raise EvolveError("--column maps the columns of --cases; give --cases FILE too.")
    from evolve.data import parse_column_overrides

    mapping = parse_column_overrides(case_column)
    return read_case_ids(cases, id_column=mapping.case_id, doi_column=mapping.doi,
                         doi_required="doi" in mapping.model_fields_set)


@splits_app.command("check")
def splits_check(
    split_dir: Path = typer.Argument(..., help="Manifest folder."),
    pack_dir: Path = typer.Option(..., "--pack", help="The pack the manifests refer to."),
    cases: Optional[Path] = typer.Option(
        None, "--cases", help="The case file the frame was chosen from: also verify ids, exact complement and order."),
    case_column: Optional[list[str]] = typer.Option(
        None, "--column", help="With --cases: case_id=COLUMN and/or doi=COLUMN, as for `splits make`; repeatable."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Check a manifest folder against its pack (disjoint, exact complement, order, one side per case)."""
    from evolve.data import load_pack
    from evolve.splits import check_split_dir

    try:
        result = check_split_dir(split_dir, load_pack(pack_dir, prompts_root=prompts_root), cases=_case_universe(cases, case_column))
    except EvolveError as exc:
        _fail(exc)
    for note in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(note))}", markup=True)
    out.print(f"{split_dir}: ok")
