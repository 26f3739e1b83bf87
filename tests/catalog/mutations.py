"""Real notebooks mutated at random, for Hypothesis: the solution and the sample class's notebooks, changed in
their types, nesting, sizes, encodings and metadata. `mutated()` is a strategy of (description, bytes).

A mutation is drawn as data (an operation, a place given as a fraction of the notebook's nodes, a value), so that
Hypothesis shrinks a failure to the fewest, simplest changes.
"""
from __future__ import annotations

import codecs
import functools
import json

from hypothesis import strategies as st

from autograder.course import kit
from autograder.course.sample_class import SAMPLE_DIR


@functools.lru_cache(maxsize=1)
def originals() -> tuple[str, ...]:
    paths = [kit.SOLUTIONS_DIR / kit.KIT.notebook_name,
             *sorted(SAMPLE_DIR.glob(f"*/{kit.KIT.name}/{kit.KIT.notebook_name}"))]
    return tuple(path.read_text() for path in paths)


NUMBERS = st.one_of(st.integers(-10**6, 10**6), st.integers(-10**400, 10**400), st.floats(allow_nan=True),
                    st.just(10**400))
TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["\ud800", "\x00", "check_forward_order", "experiment",
                                                        "=HYPERLINK(\"x\")", "a" * 5000]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)
KEYS = ["cells", "metadata", "nbgrader", "grade_id", "source", "cell_type", "tags", "points", "locked", "grade",
        "solution", "outputs", "execution_count", "nbformat", "kit", "layernorm_kit"]
TREE_OPS = st.tuples(st.sampled_from(["replace", "delete", "nest", "duplicate", "set_key"]),
                     st.floats(0, 1, exclude_max=True), VALUES, st.sampled_from(KEYS), st.integers(1, 150))
BYTE_OPS = st.tuples(st.sampled_from(["none", "utf-16", "latin-1", "bom", "truncate", "flip", "garbage",
                                      "huge_int", "deep"]), st.floats(0, 1, exclude_max=True), st.binary(max_size=16))


def _nodes(tree) -> list[tuple[object, object]]:
    """(container, key) of every value below the top, walked without recursion."""
    found, stack = [], [tree]
    while stack:
        container = stack.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, value in list(items):
            found.append((container, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return found


def mutate_tree(tree, op: str, where: float, value, key: str, depth: int) -> str:
    nodes = _nodes(tree)
    if not nodes:
        return "nothing to change"
    container, at = nodes[int(where * len(nodes))]
    if op == "replace":
        container[at] = value
    elif op == "delete":
        del container[at]
    elif op == "nest":
        for _ in range(depth):
            container[at] = [container[at]]
    elif op == "duplicate" and isinstance(container, list):
        container.insert(at, container[at])
    elif isinstance(container[at], dict) or op == "set_key":
        target = container[at] if isinstance(container[at], dict) else container
        if isinstance(target, dict):
            target[key] = value
    return f"{op} at {at!r} ({depth})"


def encode(text: str, op: str, where: float, extra: bytes) -> bytes:
    try:
        data = text.encode("utf-8", "surrogatepass")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "replace")
    cut = int(where * len(data))
    if op == "utf-16":
        return text.encode("utf-16", "surrogatepass")
    if op == "latin-1":
        return text.encode("latin-1", "replace")
    if op == "bom":
        return codecs.BOM_UTF8 + data
    if op == "truncate":
        return data[:cut]
    if op == "flip" and data:
        return data[:cut] + bytes([data[cut] ^ 0xFF]) + data[cut + 1:]
    if op == "garbage":
        return data[:cut] + extra + data[cut:]
    if op == "huge_int":
        return data.replace(b'"nbformat": 4', b'"nbformat": 4' + b"9" * 5000, 1)
    if op == "deep":                 # deeper than any recursion limit, where a value may stand
        depth = 1000 + int(where * 100_000)
        return data.replace(b'"metadata": {', b'"metadata": {"deep": ' + b"[" * depth + b"]" * depth + b", ", 1)
    return data


@st.composite
def mutated(draw) -> tuple[str, bytes]:
    """(what was done, the bytes of a mutated real notebook)."""
    source = draw(st.sampled_from(originals()))
    tree = json.loads(source)
    done = [mutate_tree(tree, *op) for op in draw(st.lists(TREE_OPS, max_size=4))]
    ensure_ascii = draw(st.booleans())
    try:
        text = json.dumps(tree, ensure_ascii=ensure_ascii)
    except (ValueError, OverflowError):
        text = json.dumps(tree)
    op, where, extra = draw(BYTE_OPS)
    return "; ".join(done + [op]), encode(text, op, where, extra)
