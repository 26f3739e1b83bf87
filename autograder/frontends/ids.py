"""Student ids that read alike are refused: one student per id a person can tell apart.

A class folder or a gradebook may hold `alice`, the Cyrillic `\\u0430lice`, `alice\\u2800` and `alice\\u3164`, or
`jos\\u00e9` and `jose\\u0301` (the same name written two ways): to anyone reading grades.csv, a page or a
terminal they are one student, and a grade filed under one would be read as the other's. So two ids are compared
as they read, by their confusable skeleton (Unicode Technical Standard #39, "Unicode Security Mechanisms"):

1. what draws nothing is taken out, as TR39 does (its Default_Ignorable_Code_Point: direction marks, zero-width
   spaces and joiners, the Hangul fillers, variation selectors), and what draws a gap is one space (every space
   character, line and paragraph separators, the braille blank), runs of them one, none at either end; a control
   character stays (every writer of the kit shows each as its own escape);
2. NFD, each character replaced by its prototype from Unicode's confusables data (`confusable-homoglyphs` ships
   it: `\\u0430` -> `a`, `1` -> `l`, `rn` <- `m`), NFD again: TR39's skeleton;
3. the same once more after NFKC and case folding (`Alice` and `\\uff41lice` read as `alice` too).

Two ids read alike when either of their skeletons is the same; an id is compared both as it is and as the kit
shows it (a name whose bytes are not UTF-8, `caf\\xe9`, shows as the very text of a folder called `caf\\xe9`).
`refusal` says in one line which two ids read alike, each written with escapes beyond ASCII (`shown.named`), so
that the line itself tells them apart: the doors refuse before anything is graded (grade-class) or changed
(nbgrader's autograde, export).

confusable-homoglyphs keeps, for each character of confusables.txt, the characters it is confusable with, both
ways. A source maps to one prototype and prototypes map to nothing, so each set of characters that read alike is
one prototype and its sources: the skeleton writes each character as the first of its set (a fixed choice, which
is all that comparing needs); a multi-character prototype (`rn`) stands for its set whole.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from autograder.course.fence import BRAILLE_BLANK, IGNORABLE
from .shown import named

DIRECTION_MARKS = "\u200e\u200f"  # confusables.txt's comments wrap right-to-left characters in them


@functools.lru_cache(maxsize=1)
def _prototypes() -> dict[str, str]:
    """character -> the one string that stands for every character it reads like (absent: it stands for itself)."""
    from confusable_homoglyphs.confusables import confusables_data

    strip = lambda text: "".join(c for c in text if c not in DIRECTION_MARKS)  # noqa: E731
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for source, homoglyphs in confusables_data.items():
        for homoglyph in homoglyphs:
            a, b = root(strip(source)), root(strip(homoglyph["c"]))
            if a != b:
                # a multi-character prototype stands for its set; among single characters, the lowest stands
                first, second = sorted((a, b), key=lambda s: (len(s) == 1, s))
                parent[second] = first
    return {key: root(key) for key in parent if len(key) == 1 and root(key) != key}


def as_drawn(text: str) -> str:
    """`text` with what draws nothing taken out and each gap one space (step 1 of the module)."""
    kept = []
    for character in text:
        category = unicodedata.category(character)
        if category == "Cf" or character in IGNORABLE:
            continue
        kept.append(" " if category in ("Zs", "Zl", "Zp") or character == BRAILLE_BLANK else character)
    return re.sub(" +", " ", "".join(kept)).strip(" ")


def skeleton(text: str) -> str:
    """TR39's skeleton of `text`, drawn as it is first (`as_drawn`)."""
    prototypes = _prototypes()
    decomposed = unicodedata.normalize("NFD", as_drawn(text))
    mapped = "".join(prototypes.get(c, c) for c in decomposed)
    mapped = "".join(prototypes.get(c, c) for c in unicodedata.normalize("NFD", mapped))  # a prototype's letters
    return unicodedata.normalize("NFD", mapped)


def folded(text: str) -> str:
    """NFKC with case folding: `Alice`, `ALICE` and the full-width `\\uff21lice` all read `alice`."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def readings(*forms: str) -> set[str]:
    """How an id reads: the skeletons of each of its forms (as it is, as the kit shows it), as written and folded."""
    return {skeleton(f) for f in forms} | {skeleton(folded(f)) for f in forms}


def alike(a: str, b: str) -> bool:
    """Whether two ids read alike (see the module)."""
    return a != b and bool(readings(a) & readings(b))


def alike_pairs(ids: Iterable[str | tuple[str, ...]]) -> list[tuple[tuple, tuple]]:
    """Each pair of ids that read alike, the one met first first. An id is a string, or the tuple of its forms (as
    the kit shows it, then the name it was made from): the same tuple twice is one id (a student both in a folder
    and in the gradebook), two tuples that differ are two, even where they show the same."""
    seen: dict[str, tuple] = {}
    pairs: list[tuple[tuple, tuple]] = []
    for entry in ids:
        forms = (entry,) if isinstance(entry, str) else tuple(dict.fromkeys(entry))
        found = readings(*forms)
        for first in dict.fromkeys(seen[r] for r in found if r in seen and seen[r] != forms):
            if (first, forms) not in pairs:
                pairs.append((first, forms))
        for reading in found:
            seen.setdefault(reading, forms)
    return pairs


def refusal(ids: Iterable[str | tuple[str, ...]]) -> str | None:
    """Why these student ids cannot be graded together, in one clause naming two that read alike (each by the name
    it was made from, with escapes beyond ASCII); None if they can. Ids as in `alike_pairs`."""
    pairs = alike_pairs(ids)
    if not pairs:
        return None
    first, second = pairs[0]
    more = f" ({len(pairs) - 1} more pair{'s' * (len(pairs) > 2)} like them)" if len(pairs) > 1 else ""
    return (
        f"the student ids {named(first[-1])} and {named(second[-1])} read alike{more}: once characters that show "
        "nothing, case, width, accents written two ways and look-alike letters are set aside they are the same, so "
        "a grade filed under one would be read as the other's; rename one of them"
    )
