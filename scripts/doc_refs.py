"""Citations of documents in the code: find them, check them, rewrite the old forms.

doc-refs: skip-file (this module spells out the forms it looks for)

A citation is a document (any ``*.md`` path) followed by what it cites in it, e.g.
``docs/contract.md §3.4``, ``docs/contract.md §5.1-3`` (step 3 of §5.1),
``docs/contract.md §6.2-6.4`` (a range), ``docs/differences.md D5, D6 and D9``,
``docs/contract.md Appendix A`` or ``docs/platform.md "Deployment"`` (a heading's title).
References may follow each other separated by commas, ``and``/``or``, and line breaks inside a
comment, so a citation can wrap. A ``§N`` or ``Dn`` that follows no document is an error: the
reader would not know where to look.

Headings of the cited document give what exists: ``## 3. …`` and ``### 3.4 …`` give sections
``3`` and ``3.4``, ``## D7 …`` gives ``D7``, ``## Appendix A …`` gives ``Appendix A``; a quoted
title matches a heading whose title starts with it (case ignored).

A file that contains the marker ``doc-refs: skip-file`` is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SKIP_MARKER = "doc-refs: skip-file"
SCANNED = ("src", "lib", "tests", "scripts", "benchmarks", "tox.ini", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".j2", ".yaml", ".yml", ".toml", ".ini", ".sh", ".txt", ".md", ".cfg"}

_DOC = r"(?<![\w/.-])(?P<doc>(?:[\w.-]+/)*[\w.-]+\.md)\b"
_SEC = r"(?P<sec>§\s?(?P<sec_a>\d+(?:\.\d+)*[a-z]?)(?:[-\u2013](?P<sec_b>\d+(?:\.\d+)*[a-z]?))?)"
_DID = r"(?<![\w/.-])(?P<did>D\d+)(?![\w])"
_APP = r"(?P<app>Appendix [A-Z])\b"
_QUOTE = r"(?P<quote>\"[^\"\n]{1,80}\")"
TOKEN = re.compile("|".join((_DOC, _SEC, _DID, _APP)))
# What may stand between a document and its references, or between two references: commas,
# semicolons, spaces, "and"/"or", and a line break with a comment's leading "#" or "*".
SEPARATOR = re.compile(r"(?:[\s,;#*]|\band\b|\bor\b|\bstep\s+\d+\b)*")
# A heading title in quotes, right after a document: ``docs/platform.md, "Deployment"``.
TITLE = re.compile(r"[\s,]*" + _QUOTE)


@dataclass(frozen=True)
class Ref:
    """One thing cited: ``§3.4``, ``D7``, ``Appendix A`` or a quoted heading title."""

    kind: str  # "section", "id", "appendix", "title"
    value: str
    start: int  # offset in the text
    end: int = 0


@dataclass
class Citation:
    doc: str | None  # None: references that follow no document
    start: int
    end: int
    refs: list[Ref] = field(default_factory=list)


def _refs_of(match: re.Match[str]) -> list[Ref]:
    start, end = match.start(), match.end()
    if match.group("sec"):
        refs = [Ref("section", match.group("sec_a"), start, end)]
        second = match.group("sec_b")
        if second and "." in second:  # §6.2-6.4 is a range; §5.1-3 is step 3 of §5.1
            refs.append(Ref("section", second, start, end))
        return refs
    if match.group("did"):
        return [Ref("id", match.group("did"), start, end)]
    return [Ref("appendix", match.group("app"), start, end)]


def _compatible(cite: Citation, ref: Ref) -> bool:
    """A list of references keeps to one kind: ``§2, D3`` is two citations, not one."""
    if not cite.refs:
        return cite.doc is not None
    return (cite.refs[-1].kind == "id") == (ref.kind == "id")


def citations(text: str) -> list[Citation]:
    """Every document mention with the references attached to it, and every reference that
    follows no document (as a Citation whose ``doc`` is None), in order of appearance."""
    found: list[Citation] = []
    current: Citation | None = None
    for match in TOKEN.finditer(text):
        if current is not None and match.start() < current.end:
            continue  # inside a quoted title
        if match.group("doc"):
            current = Citation(match.group("doc"), match.start(), match.end())
            found.append(current)
            while title := TITLE.match(text, current.end):
                current.refs.append(Ref("title", title.group("quote")[1:-1], title.start("quote")))
                current.end = title.end()
            continue
        refs = _refs_of(match)
        attached = (
            current is not None
            and _compatible(current, refs[0])
            and SEPARATOR.fullmatch(text, current.end, match.start()) is not None
        )
        if current is not None and attached:
            current.refs.extend(refs)
            current.end = match.end()
            continue
        current = Citation(None, match.start(), match.end(), refs)
        found.append(current)
    return found


@dataclass(frozen=True)
class Headings:
    ids: frozenset[str]
    titles: tuple[str, ...]

    def has(self, ref: Ref) -> bool:
        if ref.kind == "title":
            wanted = " ".join(ref.value.split()).lower()
            return any(title.startswith(wanted) for title in self.titles)
        return ref.value in self.ids


_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.MULTILINE)
_HEADING_ID = re.compile(
    r"^(?:§\s?)?(?P<num>\d+(?:\.\d+)*[a-z]?)\.?(?:\s+|$)"
    r"|^(?P<did>D\d+)\b"
    r"|^(?P<app>Appendix [A-Z])\b"
)


def headings(markdown: str) -> Headings:
    ids: set[str] = set()
    titles: list[str] = []
    for match in _HEADING.finditer(markdown):
        title = match.group("title")
        rest = title
        if m := _HEADING_ID.match(title):
            ids.add(m.group("num") or m.group("did") or m.group("app"))
            rest = title[m.end() :]
        titles.append(" ".join(rest.strip(" .:—-").split()).lower())
    return Headings(frozenset(ids), tuple(titles))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _describe(ref: Ref) -> str:
    if ref.kind == "section":
        return f"§{ref.value}"
    if ref.kind == "title":
        return f'"{ref.value}"'
    return ref.value


def _suggest(ref: Ref) -> str:
    if ref.kind == "id":
        return f"docs/differences.md {ref.value}"
    return f"docs/contract.md {_describe(ref)}"


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def check_text(text: str, path: str, root: Path, cache: dict[Path, Headings]) -> list[Problem]:
    """Problems of one file's citations; ``path`` is relative to ``root``."""
    if SKIP_MARKER in text:
        return []
    problems: list[Problem] = []
    for cite in citations(text):
        line = _line_of(text, cite.start)
        if cite.doc is None:
            for ref in cite.refs:
                problems.append(
                    Problem(
                        path,
                        _line_of(text, ref.start),
                        f"{_describe(ref)} cites no document (write e.g. {_suggest(ref)})",
                    )
                )
            continue
        target = resolve(cite.doc, path, root)
        if target is None:
            problems.append(Problem(path, line, f"{cite.doc}: no such document in the repository"))
            continue
        if not cite.refs:
            continue
        if target not in cache:
            cache[target] = headings(target.read_text(encoding="utf-8"))
        for ref in cite.refs:
            if not cache[target].has(ref):
                problems.append(
                    Problem(
                        path,
                        _line_of(text, ref.start),
                        f"{cite.doc} has no heading {_describe(ref)}",
                    )
                )
    return problems


