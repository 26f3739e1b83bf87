"""Who else can read or write what lies below some folders: every other user of the machine (any user but an owner,
root and the members of a trusted group), each as the kernel sees them (`access`), on every path below the
folders and on the way to them.

A user whom none of these paths' owners, groups or access lists concerns stands for every such user (there always
is one: a student); every other user of the machine is looked at with their own groups, one per way they differ.
A folder nobody else can enter, whoever they are, is not walked: nothing below it is anyone else's to reach.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass

from .access import ANYONE, GROUP, GROUP_OBJ, MASK, USER, USER_OBJ, R, W, X, Grant, Node, User, above, default_grant, grant
from .access import read_node, route


def others(nodes, owner: int, trusted: int | None) -> list[User]:
    """One user per way these nodes can concern another user (see the module): `ANYONE` first."""
    uids = {n.uid for n in nodes} | {i for n in nodes for t, _, i in (*n.acl, *n.default) if t == USER}
    gids = {n.gid for n in nodes} | {i for n in nodes for t, _, i in (*n.acl, *n.default) if t == GROUP}
    members: dict[str, set] = {}
    for group in grp.getgrall():
        for login in group.gr_mem:
            members.setdefault(login, set()).add(group.gr_gid)
    found, known = {(None, frozenset()): ANYONE}, set()
    for account in pwd.getpwall():
        groups = members.get(account.pw_name, set()) | {account.pw_gid}
        known.add(account.pw_uid)
        if account.pw_uid in (owner, 0) or (trusted is not None and trusted in groups):
            continue
        key = (account.pw_uid if account.pw_uid in uids else None, frozenset(groups & gids))
        found.setdefault(key, User(*key, account.pw_name))
    for uid in sorted(uids - known - {owner, 0}):  # an owner with no account here is still someone
        found.setdefault((uid, frozenset()), User(uid, frozenset(), f"user {uid}"))
    return list(found.values())


# --- every path below some folders, and who else can read or write it ----------------------------------------


@dataclass(frozen=True)
class Opening:
    """What another user can do to one path (its real place): "read", "write", "read and write", "look into" (a
    folder the kit cannot list) or "replace" (put something else in its place)."""

    path: str
    verb: str
    how: Grant
    user: User
    gate: str  # the highest folder on its way (or the path itself) that closing closes it for this user
    gate_how: Grant  # how this user gets through the gate


@dataclass(frozen=True)
class Top:
    """A path to look at: itself, and with `below` everything below it, where a link is followed only with
    `follow` (else left alone: its target is not what this path holds)."""

    path: str
    below: bool = True
    follow: bool = False


def openings(tops: list[Top], *, owner: int, trusted: int | None = None, within: str | None = None) -> list:
    """Every way another user (see the module) can read or write each of `tops` (and what is below them), or
    replace one of them; the gates are chosen at or below `within` (a folder), where the path lies in it. Gates
    highest first."""
    nodes: dict = {}

    def look(path: str) -> Node | None:
        if path not in nodes:
            nodes[path] = read_node(path)
        return nodes[path]

    paths, lookups, unlisted, pending, seen = [], [], set(), list(tops), set()
    while pending:
        top = pending.pop(0)
        way = route(os.path.abspath(top.path), look)
        lookups += [step for step in way.steps if step not in lookups and step[1] != ".."]
        if way.real is None or way.real in seen:
            continue
        seen.add(way.real)
        paths.append((way.real, way.real))
        folders = [way.real] if top.below and look(way.real).is_dir else []
        while folders:  # a stack: a folder of any depth, without recursion
            folder = folders.pop()
            if _closed(look(folder), owner, trusted):
                continue  # nobody else enters it: nothing below it is anyone else's to reach
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                unlisted.add(folder)
                continue
            for name in names:
                child, node = os.path.join(folder, name), look(os.path.join(folder, name))
                if node is None:
                    continue
                if node.is_link:
                    pending += [Top(child, True, True)] if top.follow else []
                    continue
                paths.append((child, way.real))
                folders += [child] if node.is_dir else []
    within_real = os.path.realpath(within) if within else None
    found = []
    for user in others([n for n in nodes.values() if n is not None], owner, trusted):
        found += _user_openings(user, look, paths, lookups, unlisted, within_real)
    return sorted(found, key=lambda o: o.gate.count("/") - (o.gate == "/"))


def _closed(node: Node, owner: int, trusted: int | None) -> bool:
    """Nobody but its owner (the course's, or root) and the trusted group can enter this folder, whoever they are."""
    if node.uid not in (owner, 0) or node.opaque:
        return False
    if node.acl:
        return not any(perm & X and not _trusted(tag, ident, node, owner, trusted) for tag, perm, ident in node.acl)
    return not node.mode & 0o001 and not (node.mode & 0o010 and node.gid != trusted)


def _trusted(tag: int, ident: int, node: Node, owner: int, trusted: int | None) -> bool:
    """Does this entry of an access list speak only of the owner (the course's, or root) and the trusted group?"""
    if tag in (USER_OBJ, MASK):
        return True
    if tag == USER:
        return ident in (owner, 0)
    return trusted is not None and (node.gid if tag == GROUP_OBJ else ident if tag == GROUP else None) == trusted


def _user_openings(user: User, look, paths: list, lookups: list, unlisted: set, within: str | None) -> list:
    enters: dict = {}

    def can_enter(folder: str) -> Grant | None:
        if folder not in enters:
            node = look(folder)
            enters[folder] = grant(node, user, X) if node is not None and node.is_dir else None
        return enters[folder]

    def reaches(real: str) -> bool:
        return all(can_enter(folder) for folder in above(real))

    def gate(real: str, top: str, own: Grant) -> tuple[str, Grant]:
        base = within if within and (real + "/").startswith(within.rstrip("/") + "/") else top
        chain = [f for f in above(real) if (f + "/").startswith(base.rstrip("/") + "/")]
        return (chain[0], can_enter(chain[0])) if chain else (real, own)

    found, done = [], set()
    for real, top in paths:
        if real in done or not reaches(real):
            continue
        node = look(real)
        read, write = grant(node, user, R), grant(node, user, W | X if node.is_dir else W)
        verb = "read and write" if read and write else "read" if read else "write" if write else None
        how = read or write or default_grant(node, user)
        if how is None and real in unlisted and can_enter(real):
            verb, how = "look into", Grant("unlisted", "the kit cannot list what is in it")
        if how is not None:
            done.add(real)
            found.append(Opening(real, verb or "read or write what is made in", how, user, *gate(real, top, how)))
    for folder, name in lookups:
        target, node = os.path.join(folder, name), look(folder)
        how = grant(node, user, W | X) if reaches(folder) and can_enter(folder) else None
        entry = look(target)
        sticky = node.mode & stat.S_ISVTX and entry is not None and user.uid not in (node.uid, entry.uid)
        if how is not None and not sticky and ("replace", target) not in done:
            done.add(("replace", target))
            found.append(Opening(target, "replace", Grant(how.via, f"in {folder}, {how.text}"), user, folder, how))
    return found
