"""A rubric in memory: ``rubric.json``, the protocol and the initial guidance, as one value.

:class:`RubricBundle` is what a rubric folder holds (see :mod:`evolve.rubric._loading` for the
layout), without the folder: it can be built in Python, checked, hashed and written as a folder
(whole or not at all), and loading what was written gives an equal bundle.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evolve.errors import RubricError
from evolve.rubric._loading import MAX_GUIDANCE_CHARS, load_initial_guidance, load_protocol, load_rubric
from evolve.rubric._models import Rubric

__all__ = ["RUBRIC_ID_PATTERN", "RubricBundle"]

RUBRIC_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
"""A rubric id (the folder name) and a guidance name (the file stem): letters, digits, ``_ . -``,
not starting with a dot or a dash."""

RUBRIC_FILE = "rubric.json"
PROTOCOL_FILE = "protocol.md"
GUIDANCE_DIR = "guidance"

Guidance = Mapping[str, tuple[tuple[str, str], ...]]


def _normalised(guidance: Mapping[str, Iterable[tuple[str, str]]]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Guidance with stripped texts, ordered by file name as the loader reads them back; a
    criterion without any text is left out (as a folder without files reads back)."""
    out = {}
    for cid, pairs in guidance.items():
        items = tuple((str(name), str(text).strip()) for name, text in pairs)
        if items:
            out[str(cid)] = tuple(sorted(items, key=lambda pair: f"{pair[0]}.md"))
    return out


