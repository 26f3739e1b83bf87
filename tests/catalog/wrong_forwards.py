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
    also: tuple = ()        # other checks that lose points as direct consequences (their messages say why)


WRONG = [
    Wrong("post_ln", """
        def forward(self, x):
            x = self.norm1(x + self.drop_shortcut(self.att(x)))
            return self.norm2(x + self.drop_shortcut(self.ff(x)))
        """, "forward_order", 2, "Post-LN",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_gradients')),
    Wrong("missing_first_shortcut", """
        def forward(self, x):
            x = self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 5, "first shortcut is missing",
          also=('forward_order', 'forward_gradients')),
    Wrong("missing_second_shortcut", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 10, "second shortcut is missing",
          also=('forward_order', 'forward_gradients')),
    Wrong("shortcut_after_norm", """
        def forward(self, x):
            x = self.norm1(x)
            shortcut = x
            x = self.drop_shortcut(self.att(x)) + shortcut
            shortcut = x
            return self.drop_shortcut(self.ff(self.norm2(x))) + shortcut
        """, "forward_shortcuts", 1, "saved after norm1",
          also=('forward_order', 'forward_gradients')),
    Wrong("second_shortcut_after_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = self.norm2(x)
            return x + self.drop_shortcut(self.ff(x))
        """, "forward_shortcuts", 6, "saved after norm2",
          also=('forward_order', 'forward_gradients')),
    Wrong("norms_swapped", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 2, "norm2 normalized the input of attention",
          also=('forward_order',)),
    Wrong("norm1_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 7, "norm1 ran again",
          also=('forward_order',)),
    Wrong("norm2_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_prenorm", 2, "norm2 normalized the input of attention",
          also=('forward_order',)),
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
        """, "forward_dropout", 4, "dropout must be inactive",
          also=('forward_order',)),
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
        """, "forward_shortcuts", 6, "saved the block input x",
          also=('forward_order',)),
    Wrong("extra_final_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return self.norm2(x)
        """, "forward_prenorm", 10, "extra normalization",
          also=('forward_order', 'forward_shortcuts', 'forward_gradients')),
    Wrong("scaled_residual", """
        def forward(self, x):
            x = 0.5 * x + self.drop_shortcut(self.att(self.norm1(x)))
            return 0.5 * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 5, "scaled by 0.5",
          also=('forward_order', 'forward_gradients')),
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
        """, "forward_prenorm", 2, "without norm1's scale and shift",
          also=('forward_order',)),
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
        """, "forward_prenorm", 7, "without normalization",
          also=('forward_order',)),
    Wrong("returns_first_half", """
        def forward(self, x):
            return x + self.drop_shortcut(self.att(self.norm1(x)))
        """, "forward_order", 7, "stopped after the attention half",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("no_grad_branch", """
        def forward(self, x):
            with torch.no_grad():
                branch = self.drop_shortcut(self.att(self.norm1(x)))
            x = x + branch
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "ran under torch.no_grad()"),
    Wrong("returns_tuple", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x))), None
        """, "forward_order", None, "returned tuple",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("float32_zeros_inside", """
        def forward(self, x):
            total = torch.zeros(x.shape)
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, "forward_robustness", None, "Keep every tensor on x.device"),
    Wrong("dropout_twice_on_attention", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.drop_shortcut(self.att(self.norm1(x))))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "went through dropout 2 times"),
    Wrong("second_shortcut_scaled_slightly", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return 1.0001 * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 10, "scaled by 1.0001",
          also=('forward_order',)),
    Wrong("detached_input_of_norm1", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x.detach())))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "step 2 of 10"),
    Wrong("detached_branch_in_train_mode_only", """
        def forward(self, x):
            branch = self.drop_shortcut(self.att(self.norm1(x)))
            if self.training:
                branch = branch.detach()
            x = x + branch
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "In train mode"),
    Wrong("feed_forward_in_train_mode_only", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            if self.training:
                x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return x
        """, "forward_order", 7, "In eval mode only",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("feed_forward_on_last_token_only", """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            last = h[:, -1:, :]
            last = last + self.drop_shortcut(self.ff(self.norm2(last)))
            return torch.cat([h[:, :-1, :], last], dim=1)
        """, "forward_order", 8, "only some of the tokens",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("new_dropout_module_inside_forward", """
        def forward(self, x):
            drop = nn.Dropout(self.drop_shortcut.p)
            x = x + drop(self.att(self.norm1(x)))
            return x + drop(self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "created inside forward",
          also=('forward_order',)),
    Wrong("hard_coded_dropout_rate", """
        def forward(self, x):
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), 0.1, self.training)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), 0.1, self.training)
        """, "forward_dropout", 4, "used p = 0.1"),
    Wrong("legacy_tensor_constructor_inside", """
        def forward(self, x):
            total = torch.Tensor(*x.shape).zero_()
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, "forward_robustness", None, "Keep every tensor on x.device"),
    Wrong("float32_cast_inside", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x).float()))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_robustness", None, "float64"),
]

# Forwards that do none of the block's work: every forward check must give them 0 points.
TRIVIAL = {
    "identity": "def forward(self, x):\n    return x\n",
    "times_one": "def forward(self, x):\n    return x * 1.0\n",
    "clone": "def forward(self, x):\n    return x.clone()\n",
    "zeros": "def forward(self, x):\n    return torch.zeros_like(x)\n",
    "constant": "def forward(self, x):\n    return torch.full_like(x, 0.25)\n",
    "untouched_template": 'def forward(self, x):\n    raise NotImplementedError("Task 1: write TransformerBlock.forward")\n',
    "branches_computed_then_thrown_away": """
        def forward(self, x):
            self.drop_shortcut(self.att(self.norm1(x)))
            self.drop_shortcut(self.ff(self.norm2(x)))
            return x
        """,
}
