"""Forged evidence: submissions that patch the grader's harness in their own sandbox to report made-up answers,
each beside its honest self (the same forward without the forgery).

A point rests only on values the grader checks against its own computation, on inputs drawn for that
question, so made-up answers can only lose points: every forger must score no more than its honest self,
part by part. Families: robustness answers (a blank template and Post-LN templates that fail every
robustness question, forging made-up or copied answers), the input after the call, device events and
`device="cpu"` factories, gradients (with the derivative question's losses made up to agree), and the deep-stack
profile.
"""
from __future__ import annotations

from dataclasses import dataclass

from .build import submission
from .hostile import POST_LN, TEMPLATE_FORWARD, TEMPLATE_TASK2, cell


@dataclass(frozen=True)
class Forged:
    name: str
    honest: str
    forged: str
    aims: tuple = ()        # parts the forgery is after, which its honest self fails: it had something to gain
    note: str = ""          # a remark (read from the code by the grader) that both must carry


PROBES = 'import sys, torch\n_probes = sys.modules["autograder.engine.questions.probes"]\n'

# Made-up robustness answers: the input itself, zeros, or the eval run's output reshaped to the question.
MADE_UP_ROBUSTNESS = PROBES + '''
def _like(p, shape, dtype=torch.float32):
    y = _probes.PROBES["eval"](p)["y"].reshape(-1)
    return y.repeat(1 + int(torch.Size(shape).numel()) // y.numel())[: torch.Size(shape).numel()].reshape(shape).to(dtype)
_probes.PROBES.update({
    "robust_small": lambda p: {"y": p.fresh("small")},
    "robust_batch": lambda p: {"y": _like(p, p.fresh("batch").shape)},
    "robust_double": lambda p: {"y": _like(p, p.fresh("double").shape, torch.float64), "dtype": "float64"},
    "eval_seeds": lambda p: {"y_a": _probes.PROBES["eval"](p)["y"], "y_b": _probes.PROBES["eval"](p)["y"]},
})
'''
# Copied robustness answers for a blank template: the block input, returned as if it were the block's output.
COPIED_ROBUSTNESS = PROBES + '''
_probes.PROBES.update({
    "robust_small": lambda p: {"y": p.fresh("small")},
    "robust_batch": lambda p: {"y": p.fresh("batch")},
    "robust_double": lambda p: {"y": p.fresh("double", torch.float64), "dtype": "float64"},
    "eval_seeds": lambda p: {"y_a": p.fresh("repeat"), "y_b": p.fresh("repeat")},
})
'''
# The caller's tensor reported unchanged, and events hidden.
INPUT_AFTER_THE_CALL = PROBES + '''
_probes.PROBES["inplace"] = lambda p: {"x_after": p.x()}
_real = _probes._recorded_run
def _quiet(p, train):
    result = _real(p, train)
    result["events"] = []
    return result
_probes._recorded_run = _quiet
'''
HIDDEN_DEVICE_EVENTS = PROBES + '''
_probes.Recorder.note = lambda self, event: None
_probes.PROBES["robust_meta"] = lambda p: {"screened": True}
'''
# Gradients made up: ones for the input, zeros for every parameter, in every recorded run that keeps gradients (the
# runs without them, the eval_other, token, respond and moved questions', are left as they are).
MADE_UP_GRADIENTS = PROBES + '''
_real = _probes._recorded_run
def _gradients(p, train, **options):
    result = _real(p, train, **options)
    if options.get("gradients", True):
        result.pop("grad_error", None)
        result["x_grad"] = torch.ones_like(result["y"])
        result["param_grads"] = {name: torch.zeros_like(param) for name, param in _probes.part_params(p.block()).items()}
    return result
_probes._recorded_run = _gradients
'''
# Those gradients, and the derivative question's answer made up to agree with itself (zero gradients, and losses that
# do not change along any direction): a block judged on that question alone would pass every gradient part.
MADE_UP_DERIVATIVE = MADE_UP_GRADIENTS + '''
def _flat(p):
    run = lambda: {"x_grad": torch.zeros_like(p.x(torch.float64)),
                   "param_grads": {n: torch.zeros_like(q).double() for n, q in _probes.part_params(p.block()).items()},
                   "moved": {"input": [[0.0, 0.0]] * 3, "parameters": [[0.0, 0.0]] * 3}}
    return {"eval": run(), "train": run()}
_probes.PROBES["derivative"] = _flat
'''
# A Pre-LN-like deep-stack profile, made up.
MADE_UP_PROFILE = PROBES + '''
_probes.PROBES["profile"] = lambda p: {"profile": [1.0 + 0.01 * k for k in range(24, 0, -1)]}
'''

