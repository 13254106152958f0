"""glob, grep's glob and .gitignore rules match a path through RE2's engine directly
(``discovery.full_match``); it answers exactly what the wrapper's ``fullmatch`` does."""

from __future__ import annotations

import random

from toolfs.search.discovery import compile_glob, compile_override, full_match, mark_hidden

PATTERNS = ["**/*.py", "src/**", "*.{py,md}", "[a-c]?/**/x*", "**/.hidden/*", "a/**/b/*.txt",
            "\u00e9*/**", "**", "?", "[!a]*/*", "**/*\u00e9\u00e8"]
NAMES = ["a", "b.py", ".hidden", "src", "x", "xz", "q", "c.txt", "\u00e9t\u00e9", "\u00e9\u00e8",
         "x.md", "\U0001f600.py"]


def test_direct_engine_equals_the_wrapper() -> None:
    rnd = random.Random(5)
    for pattern in PATTERNS:
        glob, rule = compile_glob(pattern), compile_override(pattern).rule
        for _ in range(200):
            path = "/".join(rnd.choice(NAMES) for _ in range(rnd.randint(1, 4)))
            for regex, text in ((glob.regex, mark_hidden(path) + "/"),
                                (rule.regex, path + "/")):
                assert full_match(regex, text) == (regex.fullmatch(text) is not None), (
                    pattern, path)
