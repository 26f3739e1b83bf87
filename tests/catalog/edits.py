"""Single-step mistakes: every one-step change to the Pre-LN script (`script`).

The script is the lesson's forward, one value per line. An `Edit` (`script`) changes one thing in it: what one
call or one addition receives, a call removed, repeated or scaled, a normalization inserted on an edge, the halves
swapped, a dropout moved or given another p, a LayerNorm that is a near miss (the edits of the block's structure
are made in `structure`). Each edit knows the step of the lesson it breaks, by the rules of the grader's table
of steps (`autograder.engine.steps`), and says what it changed in the lesson's words. The corpus (`generate`)
renders every one of them as a mutant of Pre-LN, and each must be graded as breaking its own step.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from autograder.engine.reading.program import ALWAYS
from autograder.engine.steps import BRANCH_LEFT_OUT, EDGES, NUMBER, OUTPUT, SHORTCUT_SCALED, handed
from autograder.engine.reading.script import PRE_LN, Line
from catalog import structure
from autograder.engine.reading.normfit import describe_variant
from catalog.script import COMPONENT, NAMES, Edit, on_value


# --- the steps of edges ----------------------------------------------------------------------------------


LINES = {line.target: line for line in PRE_LN}


def _edge_step(target: str, index: int, new: str | None, kind: str) -> int:
    """The step an edit on the `index`-th term of line `target` breaks (`new`: a replacement value), by the rules of
    `steps`: a branch component handed a value from before its LayerNorm skipped that LayerNorm's step; a sum handed
    the branch from before its dropout skipped the dropout's step; a shortcut scaled, left out or dropped breaks its
    addition, one replaced or changed by an inserted call the step that saves it; else the step of the edge."""
    if target not in LINES:
        return OUTPUT
    old = LINES[target].terms[index][0]  # what Pre-LN hands there
    if target in ("a", "f"):
        return handed(LINES[target].name, new if new != old else None)
    if LINES[target].kind == "sum" and old in LINES and LINES[old].name == "drop" and new == LINES[old].terms[0][0]:
        return NUMBER[old]
    if (old, target) in SHORTCUT_SCALED and kind not in ("replace", "insert"):
        return SHORTCUT_SCALED[(old, target)]
    return EDGES[(old, target)]


def _where(target: str, index: int) -> str:
    line = next(line for line in PRE_LN if line.target == target)
    if line.kind == "call":
        return f"{COMPONENT[line.name]}'s input"
    half = "first" if target == "h" else "second"
    return f"the {half} addition's {'shortcut' if index == 0 else 'branch'}"


# --- generating edits ------------------------------------------------------------------------------------


def _with(lines: tuple, target: str, **changes) -> tuple:
    return tuple(replace(line, **changes) if line.target == target else line for line in lines)


def _insert(lines: tuple, before: str, line: Line) -> tuple:
    out = []
    for current in lines:
        if current.target == before:
            out.append(line)
        out.append(current)
    return tuple(out)


def _available(target: str) -> list:
    names = ["x"]
    for line in PRE_LN:
        if line.target == target:
            return names
        names.append(line.target)
    return names


def _term_edits(factors: tuple):
    for line in PRE_LN:
        for index, (old, c) in enumerate(line.terms):
            where = _where(line.target, index)
            for new in _available(line.target):
                if new == old:
                    continue
                terms = line.terms[:index] + ((new, c),) + line.terms[index + 1 :]
                yield Edit(
                    "replace",
                    _edge_step(line.target, index, new, "replace"),
                    f"{where} was {NAMES[new]} instead of {NAMES[old]}",
                    _with(PRE_LN, line.target, terms=terms),
                )
            if line.kind == "sum":
                terms = line.terms[:index] + line.terms[index + 1 :]
                kept = NAMES[line.terms[1 - index][0]]
                if index == 0:
                    yield Edit(
                        "remove_term",
                        _edge_step(line.target, index, None, "remove"),
                        f"{where} is missing: the sum is {kept} alone",
                        _with(PRE_LN, line.target, terms=terms),
                    )
                else:  # the branch never reaches the output: its whole half is missing from the result
                    half = "attention half (norm1, att)" if line.target == "h" else "feed-forward half (norm2, ff)"
                    yield Edit(
                        "remove_term",
                        BRANCH_LEFT_OUT[(old, line.target)],
                        f"the {half} does not reach the output: the "
                        f"{'first' if index == 1 and line.target == 'h' else 'second'} "
                        f"sum is {kept} alone",
                        _with(PRE_LN, line.target, terms=terms),
                    )
            for factor in factors:
                terms = line.terms[:index] + ((old, c * factor),) + line.terms[index + 1 :]
                yield Edit(
                    "scale",
                    _edge_step(line.target, index, None, "scale"),
                    f"{where} ({NAMES[old]}) was scaled by {factor:.6g}",
                    _with(PRE_LN, line.target, terms=terms),
                )
            for norm in ("norm1", "norm2", "layer_norm", "drop"):
                extra = Line(f"{line.target}_{index}_{norm}", "call", ((old, 1.0),), norm)
                terms = line.terms[:index] + ((extra.target, c),) + line.terms[index + 1 :]
                kind = "insert_drop" if norm == "drop" else "insert_norm"
                step = _edge_step(line.target, index, None, "scale" if norm == "drop" else "insert")
                extra_name = {"layer_norm": "LayerNorm without scale and shift", "drop": "dropout"}.get(norm, norm)
                yield Edit(
                    kind,
                    step,
                    f"an extra {extra_name} was applied to {NAMES[old]} before it became {where}",
                    _insert(_with(PRE_LN, line.target, terms=terms), line.target, extra),
                )


def _call_edits(variants: tuple, drop_ps: tuple):
    for line in (line for line in PRE_LN if line.kind == "call"):
        step = _edge_step(line.target, 0, line.terms[0][0], "replace")
        what = COMPONENT[line.name]
        yield Edit(
            "remove",
            step,
            f"{what} was not applied: {NAMES[line.terms[0][0]]} went on in its place",
            _with(PRE_LN, line.target, kind="sum", name=""),
        )
        first = replace(line, target=line.target + "_first")
        yield Edit(
            "duplicate",
            step,
            f"{what} was applied twice in a row",
            _insert(_with(PRE_LN, line.target, terms=((first.target, 1.0),)), line.target, first),
        )
        if line.name == "drop":
            half = "attention's output" if line.target == "d1" else "the feed-forward output"
            for p in drop_ps:
                yield Edit(
                    "drop_p",
                    step,
                    f"the dropout on {half} used p = {p:g}, not drop_shortcut's p",
                    _with(PRE_LN, line.target, p=p),
                )
            yield Edit(
                "drop_always",
                step,
                f"the dropout on {half} also dropped values in eval mode",
                _with(PRE_LN, line.target, when=ALWAYS),
            )
            yield from _moved(line, half)
        elif line.name in ("norm1", "norm2"):
            for other in ("norm1", "norm2", "layer_norm"):
                if other != line.name:
                    yield Edit(
                        "rename",
                        step,
                        f"{COMPONENT[other]} normalized {NAMES[line.terms[0][0]]} where Pre-LN uses {line.name}",
                        _with(PRE_LN, line.target, name=other),
                    )
            for variant in variants:
                if variant.params == line.name:
                    yield Edit(
                        "variant",
                        step,
                        f"{line.name}'s normalization {describe_variant(variant, 1e-5)}",
                        _with(PRE_LN, line.target, variant=variant),
                    )
        else:
            other = "ff" if line.name == "att" else "att"
            yield Edit("rename", step, f"{COMPONENT[other]} ran where Pre-LN runs {what}", _with(PRE_LN, line.target, name=other))


def _moved(drop: Line, half: str):
    """The dropout taken off its branch output and put on another edge, or on a whole sum."""
    base = tuple(Line(line.target, "sum", line.terms) if line.target == drop.target else line for line in PRE_LN)
    for value in ("h", "y"):
        moved = Line(f"{drop.target}_on_{value}", "call", ((value, 1.0),), "drop")
        which = "first" if value == "h" else "second"
        yield Edit(
            "move_drop",
            NUMBER["s2"] if drop.target == "d2" and value == "h" else NUMBER[drop.target],  # on h: the second shortcut
            f"the dropout that belongs on {half} was applied to the {which} sum, shortcut included",
            on_value(base, value, moved),
        )
    for line in PRE_LN:
        for index, (old, c) in enumerate(line.terms):
            if line.target == drop.target or old == drop.target:
                continue
            moved = Line(f"{drop.target}_on_{line.target}_{index}", "call", ((old, 1.0),), "drop")
            terms = line.terms[:index] + ((moved.target, c),) + line.terms[index + 1 :]
            lines = _insert(_with(base, line.target, terms=terms), line.target, moved)
            step = _edge_step(line.target, index, None, "scale")  # a dropout on an edge, as insert_drop counts one
            yield Edit(
                "move_drop",
                min(step, NUMBER[drop.target]),
                f"the dropout that belongs on {half} was applied to {NAMES[old]} instead, as {_where(line.target, index)}",
                lines,
            )


def _scaled_sums(factors: tuple):
    """A whole sum scaled, wherever it is used (the first half's result, or what the block returns)."""
    for value, what in (("h", "the first sum (the first half's result h)"), ("y", "the second sum")):
        for factor in factors:
            scaled = Line(f"{value}_scaled", "sum", ((value, factor),))
            yield Edit("scale_sum", NUMBER[value], f"{what} was scaled by {factor:.6g}", on_value(PRE_LN, value, scaled))


def single_edits(*, factors: tuple = (0.5, 2.0), variants: tuple = (), drop_ps: tuple = ()) -> list:
    """Every single-step change to Pre-LN, with the parameters given (coefficients, near-miss LayerNorms, p)."""
    return list(itertools.chain(structure.edits(), _scaled_sums(factors), _call_edits(variants, drop_ps), _term_edits(factors)))
