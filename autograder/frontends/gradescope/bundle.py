"""The Gradescope autograder: one zip to upload as a "Programming Assignment" autograder.

Gradescope unpacks the zip into `/autograder/source/`, runs its `setup.sh` once while it builds the image
(Ubuntu, as root, network on), then for every submission copies the student's files into
`/autograder/submission/`, runs `/autograder/run_autograder` and reads `/autograder/results/results.json`.

The zip holds only what grading needs, in the repository's own layout (so `kit.ROOT` is the unpacked
source folder): the `autograder` package, `requirements.txt`, `pyproject.toml`, the kit's annotated source
notebook and, when bundled from a course (`gradescope-bundle --course`), the course's copy of the assignment,
from which the grader reads the provided code, the reference solution and the points. `assignment.txt` names
the source notebook run_autograder grades against. Both scripts honour
`AUTOGRADER_ROOT` (default `/autograder`); `run_autograder` also honours `AUTOGRADER_PYTHON` (the Python
to grade with, default the virtual environment `setup.sh` made) and `AUTOGRADER_DEVICE` (auto/cpu/cuda).

This module is also what `run_autograder` calls for the two steps around `python -m autograder grade`:

    python -m autograder.frontends.gradescope.bundle pick SUBMISSION_DIR SOURCE     prints the file to grade, or nothing
    python -m autograder.frontends.gradescope.bundle nothing RESULTS_JSON SOURCE    writes a zero score with a message
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from autograder.course import kit

# Where each bundled file comes from, relative to the repository root (= kit.ROOT).
PACKAGE = "autograder"
FILES = ("requirements.txt", "pyproject.toml")
EXCLUDED_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".tmp", ".swp")
EXECUTABLE, REGULAR = 0o100755, 0o100644
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # a reproducible zip: the same tree gives the same bytes

ASSIGNMENT_FILE = "assignment.txt"  # the source notebook graded against, relative to the unpacked folder


def no_submission(notebook_name: str = kit.KIT.notebook_name) -> str:
    return f"No notebook or .py file was found in your submission: upload your completed {notebook_name} (or a .py export of it)."


NO_SUBMISSION = no_submission()

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (network on).
# It makes a virtual environment with the kit's pinned dependencies (requirements.txt). torch comes from
# PyTorch's CPU index: Gradescope's graders have no GPU, and the default build drags in gigabytes of CUDA.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="${AUTOGRADER_VENV:-$ROOT/venv}"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1

has_apt() {       # AUTOGRADER_NO_APT=1: an image prepared already (or a dry run): no system packages
  [ "${AUTOGRADER_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1
}
apt_install() {   # best effort: the grader works without any of these extras
  has_apt && apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}
if has_apt; then apt-get update -qq >/dev/null 2>&1 || true; fi
apt_install python3 python3-venv python3-pip || true
apt_install bubblewrap || echo "setup.sh: bubblewrap not installed; grading runs without it"

find_python() {   # the kit needs Python 3.11 or newer
  local candidate
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
PYTHON="$(find_python || true)"
if [ -z "$PYTHON" ]; then
  apt_install python3.11 python3.11-venv || true
  PYTHON="$(find_python || true)"
fi
if [ -z "$PYTHON" ]; then
  echo "setup.sh: Python 3.11 or newer is needed; choose Gradescope's Ubuntu 24.04 base image" >&2
  exit 1
fi
if ! "$PYTHON" -m venv "$VENV"; then
  apt_install "$(basename "$PYTHON")-venv" || true
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet --extra-index-url "$TORCH_INDEX_URL" -r "$SOURCE/requirements.txt"
# the kit itself is not installed: run_autograder puts the source folder on PYTHONPATH
PYTHONPATH="$SOURCE" MPLBACKEND=Agg "$VENV/bin/python" -c "import autograder.grading.submission, autograder.frontends.classgrade"
# the kit, its reference solution and its notebook: no one but root may read them (a submission runs as a
# user of its own, and Gradescope's containers often cannot start bubblewrap or make namespaces)
chmod -R o-rwx "$SOURCE"
chmod o+x "$ROOT"
echo "setup.sh: ready ($("$VENV/bin/python" --version), $VENV)"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission/, write
# /autograder/results/results.json. AUTOGRADER_ROOT moves the whole layout (the kit's tests use it);
# AUTOGRADER_PYTHON picks the Python (default: setup.sh's virtual environment); AUTOGRADER_DEVICE the device.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
RESULTS="$ROOT/results/results.json"
export PYTHONPATH="$SOURCE${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
cd "$SOURCE" || exit 1

NOTEBOOK="$SOURCE/$(cat "$SOURCE/assignment.txt")"
SUBMISSION="$("$PYTHON" -m autograder.frontends.gradescope.bundle pick "$ROOT/submission" "$NOTEBOOK")" || {
  echo "run_autograder: could not look for the submission" >&2; exit 1; }
if [ -z "$SUBMISSION" ]; then
  exec "$PYTHON" -m autograder.frontends.gradescope.bundle nothing "$RESULTS" "$NOTEBOOK"
fi
echo "run_autograder: grading $SUBMISSION"
# everything under $ROOT but Python is out of the submission's sight (covered, or closed by permissions); the
# container holds this one submission alone, so file permissions are enough where namespaces and Landlock fail
exec "$PYTHON" -m autograder grade "$SUBMISSION" --results "$RESULTS" --device "${AUTOGRADER_DEVICE:-auto}" \
  --source "$NOTEBOOK" --private "$ROOT" --alone
"""

