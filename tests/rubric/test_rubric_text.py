"""Rubric files (rubric.json, protocol.md, initial guidance) refuse control and bidirectional-override
characters, naming the file, the field and the position (issue 24 item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evolve.errors import RubricError
from evolve.rubric import load_initial_guidance, load_protocol, load_rubric, shipped_prompts_root


@pytest.fixture()
def own(tmp_path: Path) -> Path:
    shutil.copytree(shipped_prompts_root() / "kqa-entailment", tmp_path / "kqa-entailment")
    return tmp_path / "kqa-entailment"


def test_clean_copy_loads(own: Path) -> None:
    assert load_rubric("kqa-entailment", root=own.parent).id == "kqa-entailment"


def test_rubric_json_string_with_bidi_override_is_refused(own: Path) -> None:
    raw = json.loads((own / "rubric.json").read_text(encoding="utf-8"))
    raw["title"] = "Entail\u202ement"
    (own / "rubric.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(RubricError, match=r"rubric.json: field 'title' holds U\+202E RIGHT-TO-LEFT OVERRIDE at character 7"):
        load_rubric("kqa-entailment", root=own.parent)


def test_protocol_with_nul_is_refused(own: Path) -> None:
    (own / "protocol.md").write_text("Judge the text.\x00 Then stop.", encoding="utf-8")
    with pytest.raises(RubricError, match=r"protocol.md: the text holds U\+0000 NULL at character 16"):
        load_protocol("kqa-entailment", root=own.parent)


def test_guidance_file_with_escape_is_refused(own: Path) -> None:
    folder = next(p for p in (own / "guidance").iterdir() if p.is_dir())
    (folder / "zz-bad.md").write_text("Be strict\x1b[8m hidden", encoding="utf-8")
    with pytest.raises(RubricError, match=r"zz-bad.md: the text holds U\+001B ESCAPE at character 10\. Remove"):
        load_initial_guidance("kqa-entailment", folder.name, root=own.parent)
