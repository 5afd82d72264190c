"""The citation lint (scripts/doc_refs.py): parsing, checking and the rewrite of old forms.

doc-refs: skip-file (the examples below cite sections that do not exist on purpose)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import doc_refs  # noqa: E402

CONTRACT = """# Contract
## 3. Reconcile
### 3.4 Main flow
### 3.5a Finalizers
## 5. Deletion
### 5.1 Order
## 6. Legacy
### 6.2 Settings
### 6.4 Removal
## Appendix A — Notes
"""
DIFFERENCES = """# Differences
## D1 No fixed requeues
## D7 The controller creates `Config/default`
## D10 Backoff
## Out of scope
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "contract.md").write_text(CONTRACT)
    (tmp_path / "docs" / "differences.md").write_text(DIFFERENCES)
    (tmp_path / "README.md").write_text("# Readme\n## Configuration reference\n")
    (tmp_path / "src").mkdir()
    return tmp_path


def refs(text: str) -> list[tuple[str | None, list[str]]]:
    return [(c.doc, [r.value for r in c.refs]) for c in doc_refs.citations(text)]


def check(repo: Path, text: str, name: str = "src/mod.py") -> list[str]:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return [str(p) for p in doc_refs.check_tree(repo, ["src"])]


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see docs/contract.md §3.4.", [("docs/contract.md", ["3.4"])]),
        ("docs/contract.md §3.4, §5.1 and §6.2", [("docs/contract.md", ["3.4", "5.1", "6.2"])]),
        # step 3 of §5.1 cites §5.1; §6.2-6.4 is a range and cites both ends
        ("docs/contract.md §5.1-3", [("docs/contract.md", ["5.1"])]),
        ("docs/contract.md §6.2-6.4", [("docs/contract.md", ["6.2", "6.4"])]),
        ("docs/contract.md §5.1 step 6", [("docs/contract.md", ["5.1"])]),
        ("docs/differences.md D5, D6 and D9", [("docs/differences.md", ["D5", "D6", "D9"])]),
        ("docs/contract.md Appendix A", [("docs/contract.md", ["Appendix A"])]),
        ('docs/platform.md, "Deployment"', [("docs/platform.md", ["Deployment"])]),
        ("README.md", [("README.md", [])]),
        # a wrapped comment keeps its references with the document
        ("# docs/contract.md §3.6 and\n# §5.4; more", [("docs/contract.md", ["3.6", "5.4"])]),
        # one kind per list: a D after sections starts a citation of its own
        (
            "(docs/contract.md §2, D3, D4)",
            [("docs/contract.md", ["2"]), (None, ["D3", "D4"])],
        ),
        ("(decision D7)", [(None, ["D7"])]),
        ("upstream §3.1", [(None, ["3.1"])]),
        # not citations
        ("KEP-5504, RFC3339, sha256, DD7, D7x, x/D7", []),
        ("a = 'D1'  # and §", [(None, ["D1"])]),
    ],
)
def test_citations(text: str, expected: list[tuple[str | None, list[str]]]) -> None:
    assert refs(text) == expected


def test_quotes_are_titles_only_right_after_a_document() -> None:
    text = '"""Condition reasons (D8)."""\nx = "docs" "§1"'
    assert refs(text) == [(None, ["D8"]), (None, ["1"])]


def test_headings() -> None:
    found = doc_refs.headings(CONTRACT + DIFFERENCES)
    assert found.ids == {
        "3",
        "3.4",
        "3.5a",
        "5",
        "5.1",
        "6",
        "6.2",
        "6.4",
        "Appendix A",
        "D1",
        "D7",
        "D10",
    }
    assert "out of scope" in found.titles
    assert "the controller creates `config/default`" in found.titles


# -- checking -----------------------------------------------------------------------------------


def test_valid_citations_pass(repo: Path) -> None:
    text = (
        '"""Deletion (docs/contract.md §5.1-3, §6.2-6.4; docs/differences.md D1, D7 and D10).\n'
        "\n"
        'See README.md and docs/contract.md Appendix A, docs/differences.md "Out of scope".\n'
        '"""\n'
    )
    assert check(repo, text) == []