@dataclass(frozen=True)
class RubricBundle:
    """A rubric with its judge protocol and the initial guidance of its evolvable criteria.

    Texts are kept stripped of surrounding whitespace and each criterion's guidance in file-name
    order (``<name>.md``), as :meth:`load` returns them, so a written bundle loads back equal.

    Attributes:
        rubric: The validated rubric (``rubric.json``).
        protocol: The fixed judge protocol (``protocol.md``), sent as the system message.
        guidance: Criterion id -> ``((name, text), ...)``: the initial guidance candidates
            (``guidance/<criterion_id>/<name>.md``), each 1..800 characters.
    """

    rubric: Rubric
    protocol: str
    guidance: Guidance = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", str(self.protocol).strip())
        object.__setattr__(self, "guidance", _normalised(self.guidance))

    @classmethod
    def load(cls, rubric_id: str, *, root: Path | str | None = None) -> RubricBundle:
        """Load a rubric, its protocol and the guidance of every evolvable criterion.

        Args:
            rubric_id: The rubric's folder name under the prompts root.
            root: A prompts root (a ``judge_prompts`` folder); where it does not hold
                ``rubric_id``, the loaders fall back to the rubrics shipped with the package.

        Raises:
            RubricError: A file is missing or invalid (the message names it), or the bundle
                fails :meth:`validate`.
        """
        root_path = Path(root) if root is not None else None
        rubric = load_rubric(rubric_id, root=root_path)
        protocol = load_protocol(rubric_id, root=root_path)
        guidance = {c.criterion_id: tuple(load_initial_guidance(rubric_id, c.criterion_id, root=root_path))
                    for c in rubric.criteria if c.evolve}
        bundle = cls(rubric=rubric, protocol=protocol, guidance=guidance)
        bundle.validate()
        return bundle

    def validate(self) -> None:
        """Check that the bundle can be written as a rubric folder and calibrated from.

        Raises:
            RubricError: The rubric id is not a plain folder name; the protocol is empty; an
                evolvable criterion has no guidance; guidance names an unknown or non-evolved
                criterion, has an invalid or repeated name, or a text outside 1..800 characters.
        """
        rid = self.rubric.id
        if not re.match(RUBRIC_ID_PATTERN, rid):
            raise RubricError(f"rubric id {rid!r}: use letters, digits, '_', '.' or '-' (a plain folder name), "
                              "starting with a letter or digit.")
        if not self.protocol:
            raise RubricError(f"rubric {rid!r}: {PROTOCOL_FILE} is empty; write the judge protocol text.")
        known = {c.criterion_id: c for c in self.rubric.criteria}
        for cid, pairs in self.guidance.items():
            where = f"rubric {rid!r}: {GUIDANCE_DIR}/{cid}/"
            if cid not in known:
                raise RubricError(f"{where}: no criterion {cid!r} in {RUBRIC_FILE} (known: {sorted(known)}); "
                                  "rename the folder to a criterion id or remove it.")
            if not known[cid].evolve:
                raise RubricError(f"{where}: criterion {cid!r} is not evolved (evolve: false), so its guidance is never "
                                  "used; remove it or set evolve: true.")
            self._check_pairs(where, pairs)
        for c in self.rubric.criteria:
            if c.evolve and not self.guidance.get(c.criterion_id):
                raise RubricError(f"rubric {rid!r}: {GUIDANCE_DIR}/{c.criterion_id}/: no initial guidance for evolvable "
                                  f"criterion {c.criterion_id!r}; write at least one text of 1..{MAX_GUIDANCE_CHARS} "
                                  "characters.")

    @staticmethod
    def _check_pairs(where: str, pairs: tuple[tuple[str, str], ...]) -> None:
        names = [name for name, _ in pairs]
        for name, text in pairs:
            if not re.match(RUBRIC_ID_PATTERN, name):
                raise RubricError(f"{where}{name}.md: guidance name {name!r} is not a plain file name; use letters, "
                                  "digits, '_', '.' or '-'.")
            if names.count(name) > 1:
                raise RubricError(f"{where}{name}.md: guidance name {name!r} is used twice; give each text its own name.")
            if not 1 <= len(text) <= MAX_GUIDANCE_CHARS:
                raise RubricError(f"{where}{name}.md: guidance has {len(text)} characters; it must be "
                                  f"1..{MAX_GUIDANCE_CHARS}. Shorten it (or write one).")

    def files(self) -> dict[str, bytes]:
        """Every file of the rubric folder: relative path (``/``-separated) -> exact bytes.

        ``rubric.json`` holds every field, defaults included (indent 2, UTF-8); the texts end
        with one newline. The same paths and bytes :meth:`write` writes.
        """
        doc = json.dumps(self.rubric.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        out = {RUBRIC_FILE: doc.encode("utf-8"), PROTOCOL_FILE: (self.protocol + "\n").encode("utf-8")}
        for cid, pairs in self.guidance.items():
            for name, text in pairs:
                out[f"{GUIDANCE_DIR}/{cid}/{name}.md"] = (text + "\n").encode("utf-8")
        return out

    def sha256(self) -> dict[str, str]:
        """The sha256 (64 hex digits) of every file of :meth:`files`, by the same relative path."""
        return {path: hashlib.sha256(data).hexdigest() for path, data in self.files().items()}

    def write(self, root: Path | str, *, overwrite: bool = False) -> Path:
        """Write the bundle as the rubric folder ``root/<rubric.id>/`` and return that folder.

        The files are written into a hidden temporary folder beside it, then renamed into place,
        so the folder appears whole or not at all. A folder holding exactly these files is left
        as it is.

        Args:
            root: The prompts root to write into (created when missing).
            overwrite: Replace an existing folder whose files differ.

        Raises:
            RubricError: The bundle fails :meth:`validate`; the folder exists, differs and
                ``overwrite`` is false; or the path is a file.
        """
        self.validate()
        files = self.files()
        dest = Path(root) / self.rubric.id
        if dest.exists() and not dest.is_dir():
            raise RubricError(f"{dest}: exists and is not a folder; remove it or write the rubric under another root.")
        if dest.is_dir():
            if _folder_files(dest) == files:
                return dest
            if not overwrite:
                raise RubricError(f"{dest}: a different rubric folder is already there; refusing to replace it. Pass "
                                  "--overwrite (overwrite=True in Python) to replace it, or choose another id or root.")
        _replace_folder(dest, files)
        return dest


def _folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by ``/``-separated relative path (hidden files included)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _replace_folder(dest: Path, files: Mapping[str, bytes]) -> None:
    """:func:`evolve.runs.replace_folder`, imported only when writing (``evolve.runs`` pulls in
    the model client, which reading a rubric never needs)."""
    from evolve.runs import replace_folder

    replace_folder(dest, files)
