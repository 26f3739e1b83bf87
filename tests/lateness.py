"""Reading "how late" off a view as a person reads it, for the tests that every view tells a late student: a
duration in words ("34 s", "12 min", "5.2 h", "3.1 days") is the range of times it may stand for, from its unit
and the digits it shows. Nothing here is the kit's: the tests know the true delay by construction."""

from __future__ import annotations

import re

UNITS = {"s": 1, "min": 60, "h": 3600, "days": 86400}
DURATION = r"(\d+(?:\.\d+)?) (s|min|h|days)\b"


def duration_range(text: str) -> tuple[float, float] | None:
    """The seconds a duration such as "5.2 h" may stand for (5.15 h to 5.25 h); None where `text` holds none."""
    found = re.search(DURATION, text)
    if found is None:
        return None
    number, unit = found.groups()
    decimals = len(number.split(".")[1]) if "." in number else 0
    half = 0.5 * 10**-decimals
    return (float(number) - half) * UNITS[unit], (float(number) + half) * UNITS[unit]


def says_late_by(text: str, seconds: float) -> bool:
    """`text` says "late by <a duration>" (any case) and the duration covers `seconds`."""
    found = re.search(rf"late by ({DURATION})", text, flags=re.IGNORECASE)
    if found is None:
        return False
    low, high = duration_range(found.group(1))
    return low - 1e-6 <= seconds <= high + 1e-6


def says_late(text: str) -> bool:
    return re.search(r"\blate by\b", text, flags=re.IGNORECASE) is not None
