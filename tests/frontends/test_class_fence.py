"""grade-class reads a class folder inside a fence: a student's folder of any depth, names of any bytes, and a
failure that escapes for one student costs only that student (grades.csv and the report are still written)."""

import csv
import os

import pytest

from autograder.frontends import classgrade
from autograder.sandbox.inside import cleanup
from autograder.frontends.classgrade import grade_class
from autograder.frontends.commands import NotGrading
from autograder.frontends.discovery import Submission, discover
from autograder.grading.options import GradingOptions

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


def test_a_student_s_folder_of_any_depth_is_walked_without_recursion(tmp_path):
    folder = tmp_path / "class" / "deep"
    folder.mkdir(parents=True)
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(3000):  # deeper than any recursion limit
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(os.open("found.py", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    (folder / "d" / "shallow.py").write_text("x = 1\n")
    try:
        assert discover(tmp_path / "class") == [Submission("deep", folder / "d" / "shallow.py")]
    finally:  # pytest's own clean-up of old temporary folders recurses: never leave it this tree
        assert cleanup.remove_tree(str(folder)) == []


def test_student_ids_are_plain_text_and_two_that_read_the_same_are_refused_before_anyone_is_graded(tmp_path):
    root = tmp_path / "class"
    root.mkdir()
    for name in (b"caf\xe9.py", b"line\nbreak.py", b"right\xe2\x80\xaeleft.py", b"tab\t.py"):
        (root / os.fsdecode(name)).write_text("x = 1\n")
    (root / "caf\\xe9").mkdir()  # reads the same as the first once escaped
    (root / "caf\\xe9" / "a.py").write_text("x = 1\n")
    students = [s.student for s in discover(root)]
    assert sorted(students) == sorted(["caf\\xe9", "caf\\xe9", "line\\nbreak", "right\\u202eleft", "tab\\t"])
    assert all(s.isprintable() for s in students)
    for student in students:
        student.encode("utf-8")
    with pytest.raises(NotGrading) as refused:
        grade_class(root, tmp_path / "out", options=GradingOptions(seed=1), workers=1, progress=False)
    said = str(refused.value)
    # one line naming both as their names are (the byte 0xe9 that is not UTF-8, the folder's backslash), ASCII only
    assert "\n" not in said and said.isascii() and "'caf\\udce9'" in said and "'caf\\xe9'" in said, said
    assert not (tmp_path / "out").exists()  # nothing graded, nothing written
    (root / "caf\\xe9" / "a.py").unlink()
    (root / "caf\\xe9").rmdir()
    assert {s.student for s in discover(root)} == {"caf\\xe9", "line\\nbreak", "right\\u202eleft", "tab\\t"}


@pytest.mark.slow
def test_a_failure_that_escapes_for_one_student_costs_only_that_student(tmp_path, monkeypatch):
    root = tmp_path / "class"
    root.mkdir()
    for name in ("a_fine", "b_breaks", "c_fine"):
        (root / f"{name}.ipynb").write_text("not a notebook")
    real = classgrade.grade_file

    def breaking(path, server, **kwargs):
        if "b_breaks" in str(path):
            raise RecursionError("something no reader expected")
        return real(path, server, **kwargs)

    monkeypatch.setattr(classgrade, "grade_file", breaking)
    rows = grade_class(root, tmp_path / "out", options=GradingOptions(seed=2), workers=1, progress=False)
    by_student = {row["student"]: row for row in rows}
    assert set(by_student) == {"a_fine", "b_breaks", "c_fine"}
    assert "RecursionError" in by_student["b_breaks"]["grader_errors"]
    assert not by_student["a_fine"]["grader_errors"] and not by_student["c_fine"]["grader_errors"]
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        assert {row["student"] for row in csv.DictReader(handle)} == set(by_student)
    assert (tmp_path / "out" / "report.html").is_file()
