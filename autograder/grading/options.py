"""How every submission of one grading run is graded, as one parameter (`GradingOptions`) the doors pass on whole.

Nothing here imports torch: the command line makes its options before its sandbox servers start, and resolves
them (`GradingOptions.resolved`, which does) once they have.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from autograder.course import kit
from autograder.sandbox.parent.policy import Limits


class DeviceUnavailable(ValueError):
    """The device asked for is not there (`--device cuda` without CUDA): a usage error, not a traceback."""


@dataclass(frozen=True)
class GradingOptions:
    """`seed`: the hidden inputs' seed, recorded in every result (None: `resolved` draws a fresh one). `device`:
    "cpu", "cuda", or "auto" (`resolved` picks CUDA where available). `assignment`: the source notebook graded
    against (the kit's own, or a course's). `unsafe`: grade even where nothing can isolate a submission (every
    result then says so). `private`: folders submissions must not read, besides the kit's checkout, the course
    and the run's own folders. `limits`: the sandbox's. `isolation`: layer choices for every sandbox server
    (`bubblewrap`, `namespaces`, `landlock`; tests switch them off)."""

    seed: int | None
    device: str = "cpu"
    assignment: kit.Assignment = kit.KIT
    unsafe: bool = False
    private: tuple[Path, ...] = ()
    limits: Limits = Limits()
    isolation: dict | None = None

    def resolved(self) -> GradingOptions:
        """The same options with the device picked (DeviceUnavailable if it is not there) and a seed drawn if none
        was given. Imports torch."""
        from .reference import new_seed, resolve_device

        device = resolve_device(self.device)
        return replace(self, device=device, seed=new_seed() if self.seed is None else self.seed)
