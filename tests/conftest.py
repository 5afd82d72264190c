"""Shared by every test folder."""

import contextlib

# CPython 3.11.7 can fail to compile a module after any RecursionError was raised and caught
# in the process ("AST constructor recursion depth mismatch", fixed in 3.11.8); hypothesis's
# pytest plugin imports hypothesis lazily at session end, which then fails. Import it first
# (the integration environment does not install it).
with contextlib.suppress(ImportError):
    import hypothesis  # noqa: F401
