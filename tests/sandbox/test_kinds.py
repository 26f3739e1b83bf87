"""The sandbox's table of kinds (`autograder.sandbox.kinds`): complete, probed, and the layer table of
docs/security.md."""

import pytest

from autograder.course import kit
from autograder.sandbox import kinds, layer_page
from catalog import kinds as probes

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

LISTED = (
    "files",
    "processes",
    "other processes",
    "locks",
    "page cache",
    "System V",
    "POSIX",
    "abstract",
    "key rings",
    "control groups",
    "timers",
    "clocks",
    "inotify",
    "fanotify",
    "eventfd",
    "memfd",
    "network",
    "devices",
    "/proc",
    "/sys",
)


def test_the_documentation_s_layer_table_is_the_one_the_table_generates():
    assert layer_page.in_page(kit.documentation("security.md")) == layer_page.layer_table(), (
        "docs/security.md's layer table is stale: run `python -m autograder.sandbox.layer_page`"
    )


def test_every_kind_has_a_probe_and_every_probe_a_kind():
    assert set(probes.PROBES) == set(kinds.BY_NAME)
    for kind in kinds.KINDS:
        assert set(kind.closed) == set(kinds.LAYERS), kind.name
        assert {c.how for c in kind.closed.values()} <= {kinds.REFUSED, kinds.OWN, kinds.REMOVED, kinds.OPEN}
        assert all(c.text and c.text != "same" for c in kind.closed.values()), kind.name


def test_the_table_names_every_kind_the_sandbox_must_close():
    titles = " ".join(kind.title for kind in kinds.KINDS)
    assert [word for word in LISTED if word not in titles] == []


def test_nothing_is_open_but_in_the_columns_an_instructor_must_opt_into():
    open_cells = {(kind.name, layer) for kind in kinds.KINDS for layer, c in kind.closed.items() if c.how == kinds.OPEN}
    assert {cell for cell in open_cells if cell[1] not in kinds.OPT_IN} == set()
    assert ("other_files", "permissions") in open_cells and ("other_processes", "permissions") in open_cells
    assert all("`--unsafe`" in kinds.LAYERS[layer] for layer in kinds.OPT_IN)


def test_what_a_child_cannot_find_of_its_own_is_said_only_where_the_kind_is_hers():
    hidden = {(kind.name, layer) for kind in kinds.KINDS for layer, c in kind.closed.items() if not c.seen}
    assert hidden == {("processes", "landlock")}
    assert all(kinds.BY_NAME[name].closed[layer].how in (kinds.OWN, kinds.REMOVED) for name, layer in hidden)


@pytest.mark.parametrize(
    "layers, bubblewrap, root, column",
    [
        ({}, True, False, "bubblewrap"),
        ({}, True, True, "bubblewrap"),
        ({"namespaces": True}, False, True, "namespaces"),
        ({"landlock": 7}, False, True, "landlock"),
        ({}, False, True, "permissions"),
        ({"landlock": 7}, False, False, "unsafe"),
    ],
)
def test_a_server_s_layers_name_its_column(layers, bubblewrap, root, column):
    assert kinds.layer_of(layers, bubblewrap, root) == column