def test_missing_document_section_and_id_are_reported_with_file_and_line(repo: Path) -> None:
    text = (
        "# fine: docs/contract.md §3.4\n"
        "# docs/contract.md §3.7\n"
        "# docs/differences.md D99\n"
        "# docs/nowhere.md §1\n"
        "# see decisions.md\n"
        '# docs/differences.md "In scope"\n'
    )
    assert check(repo, text) == [
        "src/mod.py:2: docs/contract.md has no heading §3.7",
        "src/mod.py:3: docs/differences.md has no heading D99",
        "src/mod.py:4: docs/nowhere.md: no such document in the repository",
        "src/mod.py:5: decisions.md: no such document in the repository",
        'src/mod.py:6: docs/differences.md has no heading "In scope"',
    ]


def test_references_without_a_document_are_reported(repo: Path) -> None:
    text = "x = 1\n# (decision D7; upstream §3.1)\n"
    assert check(repo, text) == [
        "src/mod.py:2: D7 cites no document (write e.g. docs/differences.md D7)",
        "src/mod.py:2: §3.1 cites no document (write e.g. docs/contract.md §3.1)",
    ]


def test_relative_to_the_citing_file(repo: Path) -> None:
    (repo / "src" / "pkg").mkdir()
    (repo / "src" / "pkg" / "NOTES.md").write_text("# Notes\n## 1. One\n")
    assert check(repo, "# NOTES.md §1\n", "src/pkg/mod.py") == []


def test_a_document_outside_the_repository_does_not_count(repo: Path) -> None:
    (repo.parent / "outside.md").write_text("# Outside\n")
    assert check(repo, "# ../outside.md\n") == [
        "src/mod.py:1: ../outside.md: no such document in the repository"
    ]


def test_skip_marker(repo: Path) -> None:
    assert check(repo, "# doc-refs: skip-file\n# docs/contract.md §99\n") == []


# -- rewriting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("(upstream-behaviour.md §3.4)", "(docs/contract.md §3.4)"),
        ("(upstream-behaviour.md)", "(docs/contract.md)"),
        ("rule of upstream §3.1,", "rule of docs/contract.md §3.1,"),
        ("(decisions.md, D7)", "(docs/differences.md D7)"),
        ("(decision D2)", "(docs/differences.md D2)"),
        ("(decisions D5, D6 and D9;", "(docs/differences.md D5, D6 and D9;"),
        ("# D6", "# docs/differences.md D6"),
        ("(upstream §4, D7)", "(docs/contract.md §4, docs/differences.md D7)"),
        ("(§4.1, §4.2)", "(docs/contract.md §4.1, §4.2)"),
        ("(step 5, §6.1)", "(step 5, docs/contract.md §6.1)"),
        ('(platform-shape.md, "Deployment")', "(docs/platform.md §1)"),
        ("(platform-shape.md)", "(docs/platform.md)"),
        ('(decisions.md, "Out of scope")', '(docs/differences.md, "Out of scope")'),
        (
            "(upstream-behaviour.md §3.6 and\n# §5.4; decisions D5, D6, D9)",
            "(docs/contract.md §3.6 and\n# §5.4; docs/differences.md D5, D6, D9)",
        ),
    ],
)
def test_rewrite(old: str, new: str) -> None:
    assert doc_refs.rewrite_text(old) == new
    assert doc_refs.rewrite_text(new) == new  # idempotent


def test_rewrite_then_check(repo: Path) -> None:
    old = "# (upstream-behaviour.md §3.4, §5.1-3; decision D7; upstream §6.2-6.4)\n"
    path = repo / "src" / "mod.py"
    path.write_text(old)
    assert doc_refs.rewrite_tree(repo, ["src"]) == [path]
    assert doc_refs.rewrite_tree(repo, ["src"]) == []
    assert doc_refs.check_tree(repo, ["src"]) == []
