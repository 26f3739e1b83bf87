"""`grade-class --course`: the class grader's results written into an nbgrader course as `nbgrader autograde`
would write them, then the feedback pages drawn by nbgrader's own feedback exporter, so that the gradebook,
`nbgrader export`, formgrader, every feedback page and grade-class's own grades.csv say the same numbers.

Per student (`CourseRecorder.__call__`): the autograded notebook (annotated as
`autograder.frontends.nbgrader.annotate` does for `nbgrader autograde`, every graded cell worth the course's
points as nbgrader's OverwriteCells would make it, whatever points the submission was released with) and its
scores in the gradebook, with nbgrader's late penalty. What an instructor gave is theirs: a cell's manual score,
its comment and its `needs_manual_grade` are left as they are (nbgrader's SaveAutoGrades marks every cell with a
manual score as needing grading again; formgrader would then list a finished written answer as waiting). After
the class (`CourseRecorder.finish`): nbgrader's GenerateFeedback for the assignment (every page drawn again, from
the gradebook) and each student's standing read back from the gradebook.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import determine_grade, is_grade

from autograder.engine.results import SubmissionResult
from autograder.frontends.shown import line
from .annotate import annotate
from .bridge import course_config, pick_assignment
from .gradebook import course_standings, recorded_result, stale_students
from .intake import read_submitted
from .plugins import without_score_outputs
from .preflight import refusal
from .privacy import close_submissions, exposure, refusal_line

COPIED = ("timestamp.txt", "submission_secret.txt")  # what nbgrader's feedback and release read beside a notebook


class CourseRecorder:
    """Writes each graded student into the course; grades with the course's own source notebook."""

    def __init__(self, course: Path, assignment_name: str | None = None, unsafe: bool = False):
        self.course = Path(course).resolve()
        self.config = course_config(self.course)
        self.coursedir = CourseDirectory(config=self.config, root=str(self.course))
        self.db_url = self.coursedir.db_url
        self.lock = threading.Lock()
        self.course_cells: dict | None = None
        self.gradebook: Gradebook | None = None  # the recording's own, from the first student to `finish`
        quiet = logging.getLogger("autograder.late")
        quiet.setLevel(logging.CRITICAL)  # nbgrader's plugin logs every late submission it looks at
        self.late = AssignLatePenalties(config=self.config, log=quiet)
        self.late.init_plugin()
        self.assignment = pick_assignment(self.course, assignment_name, self.config)
        # before anything opens the gradebook: a course others can read or write is refused, changing nothing
        self.open_course = open_course(self.coursedir, self.config, f"Not grading {self.assignment.name}")
        with Gradebook(self.db_url) as gradebook:
            try:
                gradebook.find_assignment(self.assignment.name)
            except MissingEntry:
                raise SystemExit(
                    f"{self.course}: the gradebook has no assignment '{self.assignment.name}'; run "
                    "`nbgrader generate_assignment` there first"
                ) from None
        why = refusal(self.coursedir, self.config, self.assignment.name, unsafe=unsafe)
        if why:
            raise SystemExit(f"Not grading {self.assignment.name}: {why}.")
        for problem in close_submissions(self.coursedir, self.assignment.name, self.config):  # the kit reads them next
            print(line(f"grade-class: could not close a submission to other users: {problem}"), file=sys.stderr)

    def folder(self, kind: str, student: str) -> Path:
        return Path(self.coursedir.format_path(getattr(self.coursedir, f"{kind}_directory"), student, self.assignment.name))

    def __call__(self, submission, result: SubmissionResult) -> None:
        student = submission.student
        notebook = self._annotated(submission, result)
        with self.lock:
            self._record(student, notebook, self._timestamp(submission))
        for output in (c for c in notebook.cells if c.cell_type == "code"):
            output.outputs = without_score_outputs(output.outputs)
        autograded = self.folder("autograded", student)
        path = autograded / self.assignment.notebook_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # nbgrader leaves its autograded copies read-only
        nbformat.write(notebook, path)
        if submission.path is not None:
            for name in COPIED:
                if (submission.path.parent / name).is_file():
                    (autograded / name).unlink(missing_ok=True)
                    shutil.copyfile(submission.path.parent / name, autograded / name)

    def finish(self, students: list[str]) -> dict[str, object]:
        """Draw every page of the assignment again with nbgrader's feedback exporter; the standing of each of
        `students` as the gradebook holds it now (student -> Standing)."""
        if self.gradebook is not None:
            self.gradebook.close()
            self.gradebook = None
        coursedir = CourseDirectory(config=self.config, root=str(self.course))
        coursedir.assignment_id = self.assignment.name
        quiet = logging.getLogger("autograder.course")
        quiet.setLevel(logging.CRITICAL)  # nbgrader logs a warning for every late penalty it shows
        converter = GenerateFeedback(coursedir=coursedir, config=self.config, log=quiet)
        converter.force = True
        try:
            converter.start()
        finally:
            self._hand_back(students)
        drawn = getattr(converter.exporter, "standings", {})  # what the pages were drawn with, read once
        if all(student in drawn for student in students):
            self.standings = {student: drawn[student] for student in students}
        else:
            self.standings = course_standings(self.coursedir, self.config, self.assignment, students)
        return self.standings

    def students(self) -> list[str]:
        """The ids of every student the course's gradebook holds (a folder's id that reads like one is refused)."""
        with Gradebook(self.db_url) as gradebook:
            return [student.id for student in gradebook.students]

    def stale(self, students: list[str]) -> dict[str, str]:
        """Those of `students` whose grade in the gradebook is out of date (student -> why): graded again."""
        return stale_students(course_standings(self.coursedir, self.config, self.assignment, students))

    def _hand_back(self, students: list[str]) -> None:
        """Grading as root a course that belongs to someone else (a grading pod, `sudo`): what was written in it
        belongs to the course's owner again, who can grade, regrade and release as before."""
        owner = self.course.stat()
        if os.geteuid() != 0 or owner.st_uid == 0:
            return
        paths = [Path(self.db_url.removeprefix("sqlite:///"))] if self.db_url.startswith("sqlite:///") else []
        for student in students:
            for kind in ("autograded", "feedback"):
                folder = self.folder(kind, student)
                paths += [folder.parent, folder, *folder.rglob("*")]
        for path in paths:
            if path.exists() and not path.is_symlink():
                os.chown(path, owner.st_uid, owner.st_gid)

    def feedback_page(self, student: str) -> Path:
        return self.folder("feedback", student) / f"{self.assignment.notebook_id}.html"

    def _annotated(self, submission, result: SubmissionResult) -> nbformat.NotebookNode:
        notebook = None
        if submission.path is not None and submission.path.suffix == ".ipynb":  # read inside the kit's fence
            intake = read_submitted(submission.path, self.folder("release", ".") / self.assignment.notebook_name)
            notebook = intake.notebook if intake.unreadable is None else None
        return annotate(notebook or nbformat.v4.new_notebook(), result, self.assignment)

    def _timestamp(self, submission):
        """nbgrader's submission time (timestamp.txt beside the notebook, written by `nbgrader collect`)."""
        if submission.path is None:
            return None
        return self.coursedir.get_existing_timestamp(str(submission.path.parent))

    def _record(self, student: str, notebook: nbformat.NotebookNode, timestamp) -> None:
        name, notebook_id = self.assignment.name, self.assignment.notebook_id
        cells = {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if is_grade(c)}
        if self.gradebook is None:  # one engine for the run: SQLAlchemy compiles each statement once per engine
            self.gradebook = Gradebook(self.db_url, self.coursedir.course_id)
        gradebook = self.gradebook
        try:
            course_cells = self._course_cells(gradebook)
            for grade_id, cell in cells.items():  # as nbgrader's OverwriteCells: the course's points, whatever
                if grade_id in course_cells:  # the notebook was released with, and the source's checksum
                    cell.metadata.nbgrader["points"], cell.metadata.nbgrader["checksum"] = course_cells[grade_id]
            gradebook.update_or_create_student(student)
            gradebook.update_or_create_submission(name, student, **({"timestamp": timestamp} if timestamp else {}))
            for grade in gradebook.find_submission_notebook(notebook_id, name, student).grades:
                cell = cells.get(grade.name)
                # nbgrader's own rule (SaveAutoGrades): a check cell's value, None for a written answer
                grade.auto_score = determine_grade(cell)[0] if cell is not None else None
                if grade.manual_score is None:  # a grade an instructor gave, and its flag, stay as they left them
                    grade.needs_manual_grade = grade.auto_score is None
            self._late_penalty(gradebook, student)
            gradebook.db.commit()
        finally:
            gradebook.db.remove()  # this thread's session, closed; the engine stays for the next student

    def _course_cells(self, gradebook: Gradebook) -> dict:
        """grade id -> (points, checksum) of the course's graded cells, read once per run (the same for everyone)."""
        if self.course_cells is None:
            name, notebook_id, found = self.assignment.name, self.assignment.notebook_id, {}
            for cell in gradebook.find_notebook(notebook_id, name).grade_cells:
                try:
                    found[cell.name] = (cell.max_score, gradebook.find_source_cell(cell.name, notebook_id, name).checksum)
                except MissingEntry:
                    continue
            self.course_cells = found
        return self.course_cells

    def _late_penalty(self, gradebook: Gradebook, student: str) -> None:
        """nbgrader's AssignLatePenalties in this session: the course's plugin's penalty for a late submission,
        kept between 0 and the notebook's score, and none for one on time."""
        gradebook.db.flush()  # the grades just set, then the score computed from them
        submission = gradebook.find_submission(self.assignment.name, student)
        notebook = gradebook.find_submission_notebook(self.assignment.notebook_id, self.assignment.name, student)
        gradebook.db.refresh(notebook, ["score"])
        notebook.late_submission_penalty = None
        if submission.total_seconds_late > 0:
            penalty = self.late.plugin_inst.late_submission_penalty(student, notebook.score, submission.total_seconds_late)
            if penalty is not None:
                notebook.late_submission_penalty = self.late._check_late_penalty(notebook, penalty)


