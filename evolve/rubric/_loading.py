"""Loading rubrics, protocols and initial guidance from a prompts root.

Layout of one rubric folder (``<prompts root>/<rubric_id>/``)::

    rubric.json                  # Rubric (criteria, anchors, applicability, version)
    protocol.md                  # fixed judge protocol (system message)
    guidance/<criterion_id>/*.md # initial guidance candidates, sorted by file name

Where a rubric id is looked up, in order:

1. the prompts root given (``root=``; on the command line ``--prompts-root DIR``, in a config
   the key ``prompts_root``), else the ``EVOLVE_PROMPTS_ROOT`` environment variable;
2. the rubrics shipped inside the installed package (:func:`shipped_prompts_root`).

The first root holding ``<rubric_id>/rubric.json`` provides the whole rubric folder (rubric,
protocol and guidance come from the same folder, never mixed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from evolve.errors import TEXT_PROBLEM_FIX, RubricError, path_problem, text_problem
from evolve.layering import PROMPTS_ROOT_ENV
from evolve.rubric._models import Rubric

MAX_GUIDANCE_CHARS = 800
"""Upper bound on a guidance prompt, in characters (consilium paper, calibration; longer candidates are rejected)."""


def shipped_prompts_root() -> Path:
    """The folder of rubrics shipped with evolve (``consilium``, ``kqa-entailment`` ...).

    An installed wheel carries them as package data (``evolve/judge_prompts/``, read through
    :mod:`importlib.resources`); an editable install or a checkout on ``PYTHONPATH`` reads the
    repository's ``judge_prompts/`` next to the package.

    Returns:
        The first of these that is a folder; the package-data path when neither is (the
        loaders then report that no rubric is known there).
    """
    package = resources.files("evolve")
    packaged = Path(str(package / "judge_prompts"))
    checkout = Path(str(package)).parent / "judge_prompts"
    for candidate in (packaged, checkout):
        if candidate.is_dir():
            return candidate
    return packaged


def default_prompts_root() -> Path:
    """Alias of :func:`shipped_prompts_root` (kept for existing callers)."""
    return shipped_prompts_root()


def resolve_prompts_root(root: Path | str | None = None, *, environ: Mapping[str, str] | None = None) -> Path | None:
    """The prompts root to look in before the shipped rubrics.

    Args:
        root: An explicit prompts root (``--prompts-root``, a config's ``prompts_root``).
        environ: Environment to read ``EVOLVE_PROMPTS_ROOT`` from (default: ``os.environ``).

    Returns:
        ``root`` if given, else ``$EVOLVE_PROMPTS_ROOT`` if set and non-empty, else None
        (the shipped rubrics only). ``~`` is expanded; the folder is not checked here.
    """
    if root is not None and str(root).strip():
        return Path(root).expanduser()
    value = (os.environ if environ is None else environ).get(PROMPTS_ROOT_ENV, "").strip()
    return Path(value).expanduser() if value else None


def _known(root: Path) -> list[str]:
    """Rubric ids (folders holding a ``rubric.json``) under ``root``."""
    return sorted(p.name for p in root.iterdir() if (p / "rubric.json").is_file()) if root.is_dir() else []


def rubric_source(rubric_id: str, *, root: Path | str | None = None) -> Path:
    """The rubric folder ``rubric_id`` resolves to (see the module's lookup order).

    Args:
        rubric_id: Folder name of the rubric (``consilium``, ``my-rubric``).
        root: Prompts root looked in first; None = ``$EVOLVE_PROMPTS_ROOT`` if set.

    Returns:
        ``<root>/<rubric_id>`` or ``<shipped root>/<rubric_id>``, whichever holds a
        ``rubric.json`` first (not validated here: :func:`load_rubric` does that).

    Raises:
        RubricError: ``rubric_id`` is not a plain folder name; the prompts root given is not
            a folder; or no searched root holds the rubric (the message lists each root
            searched with the rubrics it holds, and how to point at another one).
    """
    if not rubric_id or Path(rubric_id).name != rubric_id or rubric_id in (".", ".."):
        raise RubricError(f"rubric id {rubric_id!r} is not a plain folder name; use a name like 'my-rubric'.")
    given = resolve_prompts_root(root)
    shipped = shipped_prompts_root()
    searched: list[tuple[str, Path]] = []
    if given is not None:
        if (problem := path_problem(given, "folder")) is not None:
            raise RubricError(
                f"{given}: the prompts root given (--prompts-root, {PROMPTS_ROOT_ENV}, the config's "
                f"'prompts_root' or Python's prompts_root=) {'is not a folder (it does not exist)' if problem == 'does not exist' else problem.split(':')[0]}; "
                "give the folder that holds <rubric id>/rubric.json."
            )
        searched.append(("the prompts root given", given))
    if given is None or given.resolve() != shipped.resolve():
        searched.append(("the shipped rubrics", shipped))
    for _, base in searched:
        if (base / rubric_id / "rubric.json").is_file():
            return base / rubric_id
    places = "; ".join(f"{what} {base} (rubrics: {', '.join(_known(base)) or 'none'})" for what, base in searched)
    raise RubricError(
        f"no rubric {rubric_id!r}: no {rubric_id}/rubric.json in {places}. Point at the folder holding "
        f"{rubric_id}/rubric.json with --prompts-root DIR or {PROMPTS_ROOT_ENV}=DIR (a config's 'prompts_root', "
        "Python's prompts_root=DIR), "
        f"create it with `evolve rubric new {rubric_id} --criterion ID --scale 0-3`, or fix the rubric id "
        "(a pack names it in pack.json 'rubric.id')."
    )


def _rubric_dir(root: Path | str | None, rubric_id: str) -> Path:
    return rubric_source(rubric_id, root=root)


def _check_text(path: Path, where: str, value: object) -> None:
    """Raise :class:`RubricError` when a string anywhere in ``value`` (a text, or the strings of a
    JSON document, walked depth-first) holds a control or bidirectional-override character."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(path, f"{where}.{key}" if where else str(key), item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_text(path, f"{where}.{i}", item)
    elif (problem := text_problem(value)) is not None:
        at = f"field '{where}'" if where else "the text"
        raise RubricError(f"{path}: {at} {problem}. {TEXT_PROBLEM_FIX}")


def load_rubric(rubric_id: str, *, root: Path | str | None = None, version: str | None = None) -> Rubric:
    """Load and validate ``<root>/<rubric_id>/rubric.json``.

    Args:
        rubric_id: Folder name under the prompts root.
        root: Prompts root looked in before the shipped rubrics (see :func:`rubric_source`);
            None = ``$EVOLVE_PROMPTS_ROOT`` if set, else the shipped rubrics only.
        version: If given, the rubric file's version must equal it.

    Raises:
        RubricError: Rubric not found (every root searched is named), invalid JSON, a string
            holding a control or bidirectional-override character, schema violation or version
            mismatch.
    """
    path = _rubric_dir(root, rubric_id) / "rubric.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RubricError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}); fix the syntax.") from exc
    _check_text(path, "", raw)
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RubricError(f"{path}: field '{loc}': {first['msg']}. Fix the rubric file.") from exc
    if rubric.id != rubric_id:
        raise RubricError(f"{path}: 'id' is {rubric.id!r} but the folder is {rubric_id!r}; make them equal.")
    if version is not None and rubric.version != version:
        raise RubricError(
            f"{path}: rubric version is {rubric.version!r} but {version!r} was requested (by the pack). "
            "Re-import the pack against this rubric version, or restore the matching rubric file."
        )
    return rubric


def load_protocol(rubric_id: str, *, root: Path | str | None = None) -> str:
    """Return the fixed judge protocol text (``protocol.md``) of a rubric.

    Args:
        rubric_id: Folder name of the rubric.
        root: Prompts root looked in before the shipped rubrics (see :func:`rubric_source`).

    Raises:
        RubricError: Rubric not found, or the file is missing or empty, or holds a control or
            bidirectional-override character (:func:`evolve.errors.text_problem`).
    """
    path = _rubric_dir(root, rubric_id) / "protocol.md"
    if not path.is_file() or not path.read_text(encoding="utf-8").strip():
        raise RubricError(f"{path}: missing or empty judge protocol; write the protocol text there.")
    text = path.read_text(encoding="utf-8").strip()
    _check_text(path, "", text)
    return text


def load_initial_guidance(rubric_id: str, criterion_id: str, *, root: Path | str | None = None) -> list[tuple[str, str]]:
    """Return the initial guidance candidates of one criterion as ``(name, text)`` pairs.

    Files are ``guidance/<criterion_id>/*.md``, sorted by name; the name is the file stem.

    Args:
        rubric_id: Folder name of the rubric.
        criterion_id: The criterion (a folder under ``guidance/``).
        root: Prompts root looked in before the shipped rubrics (see :func:`rubric_source`).

    Raises:
        RubricError: Rubric not found, no candidate files, a candidate longer than 800
            characters, or one holding a control or bidirectional-override character.
    """
    folder = _rubric_dir(root, rubric_id) / "guidance" / criterion_id
    files = sorted(folder.glob("*.md")) if folder.is_dir() else []
    if not files:
        raise RubricError(
            f"{folder}: no initial guidance candidates (*.md). Write at least one short guidance file "
            f"(<= {MAX_GUIDANCE_CHARS} characters) there."
        )
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8").strip()
        if not text or len(text) > MAX_GUIDANCE_CHARS:
            raise RubricError(
                f"{f}: guidance has {len(text)} characters; it must be 1..{MAX_GUIDANCE_CHARS}. Shorten it."
            )
        _check_text(f, "", text)
        out.append((f.stem, text))
    return out
