"""Who else can read or write a course (`autograder.frontends.openings`, `autograder.frontends.nbgrader.privacy`),
checked against what other users really do: real unprivileged users try to read, write, rename and make each of
a generated course's private paths, and the kit must call a path open exactly where one of them succeeded."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

import hub_users
from autograder.frontends import access
from autograder.frontends.nbgrader import privacy
from autograder.frontends.openings import openings
from course_states import NAME, Course
from nbgrader_course import make_course

# a course's private paths, below the folder `a` that holds it: kind, and where it is when the source is a link
SKELETON = {
    "a": "dir",
    "a/course": "dir",
    "a/course/gradebook.db": "file",
    "a/course/source": "dir",
    "a/course/source/layernorm": "dir",
    "a/course/source/layernorm/layernorm.ipynb": "file",
    "a/course/submitted": "dir",
    "a/course/submitted/ada": "dir",
    "a/course/submitted/ada/layernorm": "dir",
    "a/course/submitted/ada/layernorm/layernorm.ipynb": "file",
    "a/course/autograded": "dir",
}
TOPS = ("a/course", "a/course/gradebook.db", "a/course/source", "a/course/submitted", "a/course/autograded", "a/course/feedback")
MODES = {
    "dir": [0o700, 0o750, 0o755, 0o711, 0o701, 0o770, 0o777, 0o1777, 0o1770, 0o705, 0o730, 0o703, 0o000],
    "file": [0o600, 0o640, 0o644, 0o660, 0o666, 0o604, 0o602, 0o620, 0o000],
}


@pytest.fixture(scope="module")
def people():
    """The course's owner, a classmate in a group of their own, and a user whom nothing here concerns."""
    own, peer, anyone = hub_users.user("prv-own"), hub_users.user("prv-peer"), hub_users.user("prv-any")
    team = hub_users.group("prv-team", [peer])
    return {"own": own, "peer": peer, "any": anyone, "team": team, "python": hub_users.interpreter_for(anyone)}