# Post-LN that fails every robustness question: wrong on another batch size, length or dtype.
FRAGILE_POST_LN = """
def forward(self, x):
    if x.shape[0] != 3 or x.shape[1] != self.att.mask.shape[0] or x.dtype != torch.float32:
        raise ValueError("only the shape and dtype this forward was written for")
    self.calls = getattr(self, "calls", 0) + 1
    if self.calls > 1:
        x = x + 0.01          # a second call on the same block gives another output
    x = self.norm1(x + self.drop_shortcut(self.att(x)))
    return self.norm2(x + self.drop_shortcut(self.ff(x)))
"""
INPLACE_ON_INPUT = """
def forward(self, x):
    out = x + self.drop_shortcut(self.att(self.norm1(x)))
    out = out + self.drop_shortcut(self.ff(self.norm2(out)))
    x.data.zero_()
    return out
"""
CPU_MOVES = """
def forward(self, x):
    x = x.cpu()
    total = torch.zeros(x.shape, device="cpu")
    total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
    return total + self.drop_shortcut(self.ff(self.norm2(total)))
"""
# Post-LN whose first shortcut is cut from the gradient: its values are not Pre-LN's, and its gradients are not the
# derivative of what it computes.
DETACHED_POST_LN = """
def forward(self, x):
    x = self.norm1(x.detach() + self.drop_shortcut(self.att(x)))
    return self.norm2(x + self.drop_shortcut(self.ff(x)))
"""
DETACHED_SHORTCUT = """
def forward(self, x):
    shortcut = x.detach()
    x = shortcut + self.drop_shortcut(self.att(self.norm1(x)))
    return x + self.drop_shortcut(self.ff(self.norm2(x)))
"""


def _template(extra: str = "") -> str:
    return submission(forward=TEMPLATE_FORWARD, task2=TEMPLATE_TASK2, extra=extra)


def _pair(name: str, forward: str, forgery: str, aims: tuple = (), note: str = "") -> Forged:
    return Forged(name, submission(forward=forward), submission(forward=forward, extra=cell(forgery, "forgery")),
                  aims, note)


ROBUSTNESS = ("batch of one, short context", "a batch of five sequences", "float64 after .double()",
              "the same output on every call, input left unchanged (eval mode)")
GRADIENTS = ("the block input's gradient (eval mode)", "gradients flow through every path (train mode)")

FORGED = [
    Forged("blank_template_copies_robustness_answers", _template(), _template(cell(COPIED_ROBUSTNESS, "forgery")),
           ROBUSTNESS),
    Forged("blank_template_makes_up_robustness_answers", _template(), _template(cell(MADE_UP_ROBUSTNESS, "forgery")),
           ROBUSTNESS),
    _pair("post_ln_makes_up_robustness_answers", POST_LN, MADE_UP_ROBUSTNESS),
    _pair("fragile_post_ln_makes_up_robustness_answers", FRAGILE_POST_LN, MADE_UP_ROBUSTNESS, ROBUSTNESS),
    _pair("fragile_post_ln_copies_robustness_answers", FRAGILE_POST_LN, COPIED_ROBUSTNESS, ROBUSTNESS),
    _pair("input_written_in_place_reported_unchanged", INPLACE_ON_INPUT, INPUT_AFTER_THE_CALL, GRADIENTS),
    _pair("device_moves_with_events_hidden", CPU_MOVES, HIDDEN_DEVICE_EVENTS, note='device="cpu"'),
    _pair("detached_shortcut_makes_up_gradients", DETACHED_SHORTCUT, MADE_UP_GRADIENTS, GRADIENTS),
    _pair("post_ln_makes_up_gradients", POST_LN, MADE_UP_GRADIENTS),
    _pair("detached_post_ln_makes_up_gradients_and_their_derivative", DETACHED_POST_LN, MADE_UP_DERIVATIVE, GRADIENTS),
    _pair("post_ln_makes_up_a_pre_ln_profile", POST_LN, MADE_UP_PROFILE, ("24-block stack keeps a Pre-LN profile",)),
]
