"""The one base of evolve's records.

Every record that crosses a boundary - a rating, a rubric, a setting, a run output, a model's
reply - is a pydantic model that is *frozen* (a record read is never changed in place; make a
changed copy with ``model_copy(update=...)``) and *forbids extra fields* (a misspelt key in a
file or a config is an error naming it, never silently dropped). :class:`Record` carries both
rules, so a record class states only its fields.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Record"]


class Record(BaseModel):
    """A frozen pydantic model that refuses unknown fields (the base of evolve's records)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