@pytest.fixture(scope="module")
def place():
    folder = Path(tempfile.mkdtemp(prefix="u19-privacy-", dir="/tmp"))
    folder.chmod(0o755)  # every user reaches it: the generated modes below decide
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def acl(owner_bits: int, peer: int | None, team: int | None, group_bits: int, mask: int, other: int, ids) -> bytes:
    entries = [(access.USER_OBJ, owner_bits, 0xFFFFFFFF)]
    entries += [(access.USER, peer, ids["peer"])] if peer is not None else []
    entries += [(access.GROUP_OBJ, group_bits, 0xFFFFFFFF)]
    entries += [(access.GROUP, team, ids["team"])] if team is not None else []
    entries += [(access.MASK, mask, 0xFFFFFFFF), (access.OTHER, other, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def attributes(kind: str, owners=("own", "root", "peer")):
    bits = st.integers(0, 7)
    return st.fixed_dictionaries(
        {
            "owner": st.sampled_from(owners),
            "group": st.sampled_from(["own", "team", "root"]),
            "mode": st.one_of(st.sampled_from(MODES[kind]), st.integers(0, 0o777)),
            "acl": st.none() | st.tuples(st.none() | bits, st.none() | bits, bits, bits),
        }
    )


@st.composite
def courses(draw):
    """A generated course: every path's owner, group, mode and (sometimes) access list; the source sometimes a link
    to a folder beside the course, the course sometimes reached through a link in another folder; and sometimes a
    group of instructors."""
    linked_source, linked_course = draw(st.booleans()), draw(st.booleans())
    paths = dict(SKELETON)
    if linked_source:
        paths = {(p.replace("a/course/source", "a/src", 1)): kind for p, kind in paths.items()}
    if linked_course:
        paths["b"] = "dir"
    found = {p: draw(attributes(kind, ("own",) if p == "a/course" else ("own", "root", "peer"))) for p, kind in paths.items()}
    return {"paths": paths, "attributes": found, "linked_source": linked_source, "linked_course": linked_course,
            "trusted": draw(st.booleans())}  # fmt: skip


def build(base: Path, case: dict, ids: dict) -> Path:
    """The course on disk; the folder it is named by (through a link where the case says so)."""
    for path, kind in sorted(case["paths"].items()):
        target = base / path
        target.mkdir() if kind == "dir" else target.write_bytes(b"{}")
    if case["linked_source"]:
        (base / "a/course/source").symlink_to("../src")
    if case["linked_course"]:
        (base / "b/course").symlink_to("../a/course")
    for path in sorted(case["paths"], reverse=True):
        got, target = case["attributes"][path], base / path
        os.chown(target, ids[got["owner"]], ids[f"{got['group']}-group"])
        os.chmod(target, got["mode"])
        if got["acl"] is not None:
            peer, team, group_bits, mask = got["acl"]
            mode = got["mode"]
            os.setxattr(target, access.ACCESS_ACL, acl(mode >> 6 & 7, peer, team, group_bits, mask, mode & 7, ids))
    return base / ("b/course" if case["linked_course"] else "a/course")


ORACLE = r"""
import json, os, stat, sys
spec, me = json.loads(sys.argv[1]), os.getuid()
found = {"rw": [], "replace": []}
for path in spec["own"]:  # what is theirs, they may first open to themselves: an owner can
    try:
        info = os.lstat(path)
        if info.st_uid == me and not stat.S_ISLNK(info.st_mode):
            os.chmod(path, stat.S_IMODE(info.st_mode) | 0o700)
    except OSError:
        pass
for key, path, folder in spec["paths"]:
    try:
        os.listdir(path) if folder else os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        found["rw"].append(key)
        continue
    except OSError:
        pass
    try:
        if folder:
            probe = os.path.join(path, ".probe")
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        found["rw"].append(key)
    except OSError:
        pass
for path in spec["replace"]:
    try:
        if os.path.lexists(path):
            os.rename(path, path + ".moved")
            os.rename(path + ".moved", path)
        else:
            os.mkdir(path)
            os.rmdir(path)
        found["replace"].append(path)
    except OSError:
        pass
print(json.dumps(found))
"""


def real(base: Path, key: str, case: dict) -> str:
    return str(base / (key.replace("a/course/source", "a/src", 1) if case["linked_source"] else key))


def routes(base: Path, case: dict) -> dict:
    """Per top: every entry whose replacement (or making, where it is missing) would change what the top is, from
    the test's own folders down (the system's folders above them are root's)."""
    common = ["b", "b/course"] if case["linked_course"] else []
    common += ["a", "a/course"]
    found = {}
    for top in TOPS:
        own = [top] if top != "a/course" else []
        if top == "a/course/source" and case["linked_source"]:
            own += ["a/src"]
        found[top] = [str(base.parent), str(base)] + [str(base / entry) for entry in common + own]
    return found


def tried(login: str, python: Path, spec: dict) -> dict:
    done = subprocess.run(
        hub_users.command_as(login, [python, "-I", "-S", "-c", ORACLE, json.dumps(spec)]),
        capture_output=True,
        text=True,
        cwd="/",
        env=hub_users.user_env(login, python),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.quick  # in `make test-quick`: this wing's fast tier
@settings(
    max_examples=int(os.environ.get("KIT_PRIVACY_EXAMPLES", 30)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=courses())
def test_the_kit_calls_a_path_open_exactly_where_another_user_reads_writes_or_replaces_it(case, people, place):
    own, peer, team = pwd.getpwnam(people["own"]), pwd.getpwnam(people["peer"]), grp.getgrnam(people["team"]).gr_gid
    ids = {"own": own.pw_uid, "peer": peer.pw_uid, "root": 0, "team": team}
    ids.update({"own-group": own.pw_gid, "team-group": team, "root-group": 0})
    base = Path(tempfile.mkdtemp(dir=place))
    base.chmod(0o755)
    try:
        course = build(base, case, ids)
        coursedir = CourseDirectory(config=Config(), root=str(course))
        trusted = ids["team"] if case["trusted"] else None
        found = openings(privacy.private_paths(coursedir), owner=ids["own"], trusted=trusted, within=str(course))
        said = {(o.verb == "replace", o.path) for o in found}
        keys = [k for k in [*SKELETON, "a/course/feedback"] if k.startswith("a/course")]
        present = [(k, real(base, k, case)) for k in keys if os.path.lexists(real(base, k, case))]
        spec = {
            "own": [str(base / p) for p in sorted(case["paths"])],
            "paths": [(k, path, os.path.isdir(path)) for k, path in present],
            "replace": sorted({e for entries in routes(base, case).values() for e in entries}),
        }
        users = [people["any"]] + ([] if case["trusted"] else [people["peer"]])  # the team's members are instructors
        done = {"rw": set(), "replace": set()}
        for login in users:  # the user whom nothing concerns first: the classmate may open what is theirs
            got = tried(login, people["python"], spec)
            done["rw"] |= set(got["rw"])
            done["replace"] |= set(got["replace"])

        top_of = {k: next(t for t in sorted(TOPS, key=len, reverse=True) if k == t or k.startswith(t + "/")) for k in keys}
        for key in keys:
            path = real(base, key, case)
            kit = (False, path) in said or any((True, e) in said for e in routes(base, case)[top_of[key]])
            others = key in done["rw"] or any(e in done["replace"] for e in routes(base, case)[top_of[key]])
            assert kit == others, (key, kit, others, [o for o in found if o.path == path or o.verb == "replace"])
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- what the refusal says ---------------------------------------------------------------------------------


def kit_course(folder: Path, mode: int = 0o700) -> tuple[Path, CourseDirectory]:
    course = make_course(folder, ordinary=False)
    (course / "gradebook.db").write_bytes(b"")
    course.chmod(mode)
    return course, CourseDirectory(config=Config(), root=str(course))


def configured(**values) -> Config:
    config = Config()
    for name, value in values.items():
        setattr(config.KitCourse, name, value)
    return config


def test_a_group_counts_unless_it_is_the_instructors(people, place):
    course, coursedir = kit_course(place / "shared course", 0o770)
    shutil.chown(course, group=people["team"])
    line = privacy.exposure(coursedir, Config()).line
    quoted = shlex.quote(str(course))
    assert f"other users can read and write {course} (mode 0770: {people['peer']}, through group {people['team']})" in line
    assert line.endswith(f"run `chmod 700 {quoted}`"), line
    assert privacy.exposure(coursedir, configured(instructors_group=people["team"])) is None
    course.chmod(0o775)  # the instructors' group, and every other user too
    line = privacy.exposure(coursedir, configured(instructors_group=people["team"])).line
    assert line.endswith(f"run `chmod 2770 {quoted}`") and "(mode 0775: any user)" in line, line
    shutil.chown(course, group=people["own"])
    line = privacy.exposure(coursedir, configured(instructors_group=people["team"])).line
    assert line.endswith(f"run `chgrp {people['team']} {quoted} && chmod 2770 {quoted}`"), line
    line = privacy.exposure(coursedir, configured(instructors_group="u19-no-such-group")).line
    unknown = 'c.KitCourse.instructors_group = "u19-no-such-group" names no group on this machine'
    assert line == f"could not tell whether other users can read the course: {unknown}", line


def test_an_access_list_the_kit_cannot_read_counts_as_open(place, monkeypatch):
    course, coursedir = kit_course(place / "nfs", 0o700)
    listxattr = os.listxattr
    monkeypatch.setattr(access.os, "listxattr", lambda p, **k: ["system.nfs4_acl"] if p == str(course) else listxattr(p, **k))
    line = privacy.exposure(coursedir, Config()).line
    assert f"other users can read and write {course} (an NFSv4 access list the kit cannot read exactly)" in line, line
    assert line.endswith(f"run `chmod 700 {course}, and take other users out of its access list`"), line
    assert access.parse_acl(b"\x02\x00\x00\x00\x01\x00") is None and access.parse_acl(b"\x03\x00\x00\x00") is None


def test_an_access_list_whose_mask_grants_nothing_is_not_read_and_the_mode_decides(people, place):
    """The kernel consults an access list only where its mask (the mode's group bits) grants something: with a mask of
    0 an entry denying the classmate's group does not stop the mode's other bits (found by the property above)."""
    course, coursedir = kit_course(place / "masked", 0o705)
    (course / "source").chmod(0o700)
    (course / "gradebook.db").chmod(0o600)
    team = grp.getgrnam(people["team"]).gr_gid
    entries = [(access.USER_OBJ, 7, -1), (access.GROUP_OBJ, 0, -1), (access.GROUP, 0, team), (access.MASK, 0, -1)]
    entries += [(access.OTHER, 5, -1)]
    os.setxattr(
        course,
        access.ACCESS_ACL,
        struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i & 0xFFFFFFFF) for t, p, i in entries),
    )
    done = hub_users.run_as(people["peer"], [people["python"], "-I", "-S", "-c", f"import os; os.listdir({str(course)!r})"], "/")
    assert done.returncode == 0, done.stderr  # the classmate, in the group the list names with nothing, reads it
    found = openings(privacy.private_paths(coursedir), owner=os.getuid(), within=str(course))
    assert {(o.user.name, o.verb, o.how.text) for o in found if o.path == str(course)} == {
        ("any user", "read", "mode 0705: any user"),
        (people["peer"], "read", f"mode 0705: {people['peer']}"),
    }
    assert privacy.exposure(coursedir, Config()).line.startswith(f"other users can read {course} (mode 0705: any user)")


def test_a_default_access_list_counts_for_what_will_be_made_in_a_folder(people, place):
    course, coursedir = kit_course(place / "default", 0o711)  # others may pass through, and read nothing there
    (course / "source").chmod(0o700)
    (course / "gradebook.db").chmod(0o600)
    submitted = course / "submitted"
    submitted.mkdir(mode=0o711)
    peer = pwd.getpwnam(people["peer"]).pw_uid
    entries = [(access.USER_OBJ, 7, -1), (access.USER, 4, peer), (access.GROUP_OBJ, 0, -1), (access.MASK, 4, -1)]
    entries += [(access.OTHER, 0, -1)]
    os.setxattr(
        submitted,
        access.DEFAULT_ACL,
        struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i & 0xFFFFFFFF) for t, p, i in entries),
    )
    line = privacy.exposure(coursedir, Config()).line
    said = f"other users can read or write what is made in {submitted} (its default access list for new files names "
    assert line.startswith(f"{said}{people['peer']})"), line
    (submitted / "new.ipynb").write_text("{}")  # what nbgrader's collect makes there next: the classmate reads it
    done = hub_users.run_as(
        people["peer"], [people["python"], "-I", "-S", "-c", f"open({str(submitted / 'new.ipynb')!r}).read()"], "/"
    )
    assert done.returncode == 0, done.stderr


