"""Correct forwards in different styles: every one must get full marks."""
from __future__ import annotations

EQUIVALENT = {
    "two_line_residual_stream": """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """,
    "loop_over_sublayers": """
        def forward(self, x):
            for norm, sublayer in ((self.norm1, self.att), (self.norm2, self.ff)):
                x = x + self.drop_shortcut(sublayer(norm(x)))
            return x
        """,
    "helper_method": """
        def _residual(self, x, norm, sublayer):
            return x + self.drop_shortcut(sublayer(norm(x)))

        def forward(self, x):
            return self._residual(self._residual(x, self.norm1, self.att), self.norm2, self.ff)
        """,
    "torch_add": """
        def forward(self, x):
            h = torch.add(x, self.drop_shortcut(self.att(self.norm1(x))))
            return torch.add(h, self.drop_shortcut(self.ff(self.norm2(h))))
        """,
    "tensor_add_method": """
        def forward(self, x):
            h = x.add(self.drop_shortcut(self.att(self.norm1(x))))
            return h.add(self.drop_shortcut(self.ff(self.norm2(h))))
        """,
    "inplace_on_fresh_tensors": """
        def forward(self, inputs):
            attended = self.drop_shortcut(self.att(self.norm1(inputs)))
            attended += inputs
            fed = self.drop_shortcut(self.ff(self.norm2(attended)))
            fed += attended
            return fed
        """,
    "clone_the_shortcut": """
        def forward(self, x):
            residual = x.clone()
            x = self.drop_shortcut(self.att(self.norm1(x))) + residual
            residual = x.clone()
            return self.drop_shortcut(self.ff(self.norm2(x))) + residual
        """,
    "functional_dropout_following_mode": """
        def forward(self, x):
            p = self.drop_shortcut.p
            x = x + torch.nn.functional.dropout(self.att(self.norm1(x)), p, self.training)
            return x + torch.nn.functional.dropout(self.ff(self.norm2(x)), p, self.training)
        """,
    "stack_and_sum": """
        def forward(self, x):
            x = torch.stack([x, self.drop_shortcut(self.att(self.norm1(x)))]).sum(0)
            return sum([x, self.drop_shortcut(self.ff(self.norm2(x)))])
        """,
    "explicit_forward_calls": """
        def forward(self, x):
            a = self.drop_shortcut.forward(self.att.forward(self.norm1.forward(x)))
            h = a + x
            f = self.drop_shortcut.forward(self.ff.forward(self.norm2.forward(h)))
            return f + h
        """,
    "functional_layer_norm_with_module_params": """
        def forward(self, x):
            def normalize(norm, t):
                return torch.nn.functional.layer_norm(t, t.shape[-1:], norm.scale, norm.shift, norm.eps)
            x = x + self.drop_shortcut(self.att(normalize(self.norm1, x)))
            return x + self.drop_shortcut(self.ff(normalize(self.norm2, x)))
        """,
    "step_by_step_with_comments": """
        def forward(self, x):
            # first half: attention
            saved = x
            y = self.norm1(x)
            y = self.att(y)
            y = self.drop_shortcut(y)
            y = y + saved
            # second half: feed-forward
            saved = y
            z = self.norm2(y)
            z = self.ff(z)
            z = self.drop_shortcut(z)
            return saved + z
        """,
    "feed_forward_on_flattened_tokens": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            b, t, d = h.shape
            f = self.ff(self.norm2(h).reshape(b * t, d)).reshape(b, t, d)
            return h + self.drop_shortcut(f)
        """,
    "prints_debug_values": """
        def forward(self, x):
            print("block input", tuple(x.shape), x.mean().item(), x.std().item())
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            print(f"after the attention half: {h.norm().item():.3f}")
            out = h + self.drop_shortcut(self.ff(self.norm2(h)))
            print("output", out)
            return out
        """,
    "layer_norm_written_out": """
        def forward(self, x):
            def normalize(norm, t):
                mean = t.mean(dim=-1, keepdim=True)
                var = ((t - mean) ** 2).mean(dim=-1, keepdim=True)
                return norm.scale * (t - mean) / torch.sqrt(var + norm.eps) + norm.shift
            h = x + self.drop_shortcut(self.att(normalize(self.norm1, x)))
            return h + self.drop_shortcut(self.ff(normalize(self.norm2, h)))
        """,
    # the unseen right forwards: values the reader cannot follow, matching Pre-LN in both modes
    "feed_forward_through_its_own_layers": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            v = self.norm2(h)
            for layer in self.ff.layers:
                v = layer(v)
            return h + self.drop_shortcut(v)
        """,
    "feed_forward_on_reversed_tokens": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h + self.drop_shortcut(self.ff(self.norm2(h).flip(1)).flip(1))
        """,
    "feed_forward_vmapped": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h + self.drop_shortcut(torch.func.vmap(self.ff)(self.norm2(h)))
        """,
    "feed_forward_checkpointed": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            f = torch.utils.checkpoint.checkpoint(lambda v: self.ff(self.norm2(v)), h, use_reentrant=False)
            return h + self.drop_shortcut(f)
        """,
    "through_a_tensor_subclass": """
        def forward(self, x):
            class Tagged(torch.Tensor):
                pass
            x = x.as_subclass(Tagged)
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return (h + self.drop_shortcut(self.ff(self.norm2(h)))).as_subclass(torch.Tensor)
        """,
    "feed_forward_padded_then_cropped": """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            padded = torch.nn.functional.pad(self.norm2(h), (0, 0, 2, 2))
            return h + self.drop_shortcut(self.ff(padded)[:, 2:-2])
        """,
}

# An __init__ that keeps the components in containers too: the grader must follow those references.
CONTAINER_INIT = """
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                                      num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])
        self.halves = nn.ModuleList([nn.ModuleList([self.norm1, self.att]), nn.ModuleList([self.norm2, self.ff])])
    """
CONTAINER_FORWARD = """
    def forward(self, x):
        for norm, sublayer in self.halves:
            x = x + self.drop_shortcut(sublayer(norm(x)))
        return x
    """
