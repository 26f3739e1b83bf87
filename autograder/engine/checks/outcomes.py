"""A part's verdict as data: passed or not, the message, the facts the message states and the numbers it rests on.

A check returns one `Outcome` per rubric part and writes nowhere else; whoever runs the checks gathers every
outcome's facts and details in the rubric's order, so the order the checks run in changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Outcome:
    """One part's verdict, with the facts its message states (`engine.facts`) and, for the instructor, the numbers
    it rests on (merged into its check's `details`)."""

    passed: bool
    message: str = ""
    facts: tuple = ()
    details: dict = field(default_factory=dict, hash=False)


PASS = Outcome(True)


CODE_NAMES = {"att", "ff", "x", "h", "y"}  # words a message may start with that are names in the student's code


def sentence(message: str) -> str:
    """`message` as a sentence: its first word capitalized, unless it is a name from code (norm2, drop_shortcut)."""
    word = re.match(r"[\w']+", message)
    if word is None or not word.group(0).isalpha() or word.group(0) in CODE_NAMES:
        return message
    return message[:1].upper() + message[1:]


def fail(message: str, facts: tuple = (), details: dict | None = None) -> Outcome:
    return Outcome(False, sentence(message), tuple(facts), dict(details or {}))


def failed(outcome: Outcome, message: str) -> Outcome:
    """`outcome` turned into a failure with `message`, keeping what it rests on."""
    return replace(outcome, passed=False, message=sentence(message))