def test_a_source_folder_that_is_a_link_is_judged_where_it_really_is(place):
    course, coursedir = kit_course(place / "linked", 0o700)
    elsewhere = place / "repository"
    shutil.move(course / "source", elsewhere)
    (course / "source").symlink_to(elsewhere)
    elsewhere.chmod(0o755)
    line = privacy.exposure(coursedir, Config()).line
    assert line.startswith(f"other users can read {elsewhere} (mode 0755: any user)") and line.endswith(
        f"run `chmod 700 {elsewhere}`"
    ), line
    elsewhere.chmod(0o700)
    assert privacy.exposure(coursedir, Config()) is None


def test_a_folder_others_can_write_above_the_course_lets_them_replace_it(place):
    above = place / "courses"
    above.mkdir(mode=0o777)
    above.chmod(0o777)
    course, coursedir = kit_course(above / "dl101", 0o700)
    line = privacy.exposure(coursedir, Config()).line
    assert line.startswith(f"other users can replace {course} (in {above}, mode 0777: any user)"), line
    assert line.endswith(f"run `chmod +t {above}`"), line
    above.chmod(0o1777)  # sticky, as /tmp: nobody but the course's owner can rename the course
    assert privacy.exposure(coursedir, Config()) is None


# --- collected submissions, made private ---------------------------------------------------------------------


