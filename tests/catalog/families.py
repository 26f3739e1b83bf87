"""Forwards written as students write them, in the families where a grader that follows values can slip:
rearranged but right, doing nothing while looking busy, near misses of a LayerNorm, and wrong forwards whose
first mistake sits among other uses of the same value. None of them is generated from the reference (see
`generate` for that): each is a hand-written sample of its family, and the expectation is the rule the
family must obey, not a message learnt from it.

Expectations: FULL (full marks, nothing to explain), NOTHING (no forward point at all), AS_POST_LN (exactly
what an honest Post-LN forward scores), or a `Wrong` (loses points on `check`, the first divergent step is
`step`, the feedback contains `phrase`, and only the checks in `lost` lose points).
"""
from __future__ import annotations

from dataclasses import dataclass

FULL, NOTHING, AS_POST_LN = "full marks", "no forward point", "as Post-LN"


@dataclass(frozen=True)
class Wrong:
    check: str
    step: int
    phrase: str
    lost: tuple


NEAR_MISS = ("forward_order", "forward_prenorm")


def _normalize(stats: str) -> str:
    return f"""
        def _normalize(self, norm, t):
            {stats}
            return norm.scale * (t - mean) / torch.sqrt(var + norm.eps) + norm.shift

        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self._normalize(self.norm1, x)))
            return x + self.drop_shortcut(self.ff(self._normalize(self.norm2, x)))
        """


