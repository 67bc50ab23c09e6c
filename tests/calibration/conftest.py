"""Fixtures shared by the calibration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.data import load_pack, write_pack
from evolve.splits import make_splits, write_splits
from tests.conftest import make_tiny_pack


@pytest.fixture
def pack_and_splits(tmp_path: Path) -> tuple[Path, Path]:
    """40 targets (20 cases): about 16 training targets, enough for racing batches of 4, 8, 16."""
    write_pack(make_tiny_pack(20), tmp_path / "pack")
    write_splits(make_splits(load_pack(tmp_path / "pack"), holdout_fraction=0.0, validation_fraction=0.5, seed=3),
                 tmp_path / "splits")
    return tmp_path / "pack", tmp_path / "splits"