def open_course(coursedir, config, what: str) -> str | None:
    """grade-class's and class-report's check (`privacy`): SystemExit, in one line, where other users can read or
    write the course; the warning where the course allows that; None where it is private."""
    found = exposure(coursedir, config)
    if found is None:
        return None
    if not found.allowed:
        raise SystemExit(f"{what}: {refusal_line(found)}.")
    return found.warning()


def course_warning(course: Path) -> str | None:
    """What the class report of a course says at its top about the course (open to others, by its choice)."""
    course = Path(course).resolve()
    config = course_config(course)
    return open_course(CourseDirectory(config=config, root=str(course)), config, "Not writing the class report")


def course_rows(course: Path, name: str | None = None) -> tuple[str, list]:
    """(assignment, [(student, result, standing)]) of a graded course, for the class report: the results kept in
    its autograded notebooks (by `nbgrader autograde` or grade-class), the numbers from its gradebook."""
    course = Path(course).resolve()
    config = course_config(course)
    coursedir = CourseDirectory(config=config, root=str(course))
    open_course(coursedir, config, "Not writing the class report")
    assignment = pick_assignment(course, name, config)
    folder = Path(coursedir.format_path(coursedir.autograded_directory, "*", assignment.name))
    notebooks = {
        path.parent.parent.name: nbformat.read(path, as_version=4)
        for path in sorted(folder.parent.parent.glob(f"*/{assignment.name}/{assignment.notebook_name}"))
    }
    standings = course_standings(coursedir, config, assignment, sorted(notebooks))
    return assignment.name, [
        (student, recorded_result(notebooks[student], student), standing) for student, standing in standings.items()
    ]