FAMILIES = {
    # --- right, rearranged ----------------------------------------------------------------------------------
    "one_sequence_at_a_time": ("""
        def forward(self, x):
            rows = []
            for i in range(x.shape[0]):
                row = x[i].unsqueeze(0)
                row = row + self.drop_shortcut(self.att(self.norm1(row)))
                rows.append(row + self.drop_shortcut(self.ff(self.norm2(row))))
            return torch.cat(rows)
        """, FULL),
    "unbind_and_stack": ("""
        def forward(self, x):
            out = []
            for row in x.unbind(0):
                row = row[None]
                row = row + self.drop_shortcut(self.att(self.norm1(row)))
                out.append((row + self.drop_shortcut(self.ff(self.norm2(row))))[0])
            return torch.stack(out, dim=0)
        """, FULL),
    "feed_forward_half_on_tokens_first": ("""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            t = h.permute(1, 0, 2).contiguous()
            t = t + self.drop_shortcut(self.ff(self.norm2(t)))
            return t.permute(1, 0, 2)
        """, FULL),
    "feed_forward_token_by_token": ("""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            out = torch.empty_like(h)
            for t in range(h.shape[1]):
                out[:, t] = h[:, t] + self.drop_shortcut(self.ff(self.norm2(h[:, t])))
            return out
        """, FULL),
    "feed_forward_in_two_chunks": ("""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            parts = [c + self.drop_shortcut(self.ff(self.norm2(c))) for c in torch.chunk(h, 2, dim=1)]
            return torch.cat(parts, dim=1)
        """, FULL),
    "dropout_in_place_functional": ("""
        def forward(self, x):
            a = self.att(self.norm1(x))
            torch.nn.functional.dropout(a, self.drop_shortcut.p, self.training, True)
            h = x + a
            f = self.ff(self.norm2(h))
            f = torch.nn.functional.dropout(f, p=self.drop_shortcut.p, training=self.training, inplace=True)
            return h + f
        """, FULL),
    "in_place_on_a_clone": ("""
        def forward(self, x):
            h = x.clone()
            h.add_(self.drop_shortcut(self.att(self.norm1(x))))
            y = h.clone()
            y.add_(self.drop_shortcut(self.ff(self.norm2(h))))
            return y
        """, FULL),
    "decoys_on_a_right_forward": ("""
        def forward(self, x):
            self.norm2(x)
            probe = self.att(self.norm1(x)).mean()
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, FULL),
    # --- busy doing nothing --------------------------------------------------------------------------------
    "branches_on_zeros": ("""
        def forward(self, x):
            z = torch.zeros_like(x)
            x = x + self.drop_shortcut(self.att(self.norm1(z)))
            return x + self.drop_shortcut(self.ff(self.norm2(z)))
        """, NOTHING),
    "branches_on_a_batch_wide_constant": ("""
        def forward(self, x):
            c = torch.full_like(x, 0.5) + torch.linspace(0, 1, x.shape[-1])
            return x + self.drop_shortcut(self.att(self.norm1(c))) + self.drop_shortcut(self.ff(self.norm2(c)))
        """, NOTHING),
    # x plus a constant: the branches depend on x only through one number, its mean over everything
    "branches_on_the_global_mean": ("""
        def forward(self, x):
            m = x.mean().expand_as(x)
            h = x + self.drop_shortcut(self.att(self.norm1(m)))
            return h + self.drop_shortcut(self.ff(self.norm2(m)))
        """, NOTHING),
    "branches_on_one_fixed_sequence": ("""
        def forward(self, x):
            c = torch.ones_like(x[:1]).expand_as(x).cumsum(-1)
            a = self.drop_shortcut(self.att(self.norm1(c)))
            return x + a + self.drop_shortcut(self.ff(self.norm2(c + a)))
        """, NOTHING),
    "near_identity_with_genuine_calls": ("""
        def forward(self, x):
            a = self.drop_shortcut(self.att(self.norm1(x)))
            h = x + a
            f = self.drop_shortcut(self.ff(self.norm2(h)))
            return x + 1e-3 * a * f
        """, NOTHING),
    "near_identity_scaled_branches": ("""
        def forward(self, x):
            h = x + 1e-3 * self.drop_shortcut(self.att(self.norm1(x)))
            return h + 1e-3 * self.drop_shortcut(self.ff(self.norm2(h)))
        """, NOTHING),
    "decoys_on_post_ln": ("""
        def forward(self, x):
            shown = self.drop_shortcut(self.att(self.norm1(x)))
            self.drop_shortcut(self.ff(self.norm2(x + shown)))
            x = self.norm1(x + self.drop_shortcut(self.att(x)))
            return self.norm2(x + self.drop_shortcut(self.ff(x)))
        """, AS_POST_LN),
    # --- near misses of a LayerNorm -----------------------------------------------------------------------
    "layer_norm_with_another_eps": ("""
        def forward(self, x):
            ln = lambda norm, t: torch.nn.functional.layer_norm(t, t.shape[-1:], norm.scale, norm.shift, eps=1e-3)
            x = x + self.drop_shortcut(self.att(ln(self.norm1, x)))
            return x + self.drop_shortcut(self.ff(ln(self.norm2, x)))
        """, Wrong("forward_prenorm", 2, "eps = 0.001", NEAR_MISS)),
    "unbiased_variance": (_normalize("mean, var = t.mean(-1, keepdim=True), t.var(-1, keepdim=True)"),
                          Wrong("forward_prenorm", 2, "unbiased variance", NEAR_MISS)),
    "statistics_over_the_tokens": (_normalize(
        "mean, var = t.mean(1, keepdim=True), t.var(1, keepdim=True, unbiased=False)"),
        Wrong("forward_prenorm", 2, "over the tokens (dim=1)", NEAR_MISS)),
    "one_statistic_per_sequence": (_normalize(
        "mean, var = t.mean((1, 2), keepdim=True), t.var((1, 2), keepdim=True, unbiased=False)"),
        Wrong("forward_prenorm", 2, "one mean and variance per sequence", NEAR_MISS)),
    # --- wrong, with a value used in more than one place ---------------------------------------------------
    "feed_forward_given_the_attention_branch": ("""
        def forward(self, x):
            a = self.drop_shortcut(self.att(self.norm1(x)))
            return x + a + self.drop_shortcut(self.ff(self.norm2(a)))
        """, Wrong("forward_order", 7, "norm2 received att(norm1(x))", ("forward_order", "forward_shortcuts",
                                                                                 "forward_gradients"))),
    "norm2_twice_inside_the_branch": ("""
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(self.norm2(x))))
        """, Wrong("forward_prenorm", 7, "norm2 ran more than once", ("forward_order", "forward_prenorm"))),
    "shortcut_is_x_branch_reused": ("""
        def forward(self, x):
            a = self.drop_shortcut(self.att(self.norm1(x)))
            h = x + a
            return h + a + self.drop_shortcut(self.ff(self.norm2(h)))
        """, Wrong("forward_order", 10, "returned h + att(norm1(x)) + ff(norm2(h))", ("forward_order", "forward_shortcuts",
                                                                                    "forward_gradients"))),
}
