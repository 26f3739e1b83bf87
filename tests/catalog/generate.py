"""The generated corpus: every single-step mutant of Pre-LN, and Pre-LN (and some mutants) rewritten in the
styles students use, as `forward` methods the real grader runs.

Mutants come from `edits.single_edits`, every single-step change to the Pre-LN script, with fixed parameters
(scales 0.5, 2 and 0.001; LayerNorm near misses; dropout p 0.1). Two edits that give the same programs in eval
and in train mode are one mutant; an edit whose values stay within the grader's tolerance of Pre-LN's (a
LayerNorm's input scaled, say) is no mutant at all and is left out.

Styles rewrite how the program is computed, never what: the batch one sequence at a time, the feed-forward
network token by token, on a transposed or flattened tensor, or in chunks, sums written in place on a clone,
dropout written in place, LayerNorm called functionally, sums stacked. A style that would change what a
mutant computes (token by token for a normalization over the whole sequence) is not applied to it.
"""
from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass

import numpy as np
import torch

from autograder.engine.reading.script import PRE_LN, Line
from catalog.edits import single_edits
from catalog.script import Edit
from autograder.engine.questions.parts import make_parts
from autograder.engine.questions.plan import GRADING_CFG
from autograder.engine.reading.program import ALWAYS, Variant, canonical, in_mode, live, numpy_run, signature

DROP_P = 0.5
FACTORS = (0.5, 2.0, 1e-3)
VARIANTS = tuple(Variant(over, eps, unbiased, norm) for norm in ("norm1", "norm2")
                 for over, eps, unbiased in (("token", 1e-3, False), ("token", 1e-5, True), ("tokens", 1e-5, False),
                                             ("sequence", 1e-5, False)))
DROP_PS = (0.1,)
DIMS = {"token": "-1", "sequence": "(1, 2)", "tokens": "1", "batch": "0"}
NEAR_NORM = '''
def _near_norm(self, t, norm, dims, eps, unbiased):
    mean = t.mean(dim=dims, keepdim=True)
    var = t.var(dim=dims, keepdim=True, unbiased=unbiased)
    return norm.scale * (t - mean) / torch.sqrt(var + eps) + norm.shift
'''


@dataclass(frozen=True)
class Case:
    name: str
    forward: str
    edit: Edit | None          # None: an equivalent of Pre-LN
    style: str
    key: tuple = ()            # the edited program's signatures in eval and train mode


# --- rendering a script as a forward ------------------------------------------------------------------------

def _sum(terms: tuple) -> str:
    text = ""
    for value, c in terms:
        term = value if c == 1 else f"{-c:g} * {value}" if c < 0 else f"{c:g} * {value}"
        text += (term if not text else (f" - {term}" if c < 0 else f" + {term}"))
    return text.replace(" - -1 * ", " - ").replace("-1 * ", "-") or "torch.zeros_like(x)"


def _component(line: Line, v: str, style: str) -> str:
    if line.variant is not None:
        variant = line.variant
        return (f"self._near_norm({v}, self.{variant.params}, {DIMS[variant.over]}, {variant.eps!r}, "
                f"{variant.unbiased})")
    if line.name == "drop":
        if line.when == ALWAYS:
            return f"torch.nn.functional.dropout({v}, self.drop_shortcut.p, True)"
        if line.p is not None:
            return f"torch.nn.functional.dropout({v}, {line.p}, self.training)"
        if style == "inplace_dropout":
            return f"torch.nn.functional.dropout({v}, self.drop_shortcut.p, self.training, inplace=True)"
        return f"self.drop_shortcut({v})"
    if line.name == "layer_norm":
        return f"torch.nn.functional.layer_norm({v}, {v}.shape[-1:])"
    if line.name in ("norm1", "norm2") and style == "functional_norm":
        norm = f"self.{line.name}"
        return f"torch.nn.functional.layer_norm({v}, {v}.shape[-1:], {norm}.scale, {norm}.shift, {norm}.eps)"
    call = f"self.{line.name}"
    per_token = line.name == "ff" or (line.name in ("norm1", "norm2") and style == "per_token")
    if per_token and style in ("per_token_ff", "per_token"):
        return f"torch.cat([{call}({v}[:, t:t + 1]) for t in range({v}.shape[1])], dim=1)"
    if line.name == "ff" and style == "transposed_ff":
        return f"{call}({v}.transpose(0, 1)).transpose(0, 1)"
    if line.name == "ff" and style == "flattened_ff":
        return f"{call}({v}.reshape(-1, {v}.shape[-1])).reshape({v}.shape)"
    if line.name == "ff" and style == "chunked":
        return f"torch.cat([{call}(c) for c in {v}.chunk(3, dim=1)], dim=1)"
    if line.name in ("norm1", "norm2") and style == "chunked":
        return f"torch.cat([{call}(c) for c in {v}.chunk(2, dim=0)], dim=0)"
    return f"{call}({v})"


