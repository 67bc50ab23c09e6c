"""``evolve rubric``: a rubric of your own (``new`` writes a valid folder to edit, ``check`` validates one)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from evolve.cli._app import _fail, _or_fail, err, out, sub_app
from evolve.cli._options import RubricPromptsRootOption
from evolve.errors import EvolveError

rubric_app = sub_app("Your own rubric: scaffold a rubric folder, check one.")


@rubric_app.command("new")
def rubric_new(
    rubric_id: str = typer.Argument(..., metavar="NAME", help="Rubric id, also its folder name (letters, digits, _ . -)."),
    criterion: list[str] = typer.Option(..., "--criterion", help="Criterion id (repeatable), each followed by its --scale."),
    scale: list[str] = typer.Option(..., "--scale", help="Scores LO-HI, e.g. 0-3: one per --criterion in the same "
                                                         "order, or one for all."),
    names: Optional[list[str]] = typer.Option(None, "--name", help="Short name of each criterion shown to the judge, "
                                                                   "one per --criterion in order (default: the id)."),
    definitions: Optional[list[str]] = typer.Option(None, "--definition", help="What each criterion measures, one per "
                                                                              "--criterion in order (default: a placeholder)."),
    lower_is_better: Optional[list[str]] = typer.Option(None, "--lower-is-better", help="A criterion id whose low "
                                                        "scores are good, e.g. an error count (repeatable)."),
    components: Optional[list[str]] = typer.Option(None, "--component", help="Name of the rated text, e.g. answer "
                                                   "(repeatable; default: answer); every criterion applies to each."),
    title: str = typer.Option("", "--title", help="One-line title (default: a placeholder)."),
    version: str = typer.Option("1", "--version", help="Rubric version; change it whenever a text changes."),
    out_dir: Path = typer.Option(Path("judge_prompts"), "--out", help="Prompts root to write NAME/ into."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing, different NAME/ folder."),
) -> None:
    """Write a valid rubric folder to edit: rubric.json (every field), protocol.md and one initial guidance per
    criterion; each text you must write begins with "Replace this"."""
    from evolve.rubric import criterion_specs, scaffold_rubric

    specs = _or_fail(criterion_specs, criterion, scale, names=names or (), definitions=definitions or (),
                     lower_is_better=lower_is_better or ())
    bundle = _or_fail(scaffold_rubric, rubric_id, specs, title=title, components=components, version=version)
    folder = _or_fail(bundle.write, out_dir, overwrite=overwrite)
    n_guidance = sum(len(pairs) for pairs in bundle.guidance.values())
    out.print(f"wrote {folder}/: rubric.json, protocol.md and {n_guidance} initial guidance file(s)")
    out.print(_next_steps(folder, rubric_id, out_dir))


def _next_steps(folder: Path, rubric_id: str, out_dir: Path) -> str:
    """What to do after ``evolve rubric new``: write the texts, check, import, split, calibrate."""
    from evolve.layering import PROMPTS_ROOT_ENV

    return ("next:\n"
            f"  1. replace every text beginning \"Replace this\" in {folder}/ (rubric.json, protocol.md, guidance/)\n"
            f"  2. evolve rubric check {folder}\n"
            f"  3. evolve ratings import table RATINGS.csv --rubric {rubric_id} --prompts-root {out_dir} --out ratings/NAME\n"
            f"  4. evolve splits make ratings/NAME --prompts-root {out_dir}, then "
            f"evolve calibrate --pack ratings/NAME --prompts-root {out_dir}\n"
            f"or, instead of --prompts-root at every step, once per shell: export {PROMPTS_ROOT_ENV}={out_dir.resolve()}")


@rubric_app.command("check")
def rubric_check(
    target: str = typer.Argument(..., metavar="DIR_OR_ID", help="A rubric folder (holding rubric.json), or a rubric id "
                                                                "looked up in --prompts-root, then the shipped rubrics."),
    prompts_root: RubricPromptsRootOption = None,
) -> None:
    """Validate a rubric folder and print its summary; warn while texts from `evolve rubric new` are unedited."""
    from evolve.rubric import check_rubric_folder, rubric_summary, unedited_placeholders

    try:
        folder = _rubric_folder(target, prompts_root)
        bundle = check_rubric_folder(folder)
    except EvolveError as exc:
        _fail(exc)
    for line in rubric_summary(bundle):
        out.print(line)
    left = unedited_placeholders(bundle)
    if left:
        err.print(f"warning: {len(left)} text(s) in {folder} from `evolve rubric new` still hold \"Replace this\"; write "
                  "them before rating or calibrating:")
        for place in left:
            err.print(f"  {place}")
    out.print(f"ok: {folder} is a valid rubric folder{' (with placeholder texts)' if left else ''}")


def _rubric_folder(target: str, prompts_root: Optional[Path]) -> Path:
    """The folder ``evolve rubric check`` validates: ``target`` itself when it is a folder,
    else the folder the id ``target`` resolves to."""
    from evolve.errors import RubricError
    from evolve.rubric import rubric_source

    path = Path(target)
    if path.is_dir() and (path / "rubric.json").is_file():
        return path
    if path.is_dir() or Path(target).name != target:
        raise RubricError(f"{path}: no rubric.json here. Give a rubric folder (e.g. judge_prompts/my-rubric) or a rubric "
                          "id (e.g. my-rubric, with --prompts-root judge_prompts).")
    return rubric_source(target, root=prompts_root)
