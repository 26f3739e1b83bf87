"""The feedback page in a real browser: headless Chromium builds the DOM we expect and paints the plot."""

import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from autograder.frontends.feedback import write_feedback_page
from autograder.frontends.plots import CURVES
from autograder.frontends.standing import standing_of
from catalog.build import submission
from catalog.wrong_forwards import WRONG

pytestmark = pytest.mark.slow

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Dom(HTMLParser):
    """Every element's tag and attributes, and the text inside each element that has an id."""

    def __init__(self, text: str):
        super().__init__()
        self.elements, self.text_by_id, self._open = [], {}, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag not in VOID:
            self._open.append((tag, attributes.get("id")))
        if attributes.get("id"):
            self.text_by_id.setdefault(attributes["id"], "")

    def handle_endtag(self, tag):
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for _, element_id in self._open:
            if element_id:
                self.text_by_id[element_id] += data

    def find(self, tag, **wanted):
        return [
            attrs for t, attrs in self.elements if t == tag and all(wanted[k] in (attrs.get(k) or "").split() for k in wanted)
        ]


@pytest.fixture
def chromium(tmp_path):
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium is not installed")

    def run(*args):
        command = [path, *FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout

    return run


@pytest.fixture
def post_ln_page(grade_source, tmp_path):
    post_ln = next(w for w in WRONG if w.name == "post_ln")
    result = grade_source(submission(forward=post_ln.forward))
    page = tmp_path / "feedback.html"
    write_feedback_page(result, page)
    return result, post_ln, page


def test_browser_builds_the_expected_dom(chromium, post_ln_page):
    result, post_ln, page = post_ln_page
    dom = Dom(chromium("--dump-dom", page.as_uri()))
    assert dom.text_by_id["score"].strip() == standing_of(result).text  # the written answers count too
    assert "Where your block first went wrong" in dom.text_by_id["first-divergence"]
    assert result.first_divergence in dom.text_by_id["first-divergence"]
    failed = {attrs["data-check"] for attrs in dom.find("tr", **{"class": "failed"})}
    assert post_ln.check in failed
    assert failed == {c.check for c in result.checks if not c.passed}
    (plot,) = dom.find("img", id="gradient-plot")
    assert plot["src"].startswith("data:image/png;base64,")
    assert not dom.find("script")


def test_browser_paints_the_plot(chromium, post_ln_page, tmp_path):
    _, _, page = post_ln_page
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri())
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1200)
    # the page's own styles use none of the reference lines' colours: finding them means the image was drawn
    for key, _, style in CURVES:
        if key == "student":  # drawn translucent, so its painted colour is a blend; the references suffice
            continue
        near = np.all(np.abs(pixels - np.array(to_rgb(style["color"]))) < 0.06, axis=-1)
        assert near.sum() > 150, f"the {key} line is not visible in the screenshot ({near.sum()} pixels)"