def resolve(doc: str, path: str, root: Path) -> Path | None:
    """The document a citation names: relative to the repository root, else to the citing
    file's directory."""
    for candidate in (root / doc, (root / path).parent / doc):
        try:
            resolved = candidate.resolve()
            resolved.relative_to(root.resolve())
        except ValueError:
            continue
        if resolved.is_file():
            return resolved
    return None


def scanned_files(root: Path, targets: Iterable[str] = SCANNED) -> Iterator[Path]:
    for name in targets:
        top = root / name
        if top.is_file():
            yield top
            continue
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in TEXT_SUFFIXES or (path.suffix == "" and _is_script(path)):
                yield path


def _is_script(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def check_tree(root: Path, targets: Iterable[str] = SCANNED) -> list[Problem]:
    cache: dict[Path, Headings] = {}
    problems: list[Problem] = []
    for file in scanned_files(root, targets):
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems.extend(check_text(text, str(file.relative_to(root)), root, cache))
    return problems


# -- rewriting the old forms -------------------------------------------------------------------
# The notes these citations used to point at lived outside the repository. Their content is now
# in docs/: the behaviour contract keeps the old section numbers, the differences keep D1-D9.

PLATFORM_SECTIONS = {
    # Titles of the old platform notes → sections of docs/platform.md.
    "deployment": "§1",
    "service account and its permissions": "§2",
}

_OLD_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"upstream-behaviour\.md"), "docs/contract.md"),
    (re.compile(r"\bupstream (?=§)"), "docs/contract.md "),
    # "decisions.md, D7", "decision D7", "decisions D5, D6 and D9" → the group gets its document
    # below; here only the old words go.
    (re.compile(r"\bdecisions\.md,?\s+(?=D\d)"), ""),
    (re.compile(r"\bdecisions? (?=D\d)"), ""),
    (re.compile(r"\bdecisions\.md\b"), "docs/differences.md"),
)
_PLATFORM_TITLED = re.compile(r"\bplatform-shape\.md,?\s*\"(?P<title>[^\"\n]+)\"")
_PLATFORM = re.compile(r"\bplatform-shape\.md\b")


def _platform_titled(match: re.Match[str]) -> str:
    section = PLATFORM_SECTIONS.get(match.group("title").strip().lower())
    return f"docs/platform.md {section}" if section else f'docs/platform.md "{match["title"]}"'


def rewrite_text(text: str) -> str:
    """Old-style citations → the new form; text already in the new form is left unchanged."""
    if SKIP_MARKER in text:
        return text
    for pattern, replacement in _OLD_RULES:
        text = pattern.sub(replacement, text)
    text = _PLATFORM_TITLED.sub(_platform_titled, text)
    text = _PLATFORM.sub("docs/platform.md", text)
    # References that follow no document: § → the contract, Dn → the differences.
    pieces: list[str] = []
    last = 0
    for cite in citations(text):
        if cite.doc is not None:
            continue
        doc = "docs/differences.md" if cite.refs[0].kind == "id" else "docs/contract.md"
        pieces.append(text[last : cite.start])
        pieces.append(f"{doc} ")
        last = cite.start
    pieces.append(text[last:])
    return "".join(pieces)


def rewrite_tree(root: Path, targets: Iterable[str] = SCANNED) -> list[Path]:
    changed: list[Path] = []
    for file in scanned_files(root, targets):
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite_text(text)
        if new != text:
            file.write_text(new, encoding="utf-8")
            changed.append(file)
    return changed
