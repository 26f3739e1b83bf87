"""The class report: a generated class of 200 (real results of the catalog's wrong forwards, the solution and the
blank template, spread over students with late submissions and grader errors) gives a page whose every count is
the class's, whose example messages name no student, and whose figures a browser paints."""

import base64
import html
import random
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.image import imread

from autograder.course import kit
from autograder.course.notebook import cells_from_python, read_cells
from autograder.engine.results import CheckResult, Diverged, SubmissionResult, SubTest
from autograder.frontends.report import anonymised, class_report_html, family
from autograder.frontends.standing import standing_of
from autograder.grading.inprocess import grade_cells_in_process
from catalog.build import submission
from catalog.wrong_forwards import WRONG
from markup import HOSTILE, Parsed

CLASS_SIZE = 200


@pytest.fixture(scope="module")
def graded_variants():
    """One real result per kind of submission, graded in one plain process (fast; the sandbox is not the point)."""
    seed = 31
    kinds = {"solution": cells_from_python(submission()), "template": read_cells(kit.TEMPLATE_DIR / kit.KIT.notebook_name)}
    kinds.update({w.name: cells_from_python(submission(forward=w.forward)) for w in WRONG[:8]})
    return {name: grade_cells_in_process(cells, seed, name=f"{name}.py") for name, cells in kinds.items()}


@pytest.fixture(scope="module")
def generated_class(graded_variants):
    """200 students: each a real result under the student's own id; a quarter late, three with grader errors, and
    some whose messages quote their own id (as an exception message might)."""
    chooser = random.Random(7)
    rows = []
    for number in range(CLASS_SIZE):
        student = f"student{number:03d}"
        kind = chooser.choice(sorted(graded_variants))
        result = replace(graded_variants[kind], student=student, submission=f"{student}_{kind}.py")
        if number % 50 == 1:
            result = replace(result, grader_errors=(f"check forward_dropout: KeyError at dropout.py:{number}",))
        if result.first_divergence and number % 10 == 3:
            result = replace(result, first_divergence=f"{result.first_divergence} (seen in /home/{student}/hw.py)")
        standing = standing_of(result)
        if number % 4 == 0:
            standing = replace(standing, score=max(0, standing.score - 2), late_penalty=2, seconds_late=3600 * (1 + number % 5))
        rows.append((student, result, standing))
    return rows


def test_every_count_in_the_report_is_the_classs(generated_class):
    page = class_report_html(generated_class, title="week 5: class report")
    scores = [standing.score for _, _, standing in generated_class]
    mean = f"{sum(scores) / len(scores):.2f}".rstrip("0").rstrip(".")
    assert f"{CLASS_SIZE} students; mean {mean}" in page
    checks = re.findall(r"<tr><td>([^<]+)</td><td>(\d+) of 200</td>", page.split('id="checks"')[1].split("</table>")[0])
    for title, passed in checks:
        expected = sum(next(c for c in r.checks if c.title == title.replace("&#x27;", "'")).passed for _, r, _ in generated_class)
        assert int(passed) == expected, title
    assert len(checks) == len(generated_class[0][1].checks)
    steps = Counter(r.diverged.label() for _, r, _ in generated_class if r.diverged and r.diverged.step is not None)
    assert steps  # the class has forwards that diverge at a named step
    table = page.split('id="divergences"')[1].split("</table>")[0]
    shown = re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td>", table)
    assert [(s.replace("&#x27;", "'"), int(n)) for s, n in shown] == steps.most_common(12)
    late = re.findall(r"<tr><td>(student\d+)</td><td>[\d.]+ h</td>", page.split('id="late"')[1].split("</table>")[0])
    assert late == [s for s, _, standing in generated_class if standing.seconds_late]  # None: outside a course
    errors = page.split('id="grader-errors"')[1].split("</table>")[0]
    assert errors.count("<tr><td>student") == 4 and "KeyError at dropout.py" in errors
    for element in ("score-histogram", "pass-rates", "divergence-steps"):
        match = re.search(rf'<img id="{element}" src="data:image/png;base64,([^"]+)"', page)
        assert match and base64.b64decode(match.group(1)).startswith(b"\x89PNG")
    assert "<script" not in page.lower()


