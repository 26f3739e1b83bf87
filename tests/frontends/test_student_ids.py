"""Two student ids that read alike are refused, in one line naming both, before anything is graded: a property over
generated pairs whose truth is known by construction, then each door (grade-class, nbgrader autograde, export).

Alike by construction: one name disguised two ways, each way one a reader cannot see (case, NFC or NFD, a
full-width or mathematical letter, a look-alike letter from Unicode's confusables.txt (tests/catalog/hostile_text.py),
characters that draw nothing inserted, blank characters at either end). Different by construction: two different
names over Latin letters no font draws like one another, each disguised the same ways."""

from __future__ import annotations

import os
import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.frontends import ids
from autograder.frontends.classgrade import grade_class
from autograder.frontends.commands import NotGrading
from autograder.frontends.discovery import discover, id_forms
from autograder.grading.options import GradingOptions
from catalog.hostile_text import ALICES, JOSE, LOOKALIKES
from nbgrader_course import Shell

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

LETTERS = "abdeghiopqsvxyz"  # none is drawn like another, nor two of them like a third
ACCENTED = ["\u00e9", "\u00f1", "\u00fc"]  # é ñ ü: one character in NFC, two in NFD
DRAWN_AS_NOTHING = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u3164", "\u115f", "\u034f", "\u200e"]
BLANK = ["\u2800", "\u00a0", "\u3000", " "]
SOURCES = {}
for source, letter in LOOKALIKES.items():
    SOURCES.setdefault(letter, []).append(source)

names = st.lists(st.sampled_from(list(LETTERS) + ACCENTED), min_size=1, max_size=8).map("".join)


@st.composite
def disguised(draw, name: str) -> str:
    """`name` as a reader would read it still."""
    letters = []
    for letter in name:
        if letter in SOURCES and draw(st.booleans()):
            letter = draw(st.sampled_from(SOURCES[letter]))  # a look-alike from another script, or full-width
        elif letter.isascii() and draw(st.booleans()):
            letter = letter.upper()
        elif letter.isascii() and draw(st.integers(0, 5)) == 0:
            letter = chr(ord(letter) - ord("a") + 0xFF41)  # full-width
        letters.append(letter)
        if draw(st.integers(0, 3)) == 0:
            letters.append(draw(st.sampled_from(DRAWN_AS_NOTHING)))
    text = unicodedata.normalize(draw(st.sampled_from(["NFC", "NFD"])), "".join(letters))
    ends = st.text(st.sampled_from(BLANK), max_size=2)
    return draw(ends) + text + draw(ends)


@st.composite
def alike_pairs(draw):
    name = draw(names)
    return draw(disguised(name)), draw(disguised(name))


@st.composite
def different_pairs(draw):
    first = draw(names)
    second = draw(names.filter(lambda n: unicodedata.normalize("NFC", n) != unicodedata.normalize("NFC", first)))
    return draw(disguised(first)), draw(disguised(second))


@given(alike_pairs())
@example(("alice", "\u0430lice"))
@example(("alice\u2800", "alice\u3164"))
@example(("jos\u00e9", "jose\u0301"))
@example(("\uff42\u200b\u0585\U0001d41b", "\U0001d41b\u200b\uff4f\u200b\U0001d41b\u200b"))  # bob twice, found in CI
@settings(max_examples=300, deadline=None)
def test_two_ids_that_read_alike_are_flagged(pair):
    first, second = pair
    if first != second:
        assert ids.alike(first, second), pair
        # beside two ids that no drawn name reads like: "c" is neither in LETTERS nor drawn like one of them ("bob"
        # was drawn once, and read alike its own disguise)
        said = ids.refusal(["cecil", first, "carol", second])
        assert said is not None and "\n" not in said and said.isascii(), said
        assert ids.alike_pairs(["cecil", first, "carol", second]) == [((first,), (second,))]


@pytest.mark.slow  # the quick tier runs the others
@given(different_pairs())
@example(("alice", "alicia"))
@settings(max_examples=300, deadline=None)
def test_two_ids_that_read_differently_are_not(pair):
    first, second = pair
    assert not ids.alike(first, second), pair
    assert ids.refusal([first, second, first]) is None  # the same id twice is one student


def test_the_refusal_names_both_in_ascii_escapes():
    said = ids.refusal(ALICES + JOSE)
    assert said.startswith("the student ids 'alice' and '\\u0430lice' read alike (3 more pairs like them)"), said
    assert ids.refusal(["alice", "alicia", "bob"]) is None


def test_grade_class_refuses_names_that_read_alike_before_grading(tmp_path):
    root = tmp_path / "class"
    root.mkdir()
    for name in ALICES + JOSE + ["bob"]:
        (root / f"{name}.ipynb").write_text("not a notebook")
    with pytest.raises(NotGrading) as refused:
        grade_class(root, tmp_path / "out", options=GradingOptions(seed=5), workers=1, progress=False)
    said = str(refused.value)
    assert re.match(r"Not grading: the student ids 'alice' and '(\\u0430lice|alice\\u2800|alice\\u3164)' read alike", said), said
    assert said.isascii() and "\n" not in said and "(3 more pairs like them)" in said
    assert not (tmp_path / "out").exists()
    for name in ALICES[1:] + JOSE[1:]:
        (root / f"{name}.ipynb").unlink()
    assert ids.refusal(id_forms(discover(root))) is None  # one of each: graded as usual


@pytest.mark.slow
def test_nbgrader_autograde_grade_class_and_export_refuse_ids_that_read_alike(released, tmp_path):
    course = released.copy(tmp_path / "course", ordinary=False)
    shell = Shell({"AUTOGRADER_SEED": "11"})
    for student in ("alice", "\u0430lice"):
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        path.write_text("not a notebook")  # the kit's own result, no sandbox run
    refused = shell("nbgrader", "autograde", kit.KIT.name, cwd=course, check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "Traceback" not in said, said
    (line,) = [line for line in said.splitlines() if "Not grading" in line]
    assert "the student ids 'alice' and '\\u0430lice' read alike" in line, line
    assert not (course / "autograded").exists()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        assert list(gradebook.find_assignment(kit.KIT.name).submissions) == []

    os.rename(course / "submitted" / "\u0430lice", tmp_path / "away")  # one alice: graded
    bob = course / "submitted" / "bob\u200b" / kit.KIT.name / kit.KIT.notebook_name  # an id that shows an escape
    bob.parent.mkdir(parents=True)
    bob.write_text("not a notebook")
    shell("nbgrader", "autograde", kit.KIT.name, cwd=course)
    shell("nbgrader", "autograde", kit.KIT.name, "--force", cwd=course)  # in the gradebook now: the same student
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_student("alice\u3164")  # a second alice in the roster
    out = tmp_path / "out"
    for command, what in (
        (["python", "-m", "autograder", "grade-class", "submitted", "--out", str(out), "--course", "."], "Not grading"),
        (["nbgrader", "export"], "Not exporting grades"),
    ):
        refused = shell(*command, cwd=course, check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "Traceback" not in said, said
        (line,) = [line for line in said.splitlines() if what in line]
        assert "'alice' and 'alice\\u3164' read alike" in line or "'alice\\u3164' and 'alice' read alike" in line, line
    assert not out.exists() and not (course / "grades.csv").exists()
