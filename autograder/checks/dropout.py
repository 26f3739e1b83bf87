"""Dropout placement: on each branch output, before its addition, and only in train mode."""
from __future__ import annotations

import numpy as np

from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_dropout"


def _functional_dropout(evidence: Evidence) -> bool:
    return any(e.get("op") == "dropout" for e in evidence.obs("eval").get("events", []))


def evaluate(evidence: Evidence) -> dict:
    outcomes = {}
    train = evidence.obs("train")
    if not train["ok"]:
        outcomes["train-mode output matches Pre-LN dropout"] = fail(error_text(train))
    elif evidence.close(train["y"], evidence.reference["train"]["y"]):
        outcomes["train-mode output matches Pre-LN dropout"] = PASS
    else:
        message = ("In train mode (p = 0.5, fixed seed) your output differs from a Pre-LN block's "
                   f"({difference(train['y'], evidence.reference['train']['y'])}): drop_shortcut must act on "
                   "attention's output and on the feed-forward output, each before its addition, and nowhere else.")
        if evidence.divergence and ("drop" in evidence.divergence.message):
            message += " " + evidence.divergence.text() + "."
        outcomes["train-mode output matches Pre-LN dropout"] = fail(message)

    full = evidence.obs("train_p1")
    if not full["ok"]:
        outcomes["p = 1.0 drops both branches"] = fail(error_text(full))
    elif evidence.close(full["y"], full["x"]):
        outcomes["p = 1.0 drops both branches"] = PASS
    elif np.allclose(full["y"], 0, atol=1e-6):
        outcomes["p = 1.0 drops both branches"] = fail(
            "With p = 1.0 in train mode your block returned zeros: dropout was applied to a sum that includes "
            "the shortcut. Drop only the branch output, then add the shortcut.")
    else:
        outcomes["p = 1.0 drops both branches"] = fail(
            "With p = 1.0 in train mode, dropout removes both branch outputs completely, so a Pre-LN block "
            f"returns exactly its input; yours did not ({difference(full['y'], full['x'])}). Dropout is missing "
            "from a branch, or sits somewhere else than on the branch output.")

    seeds, run = evidence.obs("eval_seeds"), evidence.obs("eval")
    if not seeds["ok"]:
        outcomes["dropout is off in eval mode"] = fail(error_text(seeds))
    elif evidence.close(seeds["y_a"], seeds["y_b"]) and (not run["ok"] or evidence.close(seeds["y_a"], run["y"])):
        outcomes["dropout is off in eval mode"] = PASS
    else:
        how = (" Your forward calls torch.nn.functional.dropout directly;" if _functional_dropout(evidence) else "")
        outcomes["dropout is off in eval mode"] = fail(
            "In eval mode your block gave different outputs for the same input: dropout must be inactive after "
            f"model.eval().{how} use self.drop_shortcut, which follows .train() and .eval(), rather than "
            "F.dropout(..., training=True) or a new nn.Dropout created inside forward.")
    return outcomes
