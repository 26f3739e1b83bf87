"""Each half's dropout step: dropout on its branch's output, active in train mode only, once, with the block's p."""

from __future__ import annotations

from .halves import SIDE, Finding, Halves


class DropoutFinder(Halves):
    """Dropout on each branch's output."""

    def dropout(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["half"].drop
        if h is None:
            return None
        pieces = self._pieces(side)
        if pieces is not None and not h.branch.whole:
            return pieces
        before = self._dropout_before(side)
        if before is not None:
            return before
        if self.mode == "eval":
            if h.drops:
                return Finding(
                    step,
                    f"in eval mode, {h.drops[0].name} still dropped values of {s['out']}: dropout "
                    "must be inactive after model.eval(); self.drop_shortcut follows .train() and .eval()",
                )
            return None
        flow = self.flow
        on_sum = next(
            (
                st
                for st in flow.live
                if st.index > h.branch.index and st.is_dropout and st.takes and h.branch.key in st.takes and len(st.takes) > 1
            ),
            None,
        )
        if not h.drops and on_sum is not None:
            return Finding(
                step,
                f"{on_sum.name} received {self._say(on_sum.takes)}: the branch was added to other "
                f"values before dropout. Pre-LN applies dropout to {s['out']} alone, then adds",
            )
        if not h.drops:
            return Finding(  # said of calls: a mask written by hand is none, and what it drew is read elsewhere
                step, f"in train mode, no call of drop_shortcut or of torch's dropout received {s['out']} before it was used"
            )
        if len(h.drops) > 1:
            return Finding(step, f"{s['out']} went through dropout {len(h.drops)} times; Pre-LN applies drop_shortcut once")
        scale, expected = h.drops[0].scale, 1.0 / (1.0 - self.drop_p)
        if scale is not None and abs(scale - expected) > 1e-3 * expected:
            return Finding(
                step,
                f"the dropout on {s['out']} multiplied kept values by {scale:.4g}, which is dropout "
                f"with p = {1 - 1 / scale:.3g}, not drop_shortcut's p = {self.drop_p:g} (its p comes "
                "from cfg['drop_rate'])",
            )
        return None