def test_collected_submissions_are_closed_to_others_whatever_a_student_put_there(place):
    course, coursedir = kit_course(place / "collected", 0o755)
    outside = place / "outside.txt"
    outside.write_text("not the course's")
    outside.chmod(0o666)
    elsewhere = place / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    elsewhere.chmod(0o777)
    folder = course / "submitted" / "ada" / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME}.ipynb").write_text("{}")
    (folder / "link").symlink_to(outside)
    (folder / "dangling").symlink_to(place / "nothing")
    os.mkfifo(folder / "pipe")
    (folder / "unreadable").write_text("x")
    (folder / "unreadable").chmod(0)
    os.close(os.open(os.fsencode(folder) + b"/\xff\xfe odd", os.O_CREAT | os.O_WRONLY, 0o666))
    deep = folder
    for level in range(privacy.MAX_DEPTH + 8):  # deeper than the kit walks: closed above, it is nobody's to reach
        deep = deep / f"d{level}"
        deep.mkdir(mode=0o777)
        deep.chmod(0o777)
    (course / "submitted" / "eve").mkdir()
    (course / "submitted" / "eve" / NAME).symlink_to(elsewhere)  # a submission that is a link: not followed
    for path in [course / "submitted", course / "submitted" / "ada", folder]:
        path.chmod(0o777)  # as nbgrader's collect leaves them

    assert privacy.close_submissions(coursedir, NAME, Config()) == []
    walked = [p for p in folder.rglob("*") if len(p.relative_to(folder).parts) <= privacy.MAX_DEPTH]
    for path in [course / "submitted", course / "submitted" / "ada", folder, *walked]:
        if not path.is_symlink():
            assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path
    assert stat.S_IMODE(outside.stat().st_mode) == 0o666 and stat.S_IMODE(elsewhere.stat().st_mode) == 0o777


