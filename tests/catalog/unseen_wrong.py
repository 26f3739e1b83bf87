"""Wrong forwards that the grader's catalog (wrong_forwards.py) does not hold, written to measure how many mistakes
the notebook's visible tests catch beyond the ones they were designed against. Each entry: name, forward, and what
is wrong with it (a plain description for a reader; the visible tests must find it on their own)."""
from __future__ import annotations

UNSEEN_WRONG = [
    ("attention_on_the_raw_input", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(x))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "attention reads x itself, not norm1(x)"),
    ("post_ln_second_half", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return self.norm2(x + self.drop_shortcut(self.ff(x)))
        """, "the feed-forward half is arranged Post-LN"),
    ("normalized_before_and_after", """
        def forward(self, x):
            x = self.norm1(x + self.drop_shortcut(self.att(self.norm1(x))))
            return self.norm2(x + self.drop_shortcut(self.ff(self.norm2(x))))
        """, "each LayerNorm also sits on the shortcut path"),
    ("feed_forward_reads_the_block_input", """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the feed-forward branch starts from x, not from the first half's result"),
    ("parallel_halves", """
        def forward(self, x):
            return x + self.drop_shortcut(self.att(self.norm1(x))) + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "both branches read x (a parallel block), not one after the other"),
    ("branch_subtracted", """
        def forward(self, x):
            x = x - self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the attention branch is subtracted"),
    ("branch_doubled", """
        def forward(self, x):
            x = x + 2 * self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the attention branch is added twice"),
    ("averaged_instead_of_added", """
        def forward(self, x):
            x = (x + self.drop_shortcut(self.att(self.norm1(x)))) / 2
            return (x + self.drop_shortcut(self.ff(self.norm2(x)))) / 2
        """, "each half averages instead of adding"),
    ("dropout_on_the_shortcut_too", """
        def forward(self, x):
            x = self.drop_shortcut(x) + self.drop_shortcut(self.att(self.norm1(x)))
            return self.drop_shortcut(x) + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "dropout also drops the shortcut"),
    ("dropout_only_in_eval_mode", """
        def forward(self, x):
            p = self.drop_shortcut.p
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), p, not self.training)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), p, not self.training)
        """, "dropout is on in eval mode and off in training mode"),
    ("dropout_between_norm_and_sublayer", """
        def forward(self, x):
            x = x + self.att(self.drop_shortcut(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the attention half drops the normalized input instead of attention's output"),
    ("in_place_add_on_the_input", """
        def forward(self, x):
            x.add_(self.drop_shortcut(self.att(self.norm1(x))))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the input tensor is changed in place"),
    ("output_detached", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return (x + self.drop_shortcut(self.ff(self.norm2(x)))).detach()
        """, "no gradient flows through the block"),
    ("numpy_round_trip", """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            x = torch.from_numpy(x.detach().numpy())
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "a trip through numpy cuts the first half from autograd and ties the block to the CPU"),
    ("converted_to_float32", """
        def forward(self, x):
            x = x.float()
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """, "the block always computes in float32"),
    ("normalized_over_tokens", """
        def forward(self, x):
            def normalize(norm, t):
                t = (t - t.mean(dim=1, keepdim=True)) / torch.sqrt(t.var(dim=1, keepdim=True, unbiased=False) + norm.eps)
                return norm.scale * t + norm.shift
            x = x + self.drop_shortcut(self.att(normalize(self.norm1, x)))
            return x + self.drop_shortcut(self.ff(normalize(self.norm2, x)))
        """, "normalizes each feature over the tokens instead of each token over its features"),
    ("unbiased_variance", """
        def forward(self, x):
            def normalize(norm, t):
                t = (t - t.mean(dim=-1, keepdim=True)) / torch.sqrt(t.var(dim=-1, keepdim=True) + norm.eps)
                return norm.scale * t + norm.shift
            x = x + self.drop_shortcut(self.att(normalize(self.norm1, x)))
            return x + self.drop_shortcut(self.ff(normalize(self.norm2, x)))
        """, "a hand-written LayerNorm with the unbiased variance"),
    ("eval_branch_scaled_by_keep_probability", """
        def forward(self, x):
            keep = 1 - self.drop_shortcut.p
            x = x + keep * self.drop_shortcut(self.att(self.norm1(x)))
            return x + keep * self.drop_shortcut(self.ff(self.norm2(x)))
        """, "scales each branch by 1 - p, which nn.Dropout already accounts for"),
    ("zeros_made_on_the_cpu", """
        def forward(self, x):
            out = torch.zeros(x.shape, dtype=x.dtype)
            out = out + x + self.drop_shortcut(self.att(self.norm1(x)))
            return out + self.drop_shortcut(self.ff(self.norm2(out)))
        """, "a tensor made without the input's device"),
    ("returns_the_branches_only", """
        def forward(self, x):
            a = self.drop_shortcut(self.att(self.norm1(x)))
            return a + self.drop_shortcut(self.ff(self.norm2(x + a)))
        """, "the output leaves out the block input"),
]
