"""Every forward of the hand-written catalogs, as one list: for the tests and benchmarks that grade them all alike
(`tests/engine/test_seeds.py`, `benchmarks/seed_stability.py`)."""

from __future__ import annotations

from .equivalent_forwards import CONTAINER_FORWARD, CONTAINER_INIT, EQUIVALENT
from .families import FAMILIES
from .fuzz_regressions import REGRESSIONS
from .generate import equivalents
from .regions import CASES
from .unseen_wrong import UNSEEN_WRONG
from .wrong_forwards import HINTED, TRIVIAL, WRONG


def catalog_forwards() -> list[tuple[str, dict]]:
    """(name, the keyword arguments of `submission`) of every hand-written catalog forward."""
    found = [(f"wrong {w.name}", {"forward": w.forward}) for w in WRONG]
    found += [(f"trivial {name}", {"forward": forward}) for name, forward in _sources(TRIVIAL)]
    found += [(f"hinted {name}", {"forward": forward}) for name, forward in _sources(HINTED)]
    found += [(f"equivalent {name}", {"forward": forward}) for name, forward in sorted(EQUIVALENT.items())]
    found += [("components in containers", {"forward": CONTAINER_FORWARD, "init": CONTAINER_INIT})]
    found += [(f"unseen {name}", {"forward": forward}) for name, forward, _ in UNSEEN_WRONG]
    found += [(f"family {name}", {"forward": forward}) for name, (forward, _) in sorted(FAMILIES.items())]
    found += [(f"region {case.name}", {"forward": case.source, "init": case.init}) for case in CASES]
    found += [(f"regression {case.name}", {"forward": case.source}) for case in REGRESSIONS]
    found += [(f"style {case.name}", {"forward": case.forward}) for case in equivalents()]
    return found


def _sources(table: dict) -> list[tuple[str, str]]:
    """(name, forward source) of a catalog table whose values are sources or records holding one."""
    return [(name, value if isinstance(value, str) else getattr(value, "forward", value[0])) for name, value in table.items()]
