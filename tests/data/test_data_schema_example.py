"""Committed artefacts: the JSON schemas match the models; the synthetic example pack is valid."""

from __future__ import annotations

import json
from pathlib import Path

from evolve.data import check_pack, load_pack, pack_json_schemas, write_pack, write_pack_schemas

from .conftest import EXAMPLE_PACK, REPO_ROOT, SCHEMA_DIR

REGENERATE = "python -c \"from evolve.data import write_pack_schemas; write_pack_schemas('ratings/schema')\""


def test_committed_schemas_match_the_models() -> None:
    schemas = pack_json_schemas()
    assert set(schemas) == {"pack", "case", "target", "rating"}
    for key, schema in schemas.items():
        path = SCHEMA_DIR / f"{key}.schema.json"
        assert path.is_file(), f"{path} is missing; regenerate with {REGENERATE}"
        assert json.loads(path.read_text(encoding="utf-8")) == schema, (
            f"{path} is out of date with evolve/data/_models.py; regenerate with {REGENERATE}"
        )


def test_written_schema_files_are_byte_identical(tmp_path: Path) -> None:
    for path in write_pack_schemas(tmp_path):
        assert path.read_bytes() == (SCHEMA_DIR / path.name).read_bytes()


def test_schemas_describe_the_csv_row() -> None:
    rating = pack_json_schemas()["rating"]
    assert list(rating["properties"]) == ["case_id", "target_id", "rater_id", "criterion", "score",
                                          "not_evaluable", "comment"]
    assert rating["additionalProperties"] is False


def test_example_pack_is_valid_and_synthetic() -> None:
    summary = check_pack(EXAMPLE_PACK)
    assert summary.rubric.id == "kqa-entailment"
    assert 3 <= summary.n_cases <= 6
    assert len(summary.raters) == 2
    assert summary.n_not_evaluable >= 1
    pack = load_pack(EXAMPLE_PACK)
    for record in (*pack.cases, *pack.targets):
        assert record.text.startswith("[SYNTHETIC]")
    assert "synthetic" in pack.manifest.description.lower()


def test_example_pack_is_in_canonical_form(tmp_path: Path) -> None:
    """Re-writing the example gives the committed bytes (so it doubles as a format reference)."""
    out = write_pack(load_pack(EXAMPLE_PACK), tmp_path / "example")
    for name in ("pack.json", "cases.jsonl", "targets.jsonl", "ratings.csv"):
        assert (out / name).read_bytes() == (EXAMPLE_PACK / name).read_bytes()


def test_ratings_folder_ignores_imported_packs() -> None:
    rules = (REPO_ROOT / "ratings" / ".gitignore").read_text(encoding="utf-8").split()
    assert "/*" in rules
    assert {"!/README.md", "!/schema/", "!/example/", "!/.gitignore"} <= set(rules)
