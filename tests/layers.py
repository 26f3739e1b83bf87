"""The isolation layers the sandbox tests run in, and whether this machine gives each one."""

from __future__ import annotations

import os

from autograder.sandbox.parent.client import bubblewrap_works

LAYERS = {
    "bubblewrap": {"bubblewrap": "on"},
    "namespaces": {"bubblewrap": "off"},
    "permissions": {"bubblewrap": "off", "namespaces": "off"},
}


def layer_available(layer: str) -> str | None:
    """Why this machine cannot give `layer`, or None."""
    if layer == "bubblewrap" and not bubblewrap_works():
        return "bubblewrap is not installed or cannot start here"
    if layer != "bubblewrap" and os.geteuid() != 0:
        return "the layers without bubblewrap need root (a sandbox user of its own)"
    return None
