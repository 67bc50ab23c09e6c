"""User text may not carry control or bidirectional-override characters into prompts (issue 24 item 5)."""

from __future__ import annotations

import pytest

from evolve.data import TEXT_PROBLEM_FIX, text_problem


@pytest.mark.parametrize("text", ["", "plain", "tab\there", "lines\nand\r\nreturns", "Überweisung – ½ °C", "שלום עולם"])
def test_ordinary_text_passes(text: str) -> None:
    assert text_problem(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ab\x00c", "U+0000 NULL at character 3"),
        ("x\u202eevil", "U+202E RIGHT-TO-LEFT OVERRIDE at character 2"),
        ("\u2066iso", "U+2066 LEFT-TO-RIGHT ISOLATE at character 1"),
        ("esc\x1b[31m", "U+001B ESCAPE at character 4"),
        ("c1\x85", "U+0085 CONTROL CHARACTER at character 3"),
        ("del\x7f", "U+007F DELETE at character 4"),
    ],
)
def test_forbidden_character_is_named_with_its_position(text: str, expected: str) -> None:
    problem = text_problem(text)
    assert problem is not None and expected in problem
    assert not any(ch in problem for ch in "\x00\u202e\u2066\x1b\x85\x7f")  # never echoed raw


def test_count_of_all_forbidden_characters_is_given() -> None:
    assert text_problem("a\x00b\x00c\u202e") == "holds U+0000 NULL at character 2 (3 such characters in all)"


def test_non_strings_are_left_to_the_type_check() -> None:
    assert text_problem(12345) is None and text_problem(None) is None
    assert "Remove the character" in TEXT_PROBLEM_FIX