def _body(lines: tuple, style: str) -> list[str]:
    body = []
    for line in lines:
        if line.kind == "sum":
            if style == "inplace_clone" and len(line.terms) == 2 and line.terms[0][1] == 1 and line.terms[1][1] == 1:
                body += [f"{line.target} = {line.terms[0][0]}.clone()", f"{line.target} += {line.terms[1][0]}"]
            elif style == "stack_sum" and len(line.terms) == 2:
                body.append(f"{line.target} = torch.stack([{_sum(line.terms[:1])}, {_sum(line.terms[1:])}]).sum(0)")
            else:
                body.append(f"{line.target} = {_sum(line.terms)}")
            continue
        value = _sum(line.terms)
        if value != line.terms[0][0]:
            body.append(f"{line.target}_in = {value}")
            value = f"{line.target}_in"
        body.append(f"{line.target} = {_component(line, value, style)}")
    return body + [f"return {lines[-1].target}"]


def render(lines: tuple, style: str = "plain") -> str:
    """A forward (method source) that computes the script `lines`, written in `style`."""
    helpers = NEAR_NORM if any(line.variant is not None for line in lines) else ""
    body = textwrap.indent("\n".join(_body(lines, style)), "    ")
    if style in ("per_sample", "per_sample_transposed"):
        inner = "per_token_ff" if style == "per_sample" else "transposed_ff"
        body = textwrap.indent("\n".join(_body(lines, inner)), "    ")
        return ("def forward(self, x):\n    return torch.cat([self._one(x[i:i + 1]) for i in range(x.shape[0])], "
                f"dim=0)\n\ndef _one(self, x):\n{body}\n{helpers}")
    return f"def forward(self, x):\n{body}\n{helpers}"


# --- the corpus -------------------------------------------------------------------------------------------

def program_key(program) -> tuple:
    return tuple(signature(canonical(live(in_mode(program, mode)))) for mode in ("eval", "train"))


def _parts():
    from autograder.grading.reference import reference_namespace
    parts = make_parts(reference_namespace(), GRADING_CFG, 123, drop_p=DROP_P)
    for part in parts.values():
        part.eval()
    return parts


def _visible(edit: Edit, parts, x) -> bool:
    """Does the mutant's output differ from Pre-LN's by more than the grader's tolerance (eval mode), or does
    its train-mode program differ (where dropout masks make any change show)?"""
    reference = Edit("none", 0, "", PRE_LN).program(DROP_P)
    program = edit.program(DROP_P)
    random_in_eval = any(op.name == "drop" for op in live(in_mode(program, "eval")).ops)
    (eval_, train), (eval_ref, train_ref) = program_key(program), program_key(reference)
    if random_in_eval or (train != train_ref and eval_ == eval_ref):
        return True
    y = numpy_run(live(in_mode(program, "eval")), x, parts)[0]
    y_ref = numpy_run(live(in_mode(reference, "eval")), x, parts)[0]
    return bool(np.linalg.norm(y - y_ref) > 1e-4 * np.linalg.norm(y_ref))


@functools.cache
def mutants() -> tuple:
    """Every distinct single-step mutant of Pre-LN, in the plain style."""
    parts = _parts()
    x = (1.5 * torch.randn((3, 8, 32), generator=torch.Generator().manual_seed(5), dtype=torch.float64) + 0.3).numpy()
    seen = {program_key(Edit("none", 0, "", PRE_LN).program(DROP_P))}
    found = []
    for index, edit in enumerate(single_edits(factors=FACTORS, variants=VARIANTS, drop_ps=DROP_PS)):
        key = program_key(edit.program(DROP_P))
        if key in seen or not _visible(edit, parts, x):
            continue
        seen.add(key)
        found.append(Case(f"m{index:03d}_{edit.kind}", render(edit.lines), edit, "plain", key))
    return tuple(found)


EQUIVALENT_STYLES = ("plain", "per_sample", "per_sample_transposed", "per_token_ff", "per_token", "transposed_ff",
                     "flattened_ff", "chunked", "inplace_clone", "inplace_dropout", "functional_norm", "stack_sum")
MUTANT_STYLES = ("per_sample", "transposed_ff", "per_token_ff")


def equivalents() -> list[Case]:
    """Pre-LN in every style."""
    return [Case(f"pre_ln_{style}", render(PRE_LN, style), None, style) for style in EQUIVALENT_STYLES]


def styled_mutants(every: int = 4) -> list[Case]:
    """A deterministic sample of the mutants (every `every`-th, offset by style) in the styles that keep what
    any program computes: the grader must follow a wrong forward however it is written, too."""
    found = []
    plain = mutants()
    for offset, style in enumerate(MUTANT_STYLES):
        for case in plain[offset::every]:
            across = any(line.variant is not None and line.variant.over != "token" for line in case.edit.lines)
            if across and style != "per_sample":
                continue    # a normalization across tokens, handed over token by token, exists only in pieces no
                            # single one of which is a normalization: the grader cannot name it (docs/development.md)
            found.append(Case(f"{case.name}_{style}", render(case.edit.lines, style), case.edit, style, case.key))
    return found
