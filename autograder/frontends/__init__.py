"""The doors people use, all through the same grading: the command line (`cli`, a few lines per command over the
keyword-only functions of `commands`), the demo, grade-class (`classgrade`) and its class report (`report`), where
a student stands (`standing`), the files an LMS imports (`lms`), the feedback page (`feedback`, `plots`), the two
pages' Jinja2 templates (`pages`, `templates/`), nbgrader (`nbgrader`: the only package here that speaks nbgrader)
and Gradescope (`gradescope`). Every writer shows text a student controls through `shown` (one renderer per
medium: terminal and logs, HTML, Markdown, CSV cells in `exports`), and every door refuses two student ids that
read alike (`ids`).
"""