STUDENT = r"""
import json, os, sqlite3, sys
course, found = sys.argv[1], {}
try:
    found["solutions"] = open(os.path.join(course, "source/layernorm/layernorm.ipynb")).read().count("BEGIN SOLUTION")
except OSError as error:
    found["solutions"] = error.strerror
try:
    book = sqlite3.connect("file:" + os.path.join(course, "gradebook.db") + "?mode=ro", uri=True)
    found["gradebook"] = [row[0] for row in book.execute("select name from sqlite_master where type = 'table'")]
except sqlite3.Error as error:
    found["gradebook"] = str(error)
try:
    planted = os.path.join(course, "submitted/ada/layernorm/planted.py")
    open(planted, "w").close()
    os.unlink(planted)
    found["classmate"] = "written"
except OSError as error:
    found["classmate"] = error.strerror
print(json.dumps(found))
"""


def test_a_student_cannot_read_a_private_course_nor_write_into_a_classmate_s_submission(people, place, monkeypatch):
    """As a real student of the hub: a course folder copied into a new home (mode 0755 on Debian) lets them read the
    solutions and the gradebook and plant a file in a classmate's submission; the documented set-up (the course
    folder at 0700) lets them do none of it, and the kit's check says so both ways. A course that chose to stay
    open still has its submissions closed once the kit has read them."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic
    hub = Course(place / "hub")
    course = hub.course
    hub.collect("ada", "correct", late=False, number=0)
    for path in [course / "submitted", course / "submitted" / "ada", course / "submitted" / "ada" / NAME]:
        path.chmod(0o777)  # as nbgrader's collect leaves them
    hub_users.give(course, people["own"])
    course.chmod(0o755)

    def student() -> dict:
        done = hub_users.run_as(people["any"], [people["python"], "-I", "-S", "-c", STUDENT, str(course)], "/")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    opened = student()
    assert opened["solutions"] > 0 and "assignment" in opened["gradebook"], opened
    assert opened["classmate"] == "written", opened
    assert f"run `chmod 700 {course}`" in privacy.exposure(hub.coursedir(), hub.config()).line

    course.chmod(0o700)  # docs/instructors.md, "The course folder"
    closed = student()
    assert closed == {
        "solutions": "Permission denied",
        "gradebook": "unable to open database file",
        "classmate": "Permission denied",
    }
    assert privacy.exposure(hub.coursedir(), hub.config()) is None

    course.chmod(0o755)  # open by the course's choice: the kit's intake still closes every submission it reads
    assert privacy.close_submissions(hub.coursedir(), NAME, hub.config()) == []
    assert student()["classmate"] == "Permission denied"
