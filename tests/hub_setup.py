"""The hub set-up of docs/deployment.md ("Set up a hub"), run as written: every shell block, root's as root, each
instructor's in a login shell of theirs with nothing from root's shell, the first block's places pointed at a
test's own folders. The tests that follow it (tests/frontends/test_exchange.py, tests/frontends/test_hub.py) are
instructors of one machine: the kit's checkout, the environment (the expensive part, minutes of pip), bubblewrap,
formgrader turned off in the environment and the proxy are the machine's (`machine`, made once per test session
and shared), and so are root's blocks that set them up (`machine_block`: those that name no place of one hub's),
run as written once per machine, by the first module's `set_up`; every module runs the hub's own blocks (the
environment on the PATH, the course id and exchange, the hub's configuration) with its own places."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import hub_users
from autograder.course import kit

STUDENTS_GROUP, INSTRUCTORS_GROUP = f"{hub_users.PREFIX}class", f"{hub_users.PREFIX}staff"
START = "# as root: start the hub"
# the places of the first block that are one hub's (every other is the machine's: the kit, the environment, the
# interpreter, torch's index, the course's groups)
HUB_PLACES = ("HUB_CONFIG", "PROFILE", "EXCHANGE", "COURSE_ID", "JUPYTERHUB", "HUB_STATE", "HUB_URL")


def setup_steps() -> list[tuple[str, str]]:
    """Each shell block of "Set up a hub" with who runs it ("root" or "instructor", from its first line, "# as root:
    ..." or "# as each instructor: ...")."""
    section = kit.documentation("deployment.md").split("\n## Set up a hub\n", 1)[1].split("\n## ", 1)[0]
    steps = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL):
        who = re.match(r"# as (root|each instructor)\b", block)
        assert who, f"a set-up block that does not say who runs it: {block[:80]}"
        steps.append(("root" if who.group(1) == "root" else "instructor", block))
    return steps


def with_places(block: str, places: dict) -> str:
    """The first block, its assignments pointed at a test's own places (every one of them: a variable the page
    adds must be given a place here)."""
    names = re.findall(r"^([A-Z_]+)=", block, flags=re.MULTILINE)
    assert sorted(names) == sorted(places), (names, sorted(places))
    return re.sub(r"^([A-Z_]+)=\S+", lambda m: f"{m.group(1)}={shlex.quote(str(places[m.group(1)]))}", block, flags=re.MULTILINE)


def machine_block(block: str) -> bool:
    """A block of root's that sets up the machine, not one hub of it: it names none of `HUB_PLACES`."""
    named = set(re.findall(r"\$\{?([A-Z_]+)", block))
    return not named & set(HUB_PLACES)


def pip_cache() -> dict:
    """The pip cache of the user running the tests (its configuration's, else pip's own default), for root's pip in
    the set-up, whose HOME is a test folder: the environment's wheels come from the one cache the kit's other
    installs use (tests/frontends/test_install.py, tests/course/test_student_setup.py), as root's own pip would."""
    if "PIP_CACHE_DIR" in os.environ or "PIP_NO_CACHE_DIR" in os.environ:  # passed on as they are
        return {}
    found = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    return {"PIP_CACHE_DIR": found.stdout.strip()} if found.returncode == 0 and found.stdout.strip() else {}


