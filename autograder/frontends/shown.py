"""Text a student controls, shown as text: one renderer per medium, the only way such text reaches a writer.

A student chooses their file and folder names (so their id in a class folder), their exception messages and
reprs (which the grader's findings quote), their written answers; an instructor's comments and a course's names
are read the same way. Any of it may hold a terminal's escape sequences (a window title, a clipboard write, a
cursor moved up to draw over the score line), C1 controls, direction overrides (`\\u202e42 erocs` reads
"score 24") or characters that show nothing (`alice\\u3164` reads "alice"). Every such character is written as
its escape (`fence.visible`), in every medium:

* `line`: one line of text (a terminal, a log, results.json's text, a CSV cell): a line break is `\\n` too, so
  nothing a student wrote starts a line of its own (a fake "Score: 24 / 24");
* `terminal`: text made of lines the kit put together from such lines: its own line breaks stay, and anything
  that slipped through unrendered is made visible here, the last pass before a terminal;
* `html`: one line, escaped, inside `<bdi>` (isolated: right-to-left letters in it cannot reorder the page's own
  text around it); the pages' templates use it as the filter `shown`;
* `markdown`: one line, every ASCII punctuation mark backslash-escaped (CommonMark): no emphasis, link, code span
  or HTML of the student's;
* `named`: between quotes, with every character beyond ASCII as its escape too, to tell apart two names that read
  alike (the Cyrillic `\\u0430lice` beside `alice`).

CSV cells are `exports.cell`: `line`, then neutralized against formulas.
"""

from __future__ import annotations

import re
from html import escape

from markupsafe import Markup

from autograder.course.fence import visible

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def _text(value) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def line(value) -> str:
    """`value` as one line of text: every control, line break, direction and invisible character an escape."""
    return visible(_text(value))


def terminal(value) -> str:
    """Text for a terminal or a log: the kit's own line breaks kept, every other control an escape."""
    return visible(_text(value), newlines=True)


def html(value, isolated: bool = True) -> Markup:
    """`value` as an HTML fragment: escaped, invisible characters visible, isolated in `<bdi>` (`isolated`: where
    it does not fill a block of its own)."""
    text = escape(visible(_text(value)), quote=True)
    return Markup(f"<bdi>{text}</bdi>" if isolated else text)


def markdown(value) -> str:
    """`value` as one line of Markdown text that renders as itself (its leading spaces as entities: four would
    start a code block)."""
    text = _PUNCTUATION.sub(r"\\\1", line(value))
    return "&#32;" * (len(text) - len(text.lstrip(" "))) + text.lstrip(" ")


def named(value) -> str:
    """A name between quotes, ASCII only: each character beyond it, and each that does not show, an escape."""
    return "'" + visible(_text(value), ascii=True) + "'"
