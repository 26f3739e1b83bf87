"""The layer table of docs/security.md, generated from the sandbox's table of kinds (`autograder.sandbox.kinds`):
`python -m autograder.sandbox.layer_page` writes it into the page, and a test compares the two."""

from __future__ import annotations

from autograder.sandbox.kinds import KINDS, LAYERS


def layer_table() -> str:
    """The layer table of docs/security.md, in Markdown."""
    lines = ["| | " + " | ".join(LAYERS.values()) + " |", "|---" * (len(LAYERS) + 1) + "|"]
    for kind in KINDS:
        texts = [kind.closed[layer].text for layer in LAYERS]
        shown = [text if i == 0 or text != texts[i - 1] else "same" for i, text in enumerate(texts)]
        lines.append(f"| {kind.title} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- the layer table: generated from autograder/sandbox/kinds.py (python -m autograder.sandbox.layer_page) -->"
END = "<!-- end of the layer table -->"


def in_page(text: str) -> str | None:
    """The layer table as a page of the documentation holds it (between BEGIN and END), or None."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write_page(path) -> None:
    """Put the table generated now into the page at `path` (docs/security.md), between its markers."""
    from pathlib import Path

    path = Path(path)
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + layer_table() + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    from pathlib import Path

    write_page(Path(__file__).resolve().parents[2] / "docs" / "security.md")
