"""What one user who is not root can do to one path: the kernel's own answer, read off the file system (lstat, the
access lists in extended attributes) without opening, following or changing anything.

A user reaches a path only by searching every folder above its real place (`route` follows a link on the way as
the kernel does: `above` lists the folders). There they read it (list it, for a folder) or write it (make and
remove entries, for a folder) as its mode's owner bits (whoever owns a path may change its mode: an owner always
can), group bits (the group's members) or other bits (everyone else) say, or as its POSIX access list says where
it has one. A folder's default access list says what will be made in it. An access list the kit cannot evaluate
exactly (NFSv4's, or one it cannot parse) lets everyone in, and says so.
"""

from __future__ import annotations

import grp
import os
import stat
import struct
from dataclasses import dataclass, field

R, W, X = 4, 2, 1
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
ACCESS_ACL, DEFAULT_ACL = "system.posix_acl_access", "system.posix_acl_default"
OPAQUE = {  # access lists the kit does not evaluate
    "system.nfs4_acl": "an NFSv4 access list",
    "system.nfs4acl": "an NFSv4 access list",
    "system.richacl": "a rich access list",
}


@dataclass(frozen=True)
class Node:
    """One path as lstat and its access lists show it."""

    path: str
    uid: int
    gid: int
    mode: int
    acl: tuple = ()  # ((tag, perm, id), ...): its POSIX access list; () where it has none
    default: tuple = ()  # a folder's default access list
    opaque: str = ""  # an access list the kit cannot evaluate ("an NFSv4 access list")

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)


def parse_acl(data: bytes) -> tuple | None:
    """A POSIX access list as the kernel stores it (version 2, then tag, permissions and id per entry); None where
    it is not one."""
    if len(data) < 4 or (len(data) - 4) % 8 or struct.unpack_from("<I", data)[0] != 2:
        return None
    entries = tuple(struct.unpack_from("<HHI", data, offset) for offset in range(4, len(data), 8))
    if any(tag not in (USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER) or perm > 7 for tag, perm, _ in entries):
        return None
    return entries


def read_node(path: str) -> Node | None:
    """The path itself (a link is not followed), or None where nothing is there."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:  # no extended attributes on this file system
        names = []
    lists, opaque = {}, next((OPAQUE[n] for n in names if n in OPAQUE), "")
    for name in (ACCESS_ACL, DEFAULT_ACL):
        if name in names:
            parsed = parse_acl(os.getxattr(path, name, follow_symlinks=False))
            if parsed is None:
                opaque = opaque or "an access list"
            lists[name] = parsed or ()
    return Node(path, info.st_uid, info.st_gid, info.st_mode, lists.get(ACCESS_ACL, ()), lists.get(DEFAULT_ACL, ()), opaque)


@dataclass(frozen=True)
class User:
    """Another user, as far as these paths are concerned: their uid where they own one of them or an access list
    names them (else None), the groups of theirs that these paths concern, and a name to say."""

    uid: int | None
    gids: frozenset
    name: str


ANYONE = User(None, frozenset(), "any user")


@dataclass(frozen=True)
class Grant:
    via: str  # "owner", "mode", "acl" or "opaque"
    text: str  # "mode 0755: any user"


def grant(node: Node, user: User, want: int) -> Grant | None:
    """How `user` gets every permission of `want` (R, W, X) on `node`, or None where they do not."""
    if user.uid is not None and user.uid == node.uid:
        return Grant("owner", f"{user.name} owns it")
    if node.opaque:
        return Grant("opaque", f"{node.opaque} the kit cannot read exactly")
    if node.acl and node.mode & 0o070:  # the kernel reads an access list only where its mask grants something
        return _acl_grant(node.acl, node.gid, user, want)
    mode, member = f"mode {stat.S_IMODE(node.mode):04o}", node.gid in user.gids
    if (node.mode >> 3 if member else node.mode) & want != want:
        return None
    return Grant("mode", f"{mode}: {user.name}" + (f", through group {group_name(node.gid)}" if member else ""))


def _acl_grant(entries: tuple, gid: int, user: User, want: int, what: str = "its access list") -> Grant | None:
    """The kernel's reading of a POSIX access list (posix_acl_permission), for a user who does not own the file: a
    named entry, else the first of their groups' entries that has `want`, each within the mask; else the other
    entry, unless one of their groups is listed at all."""
    mask = next((perm for tag, perm, _ in entries if tag == MASK), 7)
    named = [perm for tag, perm, ident in entries if tag == USER and ident == user.uid]
    if named:
        return Grant("acl", f"{what} names {user.name}") if named[0] & mask & want == want else None
    groups = [
        (perm, gid if tag == GROUP_OBJ else ident)
        for tag, perm, ident in entries
        if (tag == GROUP_OBJ and gid in user.gids) or (tag == GROUP and ident in user.gids)
    ]
    if groups:
        first = next(((perm, group) for perm, group in groups if perm & want == want), None)
        if first is None or first[0] & mask & want != want:
            return None
        return Grant("acl", f"{what}: {user.name}, through group {group_name(first[1])}")
    other = next((perm for tag, perm, _ in entries if tag == OTHER), 0)
    return Grant("acl", f"{what}: {user.name}") if other & want == want else None


def default_grant(node: Node, user: User) -> Grant | None:
    """What a folder's default access list will give `user` on what is made in it (read or write)."""
    if not node.default or not node.is_dir:
        return None
    for want in (R, W):
        found = _acl_grant(node.default, node.gid, user, want, "its default access list for new files")
        if found:
            return found
    return None


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


# --- where a path really is, and the lookups on the way ------------------------------------------------------


@dataclass
class Route:
    real: str | None  # the path's real place; None where some part of it is missing
    steps: list = field(default_factory=list)  # (folder's real path, name looked up in it), links followed


def route(path: str, look) -> Route:
    """Every lookup the kernel makes to reach `path` (absolute), as `look(real path) -> Node | None` shows the
    file system."""
    found = Route(None)
    found.real = _resolve(path, "/", found.steps, look, 0)
    return found


def _resolve(path: str, start: str, steps: list, look, hops: int) -> str | None:
    current = "/" if path.startswith("/") else start
    for name in (part for part in path.split("/") if part not in ("", ".")):
        folder = look(current)
        if folder is None or not folder.is_dir:
            return None
        steps.append((current, name))
        if name == "..":
            current = os.path.dirname(current)
            continue
        here = os.path.join(current, name)
        entry = look(here)
        if entry is None:
            return None
        if entry.is_link:
            if hops >= 40:
                raise OSError(40, "too many levels of symbolic links", path)
            current = _resolve(os.readlink(here), current, steps, look, hops + 1)
            if current is None:
                return None
        else:
            current = here
    return current


def above(real: str) -> list[str]:
    """The folders above a real path, from / down."""
    parts = [part for part in real.split("/") if part]
    return ["/" + "/".join(parts[:depth]) for depth in range(len(parts))]
