"""What must never reach a student: the lines of solutions and hidden tests in the annotated source."""
from __future__ import annotations

from autograder.course import kit

BEGIN = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS")
END = ("END SOLUTION", "END HIDDEN TESTS")


def secret_lines() -> set[str]:
    """Lines that exist only inside solution regions or hidden tests (not even as a phrase of the lesson's
    own text, which may quote a line of code on purpose)."""
    inside, secret, public = False, set(), []
    for cell in kit.KIT.cells():
        for line in cell.source.split("\n"):
            if any(marker in line for marker in BEGIN):
                inside = True
            elif any(marker in line for marker in END):
                inside = False
            elif inside and len(line.strip()) > 12:
                secret.add(line.strip())
            else:
                public.append(line)
    public_text = "\n".join(public)
    return {line for line in secret if line not in public_text}
