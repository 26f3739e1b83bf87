"""Wrong forwards students plausibly write, with the check each must lose points on, the first divergent
step the feedback must name (None where the values are right and only gradients or devices are wrong),
and a phrase the message must contain."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wrong:
    name: str
    forward: str
    check: str
    step: int | None
    phrase: str


WRONG = [
    Wrong("post_ln", """
        def forward(self, x):
            x = self.norm1(x + self.drop_shortcut(self.att(x)))
            return self.norm2(x + self.drop_shortcut(self.ff(x)))
        """, "forward_order", 2, "Post-LN"),
    Wrong("missing_first_shortcut", """
        def forward(self, x):
            x = self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 5, "first shortcut is missing"),
    Wrong("missing_second_shortcut", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 10, "second shortcut is missing"),
    Wrong("shortcut_after_norm", """
        def forward(self, x):
            x = self.norm1(x)
            shortcut = x
            x = self.drop_shortcut(self.att(x)) + shortcut
            shortcut = x
            return self.drop_shortcut(self.ff(self.norm2(x))) + shortcut
        """, "forward_shortcuts", 1, "saved after norm1"),
    Wrong("second_shortcut_after_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = self.norm2(x)
            return x + self.drop_shortcut(self.ff(x))
        """, "forward_shortcuts", 6, "saved after norm2"),
    Wrong("norms_swapped", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 2, "norm2 normalized the block input"),
    Wrong("norm1_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 7, "norm1 ran again"),
    Wrong("norm2_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_prenorm", 2, "norm2 normalized the block input"),
    Wrong("dropout_missing", """
        def forward(self, x):
            x = x + self.att(self.norm1(x))
            return x + self.ff(self.norm2(x))
        """, "forward_dropout", 4, "not passed through drop_shortcut"),
    Wrong("dropout_on_sum", """
        def forward(self, x):
            x = self.drop_shortcut(x + self.att(self.norm1(x)))
            return self.drop_shortcut(x + self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "shortcut was added before dropout"),
    Wrong("dropout_before_layer", """
        def forward(self, x):
            x = x + self.att(self.drop_shortcut(self.norm1(x)))
            return x + self.ff(self.drop_shortcut(self.norm2(x)))
        """, "forward_dropout", 3, "before attention"),
    Wrong("dropout_always_on", """
        def forward(self, x):
            p = self.drop_shortcut.p
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), p, training=True)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), p, training=True)
        """, "forward_dropout", 4, "dropout must be inactive"),
    Wrong("dropout_only_first_half", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.ff(self.norm2(x))
        """, "forward_dropout", 9, "not passed through drop_shortcut"),
    Wrong("halves_swapped", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return x + self.drop_shortcut(self.att(self.norm1(x)))
        """, "forward_order", 2, "halves swapped"),
    Wrong("second_addition_from_input", """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(h)))
        """, "forward_shortcuts", 6, "saved the block input x"),
    Wrong("extra_final_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return self.norm2(x)
        """, "forward_prenorm", 10, "extra normalization"),
    Wrong("scaled_residual", """
        def forward(self, x):
            x = 0.5 * x + self.drop_shortcut(self.att(self.norm1(x)))
            return 0.5 * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 5, "scaled by 0.5"),
    Wrong("detached_shortcut", """
        def forward(self, x):
            shortcut = x.detach()
            x = shortcut + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "detached x"),
    Wrong("detached_branch", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x))).detach()
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "detached drop_shortcut(att(norm1(x)))"),
    Wrong("inplace_on_input", """
        def forward(self, x):
            x += self.drop_shortcut(self.att(self.norm1(x)))
            x += self.drop_shortcut(self.ff(self.norm2(x)))
            return x
        """, "forward_gradients", None, "modified its input tensor in place"),
    Wrong("functional_layer_norm_without_params", """
        def forward(self, x):
            emb = x.shape[-1:]
            x = x + self.drop_shortcut(self.att(torch.nn.functional.layer_norm(x, emb)))
            return x + self.drop_shortcut(self.ff(torch.nn.functional.layer_norm(x, emb)))
        """, "forward_prenorm", 2, "without norm1's parameters"),
    Wrong("cpu_inside_forward", """
        def forward(self, x):
            x = x.cpu()
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_robustness", None, ".cpu()"),
    Wrong("feed_forward_without_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(x))
        """, "forward_prenorm", 7, "without normalization"),
    Wrong("returns_first_half", """
        def forward(self, x):
            return x + self.drop_shortcut(self.att(self.norm1(x)))
        """, "forward_order", 7, "stopped after the attention half"),
    Wrong("no_grad_branch", """
        def forward(self, x):
            with torch.no_grad():
                branch = self.drop_shortcut(self.att(self.norm1(x)))
            x = x + branch
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "cut from the autograd graph"),
    Wrong("returns_tuple", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x))), None
        """, "forward_order", None, "returned tuple"),
    Wrong("float32_zeros_inside", """
        def forward(self, x):
            total = torch.zeros(x.shape)
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, "forward_robustness", None, "Keep every tensor on x.device"),
]
