"""How a query asks about torch releases: the release numbers it names and the words that ask for a history.

Apart from search/releases.py (which builds the release documents at index time) so that parsing a query
imports nothing but `re`: the server's cold start does not pay for the timeline's models.
"""

from __future__ import annotations

import re

RELEASE_KIND = "release"
# How an API entry's history line starts (its last text block): the embedding leaves it out (semantic.py).
HISTORY_LEAD = "History: "
# A release document's prior for a query that does not ask about releases (search/releases.py).
RELEASE_PRIOR = 0.3
# A torch 2 release as users write it: 2.14, 2.14.1, v2.5.1, 2.13.0+cpu (not 3.11, a path's python3.11, 2.0e-4).
RELEASE_NUMBER = re.compile(r"(?<![\w.])v?(2)\.(\d{1,2})(?:\.\d{1,2})?(?:\+\w+)?(?!\.?\d)(?![A-Za-z_])")
# Words that ask about a name's or a release's history even without a number.
_RELEASE_WORDS = re.compile(
    r"\b(?:since|until|deprecat\w*|removed|replaced|replacement|introduced|changelog|release notes?|"
    r"which (?:torch|pytorch|release|version)|what (?:torch|pytorch|release|version)|what changed|"
    r"(?:torch|pytorch) (?:release|version)s?|new in|added in|was added|were added|renamed|moved to)\b",
    re.IGNORECASE,
)


def release_term(release: str) -> str:
    """The index term of a release's minor version ("2.14.1" → torch_2_14): one token the query adds for a
    release it names, so "2.14" does not match every "2" and "14" of the corpus."""
    major, minor = release.split(".")[:2]
    return f"torch_{major}_{minor}"


def releases_named(text: str) -> list[str]:
    """The release terms of the torch releases a text names ("torch 2.5.1", "2.14")."""
    return list(dict.fromkeys(f"torch_{m.group(1)}_{m.group(2)}" for m in RELEASE_NUMBER.finditer(text)))


def asks_release(text: str) -> bool:
    """Whether a query asks about releases: names one, or asks since / until / deprecated / replaced …"""
    return bool(RELEASE_NUMBER.search(text) or _RELEASE_WORDS.search(text))