SCRIPTS = {"setup.sh": SETUP_SH, "run_autograder": RUN_AUTOGRADER}


def source_name(source: kit.Assignment) -> str:
    """Where a source notebook lies in the bundle: the kit's own where it is, a course's copy beside it."""
    if source.source == kit.SOURCE_NOTEBOOK.resolve():
        return kit.SOURCE_NOTEBOOK.relative_to(kit.ROOT).as_posix()
    return f"{kit.COURSE_DIR.name}/source/{source.name}/{source.notebook_name}"


def bundled_files(root: Path = kit.ROOT, source: kit.Assignment = kit.KIT) -> dict[str, Path]:
    """Archive name -> file on disk, for everything but the two scripts and assignment.txt."""
    root = Path(root)
    files = {}
    for path in sorted((root / PACKAGE).rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not EXCLUDED_PARTS & set(relative.parts) and not path.name.endswith(EXCLUDED_SUFFIXES):
            files[relative.as_posix()] = path
    for name in FILES:
        files[name] = root / name
    notebook = kit.SOURCE_NOTEBOOK.relative_to(kit.ROOT)
    files[notebook.as_posix()] = root / notebook
    files[source_name(source)] = source.source
    missing = [name for name, path in files.items() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"cannot bundle, missing: {', '.join(missing)}")
    return files


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix: Gradescope's unzip then keeps the permission bits
    archive.writestr(info, data)


def build_bundle(out: str | Path, root: Path = kit.ROOT, source: kit.Assignment = kit.KIT) -> Path:
    """Write the autograder zip to `out`, grading against `source` (a course's copy, or the kit's); returns its
    path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    files = bundled_files(root, source)
    temporary = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(temporary, "w") as archive:
        for name, text in SCRIPTS.items():
            _add(archive, name, text.encode(), EXECUTABLE)
        _add(archive, ASSIGNMENT_FILE, source_name(source).encode(), REGULAR)
        for name, path in files.items():
            _add(archive, name, path.read_bytes(), REGULAR)
    temporary.replace(out)
    return out


def pick_submission(folder: Path, source: kit.Assignment = kit.KIT) -> Path | None:
    """The file to grade in Gradescope's submission folder (the same choice as for a class's folders)."""
    from autograder.frontends.discovery import pick_file

    folder = Path(folder)
    return pick_file(folder, source) if folder.is_dir() else None


def write_nothing_to_grade(results: Path, source: kit.Assignment = kit.KIT) -> str:
    """results.json for a submission with nothing gradable: every test at 0, the reason as the output."""
    from .results import write_results
    from autograder.frontends.standing import standing_of
    from autograder.grading.submission import unreadable

    message = no_submission(source.notebook_name)
    result = unreadable("submission", message, seed=0, device="none", assignment=source)
    return write_results(result, results, standing=standing_of(result, source))["output"]


def main(argv: list[str]) -> int:
    source = kit.Assignment(argv[2]) if len(argv) == 3 else kit.KIT
    if len(argv) in (2, 3) and argv[0] == "pick":
        found = pick_submission(Path(argv[1]), source)
        print(found or "")
        return 0
    if len(argv) in (2, 3) and argv[0] == "nothing":
        print(write_nothing_to_grade(Path(argv[1]), source))
        return 0
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
