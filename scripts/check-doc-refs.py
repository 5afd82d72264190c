#!/usr/bin/env python3
"""Fail when the code cites a document, section or ID that is not in the repository.

Scans src/, lib/, tests/, scripts/, benchmarks/, tox.ini and pyproject.toml for citations such
as ``docs/contract.md §3.4`` or ``docs/differences.md D7`` (the forms are described in
``scripts/doc_refs.py``) and prints ``file:line: problem`` for each one that does not resolve.

    python3 scripts/check-doc-refs.py [ROOT]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_refs import check_tree


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check_tree(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} citation(s) point at nothing in the repository", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
