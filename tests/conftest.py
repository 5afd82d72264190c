"""Shared by every test folder."""

import contextlib

# CPython 3.11.7 can fail to compile a module after any RecursionError was raised and caught
# in the process ("AST constructor recursion depth mismatch", fixed in 3.11.8); hypothesis's
# pytest plugin imports hypothesis lazily at session end, which then fails; httpx imports
# httpcore lazily when a client is first built (seen failing with a KeyError inside
# importlib). Import both first (the integration environment has neither).
with contextlib.suppress(ImportError):
    import httpcore  # noqa: F401
    import hypothesis  # noqa: F401

# Property tests judge results, not speed: a per-example wall-clock deadline only measures how
# busy the shared 2-core machine is (test_charm_names.py failed Hypothesis's 200 ms under load).
with contextlib.suppress(ImportError):
    from hypothesis import settings

    settings.register_profile("aitenant", deadline=None)
    settings.load_profile("aitenant")