def torch_index() -> str:
    """The index this machine's pip uses for everything (its configuration's, else pip's own default), for the
    set-up's torch line: the CPU wheel and its dependencies then come from where pip finds packages here, not
    from PyTorch's index, which a machine without the network cannot reach."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    found = re.findall(r"^(?:global|install)\.index-url='([^' ]+)", listed, flags=re.MULTILINE)
    if os.environ.get("PIP_INDEX_URL") or found:
        return os.environ.get("PIP_INDEX_URL") or found[0]
    return subprocess.run(
        [sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def machine() -> SimpleNamespace:
    """What the tests' hubs share: the kit's checkout where its readers can read it (docs/deployment.md: a git
    clone), the place of the environment (installed by the first module's set-up), the interpreter every user can
    run (a copy of this one where they cannot run this one), and npm's global folder (`npm install --global` puts
    the proxy there, and its `bin` stands for /usr/local/bin on the hub's PATH). `remove()` when done.

    KIT_HUB_MACHINE names a folder to keep the machine in and use again in later sessions (the set-up then finds the
    environment installed, as it does in a session's second module); the kit's checkout there is copied afresh."""
    kept = os.environ.get("KIT_HUB_MACHINE")
    root = Path(kept) if kept else Path(tempfile.mkdtemp(prefix=f"{hub_users.PREFIX}hub-", dir="/tmp"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    kit_copy = root / "kit"
    subprocess.run(["rm", "-rf", str(kit_copy)], check=True)
    kit_copy.mkdir()
    for entry in kit.ROOT.iterdir():
        if entry.name not in hub_users.KEEP_OUT and not entry.name.endswith(".egg-info"):
            subprocess.run(["cp", "-a", str(entry), str(kit_copy / entry.name)], check=True)

    def remove():  # an environment's tens of thousands of files take minutes to remove here: not waited for
        if not kept:
            subprocess.Popen(
                ["rm", "-rf", str(root)], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

    return SimpleNamespace(
        root=root,
        kit=kit_copy,
        env=root / "env",
        interpreter=hub_users.interpreter_for(hub_users.user("inst")),
        npm=root / "npm",
        remove=remove,
        said=None,  # what root's blocks of the machine printed, once they ran (`set_up`)
    )


def set_up(shared: SimpleNamespace, root: Path, *, course_id: str = "dl101", hub_url: str = "http://127.0.0.1:8000"):
    """Root's blocks of the set-up (every one but starting the hub), run as written with this module's places under
    `root` and the machine's `shared` ones: the machine's blocks (`machine_block`) the first time only, the hub's
    every time. Gives the places (lower-case names), what the blocks printed (the machine's included), and the
    environment root's and the users' shells start with (JUPYTER_CONFIG_PATH stands for /etc/jupyter, which every
    user reads)."""
    places = {
        "KIT": shared.kit,
        "ENV": shared.env,
        "PYTHON": shared.interpreter,
        "TORCH_INDEX": torch_index(),
        "HUB_CONFIG": root / "etc-jupyter",
        "PROFILE": root / "profile.d",
        "EXCHANGE": root / "exchange",
        "COURSE_ID": course_id,
        "STUDENTS": STUDENTS_GROUP,
        "INSTRUCTORS": INSTRUCTORS_GROUP,
        "JUPYTERHUB": root / "etc-jupyterhub",
        "HUB_STATE": root / "srv-jupyterhub",
        "HUB_URL": hub_url,
    }
    (root / "profile.d").mkdir()
    steps = setup_steps()
    variables = with_places(steps[0][1], places)
    # this machine's settings for pip and npm (its index, its certificates, its proxy), as root's shell has them here
    settings = ("PIP_", "NPM_CONFIG_", "NODE_EXTRA_CA_CERTS", "SSL_CERT_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "LANG", "LC_")
    machine_env = {k: v for k, v in os.environ.items() if k.upper().startswith(settings)}
    # pip compiles the bytecode ahead, as it does by default: an instructor cannot write it into root's environment,
    # and without it every command of theirs would compile what it imports (2.3 s more for torch alone, measured here)
    machine_env.pop("PIP_NO_COMPILE", None)
    machine_env.update(pip_cache())
    environment = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "JUPYTER_CONFIG_PATH": str(places["HUB_CONFIG"])}
    as_root = {
        **machine_env,
        **environment,
        "PATH": f"{shared.npm / 'bin'}:{environment['PATH']}",
        "NPM_CONFIG_PREFIX": str(shared.npm),
        "HOME": str(root),
    }

    def run(blocks: list[str]) -> str:
        said = []
        for block in blocks:
            done = subprocess.run(
                ["bash", "-c", f"set -euo pipefail\n{variables}\n{block}"],
                cwd=root,
                env=as_root,
                capture_output=True,
                text=True,
                timeout=1500,
            )
            said.append(done.stdout + done.stderr)
            assert done.returncode == 0, f"set-up step of docs/deployment.md failed (root):\n{block}\n{said[-1][-3000:]}"
        return "\n".join(said)

    roots = [block for who, block in steps[1:] if who == "root" and not block.startswith(START)]
    if shared.said is None:
        shared.said = run([block for block in roots if machine_block(block)])
    said = [shared.said, run([block for block in roots if not machine_block(block)])]
    return SimpleNamespace(
        **{k.lower(): v for k, v in places.items() if k != "PYTHON"},
        interpreter=places["PYTHON"],
        variables=variables,
        said="\n".join(said),
        environment=environment,
        as_root=as_root,
        python=shared.env / "bin" / "python",
    )


def join(login: str, group: str) -> None:
    """The account step of the set-up (docs/deployment.md: `adduser NAME GROUP`), for an existing test user."""
    subprocess.run(["usermod", "--append", "--groups", group, login], check=True, capture_output=True)


def instructor_block() -> str:
    (block,) = [block for who, block in setup_steps() if who == "instructor"]
    return block


def run_instructor_block(setup: SimpleNamespace, login: str, home: Path, strict: bool = True):
    """The instructor's block, in a login shell of theirs (it reads the profile folder first), with nothing from
    root's shell. `strict`: stop at the first failing command (set -euo pipefail), else run on as a pasted block
    does."""
    script = ("set -euo pipefail\n" if strict else "") + instructor_block()
    login_shell = f'. "{setup.profile}/layernorm-kit.sh"\n{script}'
    return subprocess.run(
        hub_users.command_as(login, ["bash", "-c", login_shell]),
        cwd=home,
        env={**setup.environment, "HOME": str(home), "USER": login, "LOGNAME": login},
        capture_output=True,
        text=True,
        timeout=600,
    )
