"""The package's shape is its architecture (see `autograder/__init__.py`): wings that import one way, the code the
sandbox runs importing nothing of the kit outside itself, and pieces a reader can hold."""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import kit
from autograder.engine.steps import STEPS
from autograder.sandbox.parent import containment

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

PACKAGE = kit.ROOT / "autograder"
WINGS = {"course": 0, "engine": 1, "sandbox": 1, "grading": 2, "frontends": 3}  # a wing imports lower ranks only
APART = {"engine", "sandbox"}  # ...and these never each other
SELF_CONTAINED = ("autograder.sandbox.inside", "autograder.engine.questions")  # what the sandbox runs
MAX_MODULE_LINES, MAX_CLASS_LINES = 300, 200


def module_name(path: Path) -> str:
    parts = path.relative_to(kit.ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the kit in `path`, at any depth (imports inside functions included),
    relative ones resolved; `from package import name` counts as importing `package.name` where that is a module."""
    name, found = module_name(path), []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((node.lineno, full if importlib.util.find_spec(base) and _is_module(full) else base))
    return [(line, module) for line, module in found if module == "autograder" or module.startswith("autograder.")]


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else None


MODULES = sorted(PACKAGE.rglob("*.py"))


@functools.cache
def edges() -> list[tuple[str, int, str]]:
    """(module, line, module it imports) of every import of the kit in the package: read when a test first asks (a
    worker that runs none of them never imports the package's every part to resolve them)."""
    return [(module_name(path), line, target) for path in MODULES for line, target in imports(path)]


def test_the_top_of_the_package_is_the_wings():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert entries == sorted(["__init__.py", "__main__.py", *WINGS]), entries


def test_imports_run_one_way_between_wings():
    wrong = []
    for source, line, target in edges():
        a, b = wing(source), wing(target)
        if a is None or b is None or a == b:
            continue
        if WINGS[b] >= WINGS[a] or {a, b} == APART:
            wrong.append(f"{source}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


# The engine's own layers, bottom first: a module imports only modules of lower layers, or of its own layer where
# that makes no circle. What the grader asks (`questions`, run in the sandbox) and the tables (`steps`, `rubric`,
# `results`) stand on nothing; the facts on the steps; reading a run on the questions and facts; explaining it on
# the reading; the checks on all of them.
ENGINE_LAYERS = {
    "steps": 0, "rubric": 0, "results": 0, "questions": 0, "tolerance": 0,
    "facts": 1, "replayed": 2, "reading": 3, "ledger": 3, "unmet": 3, "fits": 3, "diagnosis": 4, "checks": 5,
}  # fmt: skip


def engine_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if module.startswith("autograder.engine.") else None


def test_the_engine_imports_downward_and_in_no_circle():
    inside = [(a, line, b) for a, line, b in edges() if engine_part(a) and engine_part(b) and a != b]
    parts = {engine_part(m) for m in map(module_name, MODULES) if engine_part(m)}
    assert parts == set(ENGINE_LAYERS), f"every part of the engine has a layer: {sorted(parts ^ set(ENGINE_LAYERS))}"
    upward = [f"{a}:{line} imports {b}" for a, line, b in inside if ENGINE_LAYERS[engine_part(b)] > ENGINE_LAYERS[engine_part(a)]]
    assert not upward, "\n".join(upward)
    graph: dict = {}
    for a, _, b in inside:
        graph.setdefault(a, set()).add(b)
    assert not _circle(graph), " -> ".join(_circle(graph))


def _circle(graph: dict) -> list:
    """One circle of `graph` (module -> the modules it imports), as the modules on it; [] when there is none."""
    state: dict = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = "done"
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return []


def test_the_circle_finder_finds_a_planted_circle_and_none_where_there_is_none():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_engine_and_the_sandbox_are_joined_only_by_a_name():
    """The sandbox runs the engine's questions by the module name the course gives, and that name is real."""
    assert importlib.util.find_spec(kit.QUESTIONS) is not None
    assert importlib.util.find_spec(containment.INSIDE) is not None
    assert kit.QUESTIONS.startswith(SELF_CONTAINED[1] + ".") and containment.INSIDE == SELF_CONTAINED[0]
    job = importlib.import_module(kit.QUESTIONS)
    assert {"ready", "run_job", "PROBES", "FORWARD_PROBES"} <= set(dir(job))


def test_what_the_sandbox_runs_imports_nothing_of_the_kit_outside_itself():
    wrong = [
        f"{source}:{line} imports {target}"
        for source, line, target in edges()
        for package in SELF_CONTAINED
        if source.startswith(package) and not (target.startswith(package) or target in _ancestors(package))
    ]
    assert not wrong, "\n".join(wrong)


def _ancestors(package: str) -> set[str]:
    parts = package.split(".")
    return {".".join(parts[:depth]) for depth in range(1, len(parts))}


def test_the_package_files_on_the_way_to_the_sandbox_s_code_import_nothing():
    """The server imports `autograder`, `autograder.sandbox`, `autograder.engine` on its way to what it runs: they
    (and every wing's own `__init__.py`) pull in no grading code."""
    packages = {module_name(path) for path in MODULES if path.name == "__init__.py"}
    wrong = [
        f"{source}:{line} imports {target}" for source, line, target in edges() if source in packages and source.count(".") <= 1
    ]
    assert not wrong, "\n".join(wrong)


def test_a_fresh_server_and_a_child_s_job_load_only_their_own_packages():
    """Run, not read: importing the server and the questions' job in a fresh interpreter loads nothing else of the
    kit (whatever a future import inside a function may do, this is what a child starts with)."""
    code = (
        f"import importlib, sys; importlib.import_module('{containment.INSIDE}.server'); "
        f"importlib.import_module('{kit.QUESTIONS}'); "
        "print('\\n'.join(m for m in sys.modules if m.startswith('autograder')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=kit.ROOT).stdout.split()
    allowed = {*_ancestors(SELF_CONTAINED[0]), *_ancestors(SELF_CONTAINED[1])}
    stray = [m for m in loaded if m not in allowed and not m.startswith(SELF_CONTAINED)]
    assert loaded and not stray, stray


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_reader_can_hold_each_piece(path):
    lines = path.read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.name}: {lines} lines"
    tree = ast.parse(path.read_text())
    big = [
        (n.name, n.end_lineno - n.lineno + 1)
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > MAX_CLASS_LINES
    ]
    assert not big, big


def test_the_tests_mirror_the_wings():
    tests = kit.ROOT / "tests"
    assert {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))} == set(WINGS)
    assert [p.name for p in tests.glob("test_*.py")] == [Path(__file__).name]  # the whole package's own
    quick = {path.parent.name for path in tests.rglob("test_*.py") if "pytestmark = pytest.mark.quick" in path.read_text()}
    assert quick == {*WINGS, "tests"}, f"make test-quick touches only {sorted(quick)}"


# ---- names the prose gives -------------------------------------------------------------------------------

TEXTS = sorted(p for folder in ("autograder", "tests", "benchmarks") for p in (kit.ROOT / folder).rglob("*.py"))
TEXTS += kit.documentation_pages()  # README.md and docs/*.md
DOTTED = re.compile(r"\bautograder(?:\.[A-Za-z_]\w*)+")
FILE = re.compile(r"`([\w./-]+\.py)`")
FLAT = re.compile(r"\bnbgrader_\w+")  # how modules of nbgrader/ were called when the package was flat
NOT_OURS = {
    "autograder.zip": "the Gradescope bundle's file name",
    "autograder.late": "a logger's name",
    "jupyterhub_config.py": "JupyterHub's configuration, which a hub's administrator writes",
    "jupyter_server_config.py": "an instructor's own Jupyter server configuration, in their ~/.jupyter",
}


def _repository_files() -> set[str]:
    found = set()
    for folder, folders, files in os.walk(kit.ROOT):
        folders[:] = [f for f in folders if not f.startswith((".", "__pycache__", "build")) and not f.endswith("egg-info")]
        found |= {(Path(folder) / name).relative_to(kit.ROOT).as_posix() for name in files}
    return found


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names |= {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _names_a_module(name: str) -> bool:
    """The dotted name is a module of the package, or a name that the module its leading parts name defines."""
    parts = name.split(".")
    for depth in range(len(parts), 0, -1):
        base = kit.ROOT.joinpath(*parts[:depth])
        for path in (base.parent / f"{base.name}.py", base / "__init__.py"):
            if path.is_file():
                return depth == len(parts) or parts[depth] in _defined(path)
    return False


def test_every_module_and_file_the_text_names_exists():
    """A dotted `autograder.…` name, a file name ending in .py in backticks and an `nbgrader_…` name, wherever the
    code, its tests, its benchmarks or the documentation (README.md, docs/*.md) write one (docstrings, comments,
    strings), name what exists: a module of the package (and the name it defines), a file of the repository, a name
    the code gives (an identifier, or a string that is one: a label, a key). A module renamed or moved leaves no
    stale name behind."""
    files = _repository_files()
    identifiers = {Path(f).stem for f in files}
    for path in TEXTS:
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(path.read_text())):
                identifiers |= {
                    getattr(node, field)
                    for field in ("id", "attr", "name", "arg", "asname", "value")
                    if isinstance(getattr(node, field, None), str) and getattr(node, field).isidentifier()
                }
    stale = []
    for path in TEXTS:
        text, where = path.read_text(), path.relative_to(kit.ROOT)
        stale += [f"{where}: {name}" for name in DOTTED.findall(text) if name not in NOT_OURS and not _names_a_module(name)]
        stale += [
            f"{where}: {name}"
            for name in FILE.findall(text)
            if name not in NOT_OURS and not any(f == name or f.endswith("/" + name) for f in files)
        ]
        stale += [f"{where}: {name}" for name in FLAT.findall(text) if name not in identifiers]
    assert not stale, "\n".join(sorted(set(stale)))


# ---- the documentation's pages -----------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(page: Path) -> str:
    """A page without its code: fenced blocks (a shell comment is no heading) and `spans` (`f(t)` is no link)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page))


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them (lower case, punctuation dropped, spaces as hyphens)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_link_between_the_pages_lands_and_the_readme_links_every_page():
    """A relative link of README.md or docs/*.md names a file of the repository and, after a #, a heading of that
    page; the README links every page of docs/."""
    broken, linked = [], set()
    for page in kit.documentation_pages():
        for target in _links(page):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            place = (page.parent / path).resolve() if path else page
            linked.add(place)
            if not place.exists() or anchor and anchor not in _anchors(place):
                broken.append(f"{page.relative_to(kit.ROOT)}: {target}")
    assert not broken, broken
    readme_links = {(kit.ROOT / t.partition("#")[0]).resolve() for t in _links(kit.ROOT / "README.md")}
    assert kit.documentation_pages()[1:] and set(kit.documentation_pages()[1:]) <= readme_links


# ---- the ten steps, written once ---------------------------------------------------------------------------

STEP_TABLE = PACKAGE / "engine" / "steps.py"
STEP_WORD = re.compile(r"step|boundary", re.IGNORECASE)  # a name that holds a step (`step`, `_sum_step`, `boundary`)


def _int_literals(node: ast.AST) -> list[ast.Constant]:
    """The integer literals that could be a step (1 to 10) in an expression, indices, slices and ranges aside."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Constant) and type(current.value) is int and 1 <= current.value <= len(STEPS):
            found.append(current)
        elif isinstance(current, ast.Subscript):
            stack.append(current.value)
        elif isinstance(current, ast.Call) and _callee(current) == "range":
            continue  # a range's bounds count (layers, tries), they name no step
        else:
            stack.extend(ast.iter_child_nodes(current))
    return found


def _named_for_a_step(node: ast.AST) -> bool:
    """A name, attribute or subscript of one whose last name says it holds a step (`found.step`, `seen.boundary`)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return bool(STEP_WORD.search(name))


def _unpacked(target: ast.AST) -> list[ast.AST]:
    """What an assignment writes: each name of a tuple or list it unpacks, else the target itself (`counts[step]`
    writes into `counts`, whatever its key is called)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _unpacked(element)]
    return [target.value if isinstance(target, ast.Starred) else target]


def _callee(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else ""


def step_parameters(trees: list[ast.Module]) -> dict[str, set[int]]:
    """Callable name -> the positions of its parameters named for a step, over every function and dataclass of the
    package (a method's `self` not counted): `Found(boundary, step, ...)` gives {0, 1}."""
    found: dict[str, set[int]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                found.setdefault(node.name, set()).update(i for i, f in enumerate(fields) if STEP_WORD.search(f))
                for method in (s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))):
                    names = [a.arg for a in method.args.posonlyargs + method.args.args][1:]
                    found.setdefault(method.name, set()).update(i for i, a in enumerate(names) if STEP_WORD.search(a))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                found.setdefault(node.name, set()).update(i for i, a in enumerate(names) if STEP_WORD.search(a))
    return {name: places for name, places in found.items() if places}


def step_literals(tree: ast.Module, parameters: dict[str, set[int]]) -> list[int]:
    """The lines where a module writes a step number (an integer 1 to 10) where a step goes: as an argument of a
    parameter named for a step (by position or keyword), beside a name for a step in a comparison (`step in (2, 3)`)
    or an assignment (`step = 7`, `for ..., step in ((..., 5), ...)`, a key "steps"), returned by a function named
    for a step, or in a table from numbers to numbers (`{3: 3, 4: 4}`). Other numbers (`10 * tol`, `range(1, n)`,
    `{1: "first"}`) are no steps."""
    places: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            positions = parameters.get(_callee(node), set())
            places += [arg for i, arg in enumerate(node.args) if i in positions]
            places += [k.value for k in node.keywords if k.arg and STEP_WORD.search(k.arg)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_named_for_a_step(side) for side in sides):
                places += [side for side in sides if not _named_for_a_step(side)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.iter if isinstance(node, ast.For) else node.value
            if value is not None and any(_named_for_a_step(t) for target in targets for t in _unpacked(target)):
                places.append(value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and STEP_WORD.search(node.name):
            places += [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
            places += [d for d, a in zip(node.args.defaults[::-1], node.args.args[::-1]) if STEP_WORD.search(a.arg)]
        elif isinstance(node, ast.Dict):
            places += [
                v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and STEP_WORD.search(str(k.value))
            ]
            parts = [*node.keys, *node.values]
            if len(node.keys) > 1 and all(part is not None and _int_literals(part) == [part] for part in parts):
                places.append(node)
    return sorted({literal.lineno for place in places for literal in _int_literals(place)})


@functools.cache
def _package_trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text()) for path in MODULES}


@functools.cache
def _package_step_parameters() -> dict[str, set[int]]:
    return step_parameters(list(_package_trees().values()))


def test_no_step_number_is_written_outside_the_table():
    """Pre-LN's ten steps are numbered in `engine/steps.py` alone: every other module names a step by what it is
    (its node, `NUMBER["n2"]`; a half's part, `HALVES["att"].sum`; `LAST_STEP_AT`), so the table can change in one
    place."""
    trees = _package_trees()
    parameters = _package_step_parameters()
    assert {"Diverged", "Divergence"} <= set(parameters), sorted(parameters)  # the rule sees them
    written = [
        f"{path.relative_to(kit.ROOT)}:{line}"
        for path, tree in trees.items()
        if path != STEP_TABLE
        for line in step_literals(tree, parameters)
    ]
    assert not written, "a step number written outside engine/steps.py:\n" + "\n".join(written)


PLANTED = {
    "Divergence(7, 'said', None)": True,
    "Divergence(NUMBER['h'], step=7)": True,
    "Divergence(HALVES['att'].norm if a else 6, 'said')": True,
    "LAST = {3: 3, 4: 4}": True,
    "first = found.step in (2, 3)": True,
    "if seen.boundary < 10: pass": True,
    "step, told = (7, []) if known else (None, [])": True,
    "def _sum_step(x):\n    return 10": True,
    "for value, step in (('h', 5), ('y', 10)): pass": True,
    "SIDE = {'att': {'steps': (2, 3, 4, 5)}}": True,
    "Diverged(4, 'train')": True,
    "ok = close(a, b, 10) and norm <= 10 * tol": False,
    "Divergence(LAST_STEP_AT[NUMBER['h']], 'said', None)": False,
    "values = [k for k in range(1, n + 1)] + [len(calls) == 1]": False,
    "WORDS = {1: 'first', 2: 'second'}": False,
    "count = sum(1 for c in calls if c.number == 2)": False,
    "steps = range(1, n + 1)": False,
    "counts[step] += 1": False,
    "step = 3 if late else 4": True,
}


@pytest.mark.parametrize("source", PLANTED, ids=range(len(PLANTED)))
def test_the_step_rule_fires_on_a_step_number_and_only_there(source):
    """The rule both ways: it finds a step number planted where a step goes, and leaves other numbers alone."""
    parameters = _package_step_parameters()
    assert bool(step_literals(ast.parse(source), parameters)) == PLANTED[source], source
