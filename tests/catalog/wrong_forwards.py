"""Wrong forwards students plausibly write, with the check each must lose points on, the first divergent
step the feedback must name (None where the values are right and only gradients are wrong), and a phrase the
message must contain. HINTED: forwards right in every value the CPU grader can check, whose code would fail on
a GPU: full marks, and a remark that says so."""
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
        """, "forward_shortcuts", 5, "norm2 received att(norm1(x)); Pre-LN hands norm2 h",
          also=('forward_order', 'forward_gradients')),
    Wrong("missing_second_shortcut", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 10, "returned ff(norm2(h));",
          also=('forward_order', 'forward_gradients')),
    Wrong("shortcut_after_norm", """
        def forward(self, x):
            x = self.norm1(x)
            shortcut = x
            x = self.drop_shortcut(self.att(x)) + shortcut
            shortcut = x
            return self.drop_shortcut(self.ff(self.norm2(x))) + shortcut
        """, "forward_shortcuts", 1, "norm2 received norm1(x) + att(norm1(x))",
          also=('forward_order', 'forward_gradients')),
    Wrong("second_shortcut_after_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = self.norm2(x)
            return x + self.drop_shortcut(self.ff(x))
        """, "forward_shortcuts", 6, "returned norm2(h) + ff(norm2(h))",
          also=('forward_order', 'forward_gradients')),
    Wrong("norms_swapped", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 2, "ttention received the output of norm2",
          also=('forward_order',)),
    Wrong("norm1_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm1(x)))
        """, "forward_prenorm", 7, "he feed-forward network received the output of norm1 (call 2)",
          also=('forward_order',)),
    Wrong("norm2_reused", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm2(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_prenorm", 2, "ttention received the output of norm2",
          also=('forward_order',)),
    Wrong("dropout_missing", """
        def forward(self, x):
            x = x + self.att(self.norm1(x))
            return x + self.ff(self.norm2(x))
        """, "forward_dropout", 4, "drop_shortcut never ran"),
    Wrong("dropout_on_sum", """
        def forward(self, x):
            x = self.drop_shortcut(x + self.att(self.norm1(x)))
            return self.drop_shortcut(x + self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "drop_shortcut (call 1 of 2) received x + the output of attention"),
    Wrong("dropout_before_layer", """
        def forward(self, x):
            x = x + self.att(self.drop_shortcut(self.norm1(x)))
            return x + self.ff(self.drop_shortcut(self.norm2(x)))
        """, "forward_dropout", 3, "norm2 received x + the output of attention"),
    Wrong("dropout_always_on", """
        def forward(self, x):
            p = self.drop_shortcut.p
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), p, training=True)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), p, training=True)
        """, "forward_dropout", 4, "dropout must be inactive",
          also=('forward_order', 'forward_robustness')),
    Wrong("dropout_only_first_half", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.ff(self.norm2(x))
        """, "forward_dropout", 9, "your forward returned x + the output of drop_shortcut + the output of the feed-forward network"),
    Wrong("halves_swapped", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return x + self.drop_shortcut(self.att(self.norm1(x)))
        """, "forward_order", 2, "norm1 received another value than the block input x"),
    Wrong("second_addition_from_input", """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(h)))
        """, "forward_shortcuts", 6, "returned x + ff(norm2(h))",
          also=('forward_order',)),
    Wrong("extra_final_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = x + self.drop_shortcut(self.ff(self.norm2(x)))
            return self.norm2(x)
        """, "forward_prenorm", 10, "norm2 ran more than once",
          also=('forward_order', 'forward_shortcuts', 'forward_gradients')),
    Wrong("scaled_residual", """
        def forward(self, x):
            x = 0.5 * x + self.drop_shortcut(self.att(self.norm1(x)))
            return 0.5 * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 5, "norm2 received 0.5*x + att(norm1(x))",
          also=('forward_order', 'forward_gradients')),
    Wrong("detached_shortcut", """
        def forward(self, x):
            shortcut = x.detach()
            x = shortcut + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "no gradient flows back to x along the first shortcut"),
    Wrong("detached_branch", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x))).detach()
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "no gradient flows back through drop_shortcut(att(norm1(x)))"),
    Wrong("inplace_on_input", """
        def forward(self, x):
            x += self.drop_shortcut(self.att(self.norm1(x)))
            x += self.drop_shortcut(self.ff(self.norm2(x)))
            return x
        """, "forward_gradients", None, "Backpropagation through your forward (eval mode) failed",
          also=("forward_robustness",)),
    Wrong("functional_layer_norm_without_params", """
        def forward(self, x):
            emb = x.shape[-1:]
            x = x + self.drop_shortcut(self.att(torch.nn.functional.layer_norm(x, emb)))
            return x + self.drop_shortcut(self.ff(torch.nn.functional.layer_norm(x, emb)))
        """, "forward_prenorm", 2, "ttention received the output of torch's layer_norm",
          also=('forward_order',)),
    Wrong("feed_forward_without_norm", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(x))
        """, "forward_prenorm", 7, "norm2 never ran; the feed-forward network received x + the output of attention",
          also=('forward_order',)),
    Wrong("returns_first_half", """
        def forward(self, x):
            return x + self.drop_shortcut(self.att(self.norm1(x)))
        """, "forward_order", 7, "your forward returned x + att(norm1(x))",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("no_grad_branch", """
        def forward(self, x):
            with torch.no_grad():
                branch = self.drop_shortcut(self.att(self.norm1(x)))
            x = x + branch
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "no gradient flows back through drop_shortcut(att(norm1(x)))"),
    Wrong("returns_tuple", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x))), None
        """, "forward_order", None, "returned tuple",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_gradients', 'forward_robustness')),
    Wrong("dropout_twice_on_attention", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.drop_shortcut(self.att(self.norm1(x))))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "went into another dropout"),
    Wrong("second_shortcut_scaled_slightly", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return 1.0001 * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_shortcuts", 10, "returned 1.0001*h + ff(norm2(h))",
          also=('forward_order',)),
    Wrong("detached_input_of_norm1", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x.detach())))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_gradients", None, "no gradient flows back to x through norm1"),
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
        """, "forward_order", 7, "whether norm2 received x plus attention's output as dropped",
          also=('forward_shortcuts', 'forward_prenorm', 'forward_dropout', 'forward_robustness')),
    Wrong("new_dropout_module_inside_forward", """
        def forward(self, x):
            drop = nn.Dropout(self.drop_shortcut.p)
            x = x + drop(self.att(self.norm1(x)))
            return x + drop(self.ff(self.norm2(x)))
        """, "forward_dropout", 4, "still dropped values",
          also=('forward_order', 'forward_robustness')),
    Wrong("hard_coded_dropout_rate", """
        def forward(self, x):
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), 0.1, self.training)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), 0.1, self.training)
        """, "forward_dropout", 4, "dropout with p = 0.1"),
    Wrong("float32_cast_inside", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x).float()))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "forward_robustness", None, "float64"),
]

# Right in values, wrong for a GPU: the CPU grader cannot see a device in values, so no point depends on it; the
# remark (read from the code the grader sent) must say so.
HINTED = {
    "cpu_inside_forward": ("""
        def forward(self, x):
            x = x.cpu()
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, ".cpu()"),
    "float32_zeros_inside": ("""
        def forward(self, x):
            total = torch.zeros(x.shape)
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, "torch.zeros(...) without device="),
    "legacy_tensor_constructor_inside": ("""
        def forward(self, x):
            total = torch.Tensor(*x.shape).zero_()
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, "torch.Tensor(...)"),
    "factory_with_cpu_device": ("""
        def forward(self, x):
            total = torch.zeros(x.shape, device="cpu")
            total = total + x + self.drop_shortcut(self.att(self.norm1(x)))
            return total + self.drop_shortcut(self.ff(self.norm2(total)))
        """, 'device="cpu"'),
}

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
