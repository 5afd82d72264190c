#!/usr/bin/env python3
"""Rewrite old-style citations to the documents in docs/, in place. Idempotent.

doc-refs: skip-file (it names the old forms)

Comments used to cite notes kept outside the repository: ``upstream-behaviour.md §3.4``,
``upstream §3.1``, ``decisions.md, D7``, ``decision D2``, a bare ``D6`` or ``§6.1``, and
``platform-shape.md``. This turns them into ``docs/contract.md §3.4``,
``docs/differences.md D7`` and ``docs/platform.md``; text already in that form is left as it
is, so running it again after a merge only touches what the merge brought in. Lines that grow
past 100 characters are listed: rewrap them by hand (ruff checks the length).

    python3 scripts/rewrite-doc-refs.py [ROOT]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_refs import rewrite_tree

LINE_LIMIT = 100


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    for path in rewrite_tree(root):
        rel = path.relative_to(root)
        print(f"rewrote {rel}")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > LINE_LIMIT and "docs/" in line:
                print(f"  {rel}:{number}: {len(line)} characters, rewrap by hand")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
