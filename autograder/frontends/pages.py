"""The kit's two HTML pages, the student's feedback page and the class report, are Jinja2 templates in
`templates/` (both extend `base.html.j2`); this is their one environment.

Autoescape is on: every value a template prints is escaped, so a message that quotes a student's code shows as
text, never as markup, and every character of it that does not show (controls, direction overrides, zero-width and
blank characters) is written as its escape (`fence.visible`). Values are escaped the way `html.escape` does (`'` as
`&#x27;`, `"` as `&quot;`), the spelling the pages have always had; markup a template made itself (a macro's
output) is printed as it is. Text a student or an instructor wrote goes through the filter `shown`
(`shown.html`): the same, isolated in `<bdi>`, so that right-to-left letters in it cannot reorder the page's own
text around it (in an attribute or the `<title>`, where no element can stand, the finalize alone).
"""

from __future__ import annotations

import base64
import html

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from autograder.course.fence import visible
from . import shown


def _escaped(value) -> Markup:
    return value if isinstance(value, Markup) else Markup(html.escape(visible(str(value)), quote=True))


def data_uri(png: bytes) -> str:
    """A PNG inside the page itself: the pages load nothing from elsewhere."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


# trim_blocks and lstrip_blocks: a line holding only a {% tag %} leaves nothing in the page
TEMPLATES = Environment(
    loader=PackageLoader("autograder.frontends", "templates"),
    autoescape=True,
    finalize=_escaped,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.filters["data_uri"] = data_uri
TEMPLATES.filters["shown"] = shown.html


def render(template: str, **values) -> str:
    return TEMPLATES.get_template(template).render(**values)


def macro(template: str, name: str):
    """One macro of a template, called from Python (a fragment the pages share with another view)."""
    return getattr(TEMPLATES.get_template(template).module, name)
