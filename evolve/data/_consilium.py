"""The consilium record: what a multi-agent consilium produced for one case, on disk.

A :class:`ConsiliumRecord` is one JSON file per case and producing condition (consilium paper, benchmark runner): the
specialist panel (roles, the primary role, why each was called and why this panel), each
role's pre-consilium reasoning and opinion, the final report, and the consilium's outcome
(rounds, consensus, stop reason). Physicians rate these records in their workbooks (consilium paper, physician spreadsheets)
and the benchmark runner writes them.

File naming: ``<record_file_stem(case_id)>[<separator><anything>].json`` in one folder, e.g.
``10.1056_NEJMcpc2300900.json`` or ``10.1056_NEJMcpc2300900.structured.json``: the file name
starts with the case id, with ``/`` and ``:`` replaced by ``_`` (consilium paper, physician spreadsheets: "the row id matches
the report file name prefix"). The ``case_id`` inside the file is authoritative; a file whose
name does not start with it is rejected as misfiled.

:func:`consilium_targets` turns a record into the rating-pack targets the rubric's
components name: per role a ``reasoning`` and an ``opinion`` target, one ``final`` target and
one ``case`` target describing the panel (rated on the case-level criteria).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from evolve.data._models import _ID_PATTERN, Target
from evolve.data._pack import MAX_REPORTED_PROBLEMS
from evolve.errors import DataError, Problems, path_problem
from evolve.records import Record

__all__ = [
    "MAX_PANEL_ROLES",
    "ConsiliumRecord",
    "PanelRole",
    "RoleOutput",
    "consilium_targets",
    "load_consilium_records",
    "record_file_stem",
    "role_slug",
]

MAX_PANEL_ROLES = 5
"""Largest panel a consilium may assemble (consilium paper, role assignment: 1-5 roles)."""

_CONDITION_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9._\-]*)?$"
_NO_CONDITION = "c"


class PanelRole(Record):
    """One clinical role on the consilium's panel (consilium paper, role assignment).

    Attributes:
        name: The role as the role-assignment step named it, e.g. ``Cardiologist``.
        primary: Whether this is the primary role (metadata only; exactly one per panel).
        rationale: Why the role was called for this case.
    """

    name: str = Field(min_length=1)
    primary: bool = False
    rationale: str = ""


class RoleOutput(Record):
    """One role's pre-consilium output (consilium paper, pre-consilium opinions), fixed before the consilium starts.

    Attributes:
        role: Name of the role that wrote it (one of the panel's role names).
        reasoning: The role's reasoning, without its closing opinion (component ``reasoning``).
        opinion: The role's closing clinical opinion (component ``opinion``).
    """

    role: str = Field(min_length=1)
    reasoning: str = Field(min_length=1)
    opinion: str = Field(min_length=1)


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def role_slug(name: str, position: int = 1) -> str:
    """A role name as an id segment: ASCII lower case, runs of other characters as ``-``.

    Accents are dropped (``Neurólogo`` -> ``neurologo``); a name with no ASCII letter or digit
    left becomes ``role-<position>``.

    Args:
        name: The role name.
        position: 1-based position of the role in its panel (used only for the fallback).
    """
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug or f"role-{position}"


def record_file_stem(case_id: str) -> str:
    """The file name prefix of a case's consilium record: the id with ``/`` and ``:`` as ``_``."""
    return case_id.replace("/", "_").replace(":", "_")


class ConsiliumRecord(Record):
    """What a consilium produced for one case under one condition (one JSON file).

    Attributes:
        version: Record format version (currently 1).
        case_id: The case (its DOI by default); matches the case file and the workbooks.
        model: The generating model id (copied onto every target).
        condition: Producing condition, e.g. ``free-form`` or ``structured`` (consilium paper, pre-consilium opinions); an id
            segment: letters, digits, ``.``, ``_``, ``-``; copied onto every target.
        topology: ``single`` or ``N+1`` style topology (free text, e.g. ``3+1``).
        roles: The panel, 1-5 roles, exactly one primary, names unique ignoring case and
            surrounding/duplicate whitespace (consilium paper, role assignment).
        panel_rationale: Why this panel as a whole.
        outputs: Exactly one :class:`RoleOutput` per role, in any order.
        final: The consilium's final report (non-empty).
        rounds: Review rounds completed, if the consilium ran.
        consensus: Whether all roles voted yes in the end.
        stop_reason: Why the consilium stopped (consensus, no substantive change, repeated
            report state, round limit ...).
    """

    version: Literal[1] = 1
    case_id: str = Field(pattern=_ID_PATTERN)
    model: str = ""
    condition: str = Field(default="", pattern=_CONDITION_PATTERN)
    topology: str = "single"
    roles: tuple[PanelRole, ...] = Field(min_length=1, max_length=MAX_PANEL_ROLES)
    panel_rationale: str = ""
    outputs: tuple[RoleOutput, ...]
    final: str = Field(min_length=1)
    rounds: int | None = Field(default=None, ge=0)
    consensus: bool | None = None
    stop_reason: str | None = None

    @model_validator(mode="after")
    def _panel_is_consistent(self) -> ConsiliumRecord:
        seen: dict[str, str] = {}
        slugs: dict[str, str] = {}
        for k, role in enumerate(self.roles, start=1):
            key = _key(role.name)
            if key in seen:
                raise ValueError(
                    f"roles: duplicate role name {role.name!r} (same as {seen[key]!r} ignoring case); "
                    "give every role a distinct name"
                )
            seen[key] = role.name
            slug = role_slug(role.name, k)
            if slug in slugs:
                raise ValueError(
                    f"roles: role names {slugs[slug]!r} and {role.name!r} give the same target id segment "
                    f"{slug!r}; rename one of them"
                )
            slugs[slug] = role.name
        primaries = [r.name for r in self.roles if r.primary]
        if len(primaries) != 1:
            raise ValueError(
                f"roles: exactly one role must have primary=true, found {len(primaries)}"
                + (f" ({primaries})" if primaries else "")
            )
        covered: dict[str, str] = {}
        for out in self.outputs:
            key = _key(out.role)
            if key not in seen:
                raise ValueError(
                    f"outputs: role {out.role!r} is not on the panel {[r.name for r in self.roles]}; "
                    "use the exact role names of 'roles'"
                )
            if key in covered:
                raise ValueError(f"outputs: role {out.role!r} has more than one output; keep one per role")
            covered[key] = out.role
        absent = [r.name for r in self.roles if _key(r.name) not in covered]
        if absent:
            raise ValueError(f"outputs: no output for role(s) {absent}; every role writes one (consilium paper, role assignment)")
        return self

    @property
    def primary_role(self) -> PanelRole:
        """The primary role of the panel."""
        return next(r for r in self.roles if r.primary)

    def role(self, name: str) -> PanelRole:
        """The panel role with this name, ignoring case and extra whitespace.

        Raises:
            KeyError: No such role on the panel.
        """
        for r in self.roles:
            if _key(r.name) == _key(name):
                return r
        raise KeyError(f"no role {name!r} on the panel of {self.case_id!r} (roles: {[r.name for r in self.roles]})")

    def output(self, name: str) -> RoleOutput:
        """The output of the role with this name, ignoring case and extra whitespace.

        Raises:
            KeyError: No such role on the panel.
        """
        for o in self.outputs:
            if _key(o.role) == _key(name):
                return o
        raise KeyError(f"no output of role {name!r} for {self.case_id!r}")

    def target_prefix(self) -> str:
        """``<case_id>:<condition or 'c'>``, the common prefix of this record's target ids."""
        return f"{self.case_id}:{self.condition or _NO_CONDITION}"

    def role_target_id(self, name: str, component: Literal["reasoning", "opinion"]) -> str:
        """Target id of one role's ``reasoning`` or ``opinion`` (``<prefix>:<role-slug>:<component>``).

        Raises:
            KeyError: No such role on the panel.
        """
        role = self.role(name)
        position = self.roles.index(role) + 1
        return f"{self.target_prefix()}:{role_slug(role.name, position)}:{component}"

    def final_target_id(self) -> str:
        """Target id of the final report (``<prefix>:final``)."""
        return f"{self.target_prefix()}:final"

    def case_target_id(self) -> str:
        """Target id of the panel description rated on the case-level criteria (``<prefix>:case``)."""
        return f"{self.target_prefix()}:case"


def _panel_text(record: ConsiliumRecord) -> str:
    n = len(record.roles)
    lines = [f"Specialist panel ({n} role{'s' if n != 1 else ''}):"]
    for k, role in enumerate(record.roles, start=1):
        head = f"{k}. {role.name}" + (" (primary)" if role.primary else "")
        lines.append(f"{head}: {role.rationale.strip()}" if role.rationale.strip() else head)
    if record.panel_rationale.strip():
        lines += ["", f"Why this panel: {record.panel_rationale.strip()}"]
    return "\n".join(lines)


def consilium_targets(record: ConsiliumRecord) -> list[Target]:
    """The rating-pack targets of one consilium record, in a fixed order.

    For each role in panel order: its ``reasoning`` target then its ``opinion`` target
    (``role`` = the role name); then one ``final`` target (the final report) and one ``case``
    target whose text lists the panel - each role, the primary one marked, with its rationale,
    then the panel rationale - which the case-level criteria (panel adequacy, case complexity,
    overall quality) are rated on. ``model`` and ``condition`` are copied from the record.

    Target ids (all match the pack id pattern):
    ``<case_id>:<condition or 'c'>:<role-slug>:reasoning`` / ``...:opinion``,
    ``<case_id>:<condition or 'c'>:final`` and ``<case_id>:<condition or 'c'>:case``.

    Args:
        record: A validated consilium record.

    Returns:
        ``2 * len(record.roles) + 2`` targets.
    """
    common = {"case_id": record.case_id, "model": record.model, "condition": record.condition}
    targets: list[Target] = []
    for role in record.roles:
        output = record.output(role.name)
        targets.append(Target(target_id=record.role_target_id(role.name, "reasoning"), component="reasoning",
                              role=role.name, text=output.reasoning, **common))
        targets.append(Target(target_id=record.role_target_id(role.name, "opinion"), component="opinion",
                              role=role.name, text=output.opinion, **common))
    targets.append(Target(target_id=record.final_target_id(), component="final", text=record.final, **common))
    targets.append(Target(target_id=record.case_target_id(), component="case", text=_panel_text(record), **common))
    return targets


def _name_matches(stem: str, case_id: str) -> bool:
    prefix = record_file_stem(case_id)
    return stem == prefix or (stem.startswith(prefix) and not stem[len(prefix)].isalnum())


def load_consilium_records(directory: Path | str) -> dict[str, list[ConsiliumRecord]]:
    """Read every ``*.json`` consilium record in a folder (not recursive), grouped by case.

    Files are read in file-name order; hidden files (``.name``) are skipped. Each file holds one
    JSON object that validates as :class:`ConsiliumRecord`.

    Args:
        directory: The folder of record files (e.g. a benchmark run's ``outputs/``).

    Returns:
        ``case_id -> records`` (records in file-name order; case ids in order of first file).

    Raises:
        DataError: The folder is missing or holds no ``*.json`` file; a file is not valid JSON,
            is not an object or fails validation (each field problem is named); a file's name
            does not start with its case id (``/`` and ``:`` written as ``_``); two files hold
            the same (case_id, condition). All problems are collected into one error.
    """
    directory = Path(directory)
    if (problem := path_problem(directory, "folder")) is not None:
        what = "no such folder of consilium records" if problem == "does not exist" else f"the records folder {problem}"
        raise DataError(f"{directory}: {what}. Pass the folder that holds the *.json records.")
    files = sorted(p for p in directory.glob("*.json") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataError(f"{directory}: no *.json consilium records found. Pass the folder the benchmark runner wrote.")
    issues = Problems(f"cannot load consilium records from {directory}", DataError, MAX_REPORTED_PROBLEMS)
    out: dict[str, list[ConsiliumRecord]] = {}
    first_file: dict[tuple[str, str], str] = {}
    for path in files:
        try:
            raw = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as exc:
            issues.add(f"{path.name}, line {exc.lineno}", f"invalid JSON ({exc.msg})", "Fix the JSON syntax.")
            continue
        except UnicodeDecodeError as exc:
            issues.add(path.name, f"not UTF-8 text ({exc.reason})", "Save the file as UTF-8.")
            continue
        if not isinstance(raw, dict):
            issues.add(path.name, f"expected one JSON object, got {type(raw).__name__}", "Write the record as one JSON object.")
            continue
        try:
            record = ConsiliumRecord.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                msg = err["msg"].removeprefix("Value error, ")
                if not loc:  # a whole-record check names its field as "<field>: ..."
                    field, sep, rest = msg.partition(": ")
                    loc, msg = (field, rest) if sep and field.isidentifier() else ("(record)", msg)
                fix = "Add the field." if err["type"] == "missing" else (
                    "Remove the field (not part of the record format)." if err["type"] == "extra_forbidden"
                    else "Correct the value.")
                issues.add(f"{path.name}, field '{loc}'", msg, fix)
            continue
        if not _name_matches(path.stem, record.case_id):
            issues.add(
                f"{path.name}, field 'case_id'",
                f"case_id {record.case_id!r} does not match the file name (expected it to start with "
                f"{record_file_stem(record.case_id)!r})",
                f"Rename the file to {record_file_stem(record.case_id)}.json (or <that>.<condition>.json), "
                "or correct case_id.",
            )
            continue
        key = (record.case_id, record.condition)
        if key in first_file:
            issues.add(
                f"{path.name}, field 'condition'",
                f"a second record for case {record.case_id!r} with condition {record.condition!r} "
                f"(first in {first_file[key]})",
                "Keep one record per case and condition, or give them different conditions.",
            )
            continue
        first_file[key] = path.name
        out.setdefault(record.case_id, []).append(record)
    issues.raise_if_any()
    return out