def test_example_messages_name_no_student(generated_class):
    page = class_report_html(generated_class)
    examples = page.split('id="divergences"')[1]  # divergences and mistake families: the examples
    examples = examples.split('id="late"')[0]
    assert not re.search(r"student\d{3}", examples) and "/home/" not in examples
    assert "&lt;path&gt;" in examples
    assert (
        anonymised("ada_correct's cell 3 raised NameError (ada_correct.py, ada@uni.edu)", ["ada_correct"])
        == "<student>'s cell 3 raised NameError (<student>.py, <e-mail>)"
    )
    assert anonymised("a LayerNorm sits on the shortcut", ["layernorm_student", "ann"]) == "a LayerNorm sits on the shortcut"


def test_mistake_families_group_a_finding_whatever_its_numbers():
    assert family("scaled by 1.0001 (largest difference 8.22)") == family("scaled by 0.5 (largest difference 3)")
    assert family("the first shortcut is missing") != family("the second shortcut is missing")


def test_hostile_text_in_the_report_is_text_never_markup():
    """The title, student ids (in the late and grader-error tables and the stale warning), the example messages
    and the part names: escaped as `html.escape` spells it, read back as the very text, no element or attribute
    added (the page's markup is that of the same report with harmless text)."""

    def page(text):
        checks = (CheckResult("forward_order", "Operation order (Pre-LN)", (SubTest(text, 0, 4, False, text),), text),)
        rows = []
        for number in range(3):
            result = SubmissionResult(
                f"s{number}.py",
                checks,
                1,
                "cpu",
                "",
                0.1,
                f"Step 2 of 10 (normalize with norm1): {text}",
                grader_errors=(text,),
                student=f"s{number}",
                diverged=Diverged(2),
            )
            standing = replace(standing_of(result), seconds_late=60, late_penalty=1, stale=text if number else "")
            rows.append((f"{text}{number}", result, standing))
        return class_report_html(rows, title=text)

    hostile, harmless = page(HOSTILE), page("harmless words")
    assert Parsed(hostile).markup == Parsed(harmless).markup
    assert "<script" not in hostile.lower() and "<img src=x" not in hostile
    # the title (twice), the stale warning (an id and its reason), the divergence's message, the mistake's message
    # and its part, each of the 3 ids in the late table and beside its grader error, each grader error
    assert Parsed(hostile).text.count(HOSTILE) == hostile.count(html.escape(HOSTILE)) == 16
    assert HOSTILE not in Parsed(hostile).values


def test_first_steps_are_counted_by_the_step_a_result_carries_never_by_its_words():
    """The report groups by `SubmissionResult.diverged`: a message whose words name another step (or none, or a
    step in words the kit never writes) is counted under the step its result carries."""
    check = (CheckResult("forward_order", "Operation order (Pre-LN)", (SubTest("p", 0, 4, False, "wrong"),), "wrong"),)

    def row(student: str, words: str | None, diverged: Diverged | None):
        result = SubmissionResult(f"{student}.py", check, 1, "cpu", "", 0.1, words, student=student, diverged=diverged)
        return student, result, standing_of(result)

    rows = [
        row("a", "Step 3 of 10 (run attention on norm1's output): but the step is 7", Diverged(7)),
        row("b", "Norm2 was not applied", Diverged(7)),
        row("c", "In train mode: Step 4 of 10 (apply drop_shortcut to attention's output): x", Diverged(9, "train", True)),
        row("d", "Step 3 of 10 (run attention on norm1's output): said, but carried as no step", Diverged(None)),
        row("e", "Step 3 of 10 (run attention on norm1's output): no divergence carried", None),
    ]
    page = class_report_html(rows)
    table = page.split('id="divergences"')[1].split("</table>")[0]
    shown = [(html.unescape(s), int(n)) for s, n in re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td>", table)]
    assert shown == [
        ("Step 7 of 10 (normalize with norm2)", 2),
        ("In train mode only: Step 9 of 10 (apply drop_shortcut to the feed-forward output)", 1),
    ]
    assert "but the step is 7" in table  # the example is the first such student's own message


def test_an_empty_class_still_gets_a_page():
    assert "No graded submissions" in class_report_html([])


@pytest.mark.slow
def test_a_browser_paints_the_report_of_200(generated_class, tmp_path):
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed")
    page = tmp_path / "report.html"
    page.write_text(class_report_html(generated_class, title="A generated class of 200"))
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2400",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = imread(shot)[..., :3]
    bars = np.all(np.abs(pixels - np.array([0x1F, 0x3B, 0x99]) / 255) < 0.06, axis=-1)  # the figures' blue
    orange = np.all(np.abs(pixels - np.array([0xBC, 0x4C, 0x00]) / 255) < 0.06, axis=-1)  # divergence bars
    assert bars.sum() > 5000 and orange.sum() > 1000, (bars.sum(), orange.sum())
