"""Forwards the fuzzer (catalog/fuzz.py) found the grader mistreating, shrunk by hand to what shows the mistake, each
with the truth its generator knew. tests/engine/test_fuzz.py holds each to every fuzzer property."""
from __future__ import annotations

from catalog.fuzz import Change, Forward


def _forward(body: str) -> str:
    return "def forward(self, x):\n" + "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())


REGRESSIONS = [
    # a coefficient read on one input (n2 * (mean |n2| + 0.5)) was said as a constant: "received 1.44579*norm2(h)"
    Forward("data-dependent scale into the feed-forward network", _forward("""
        n1 = self.norm1(x)
        h = x + self.drop_shortcut(self.att(n1))
        n2 = self.norm2(h)
        f = self.ff(n2 * (n2.abs().mean() + 0.5))
        return h + torch.nn.functional.dropout(f, self.drop_shortcut.p, self.training)
        """), (Change("n2->f", "times its mean absolute value", "both", (8,)),)),
    Forward("branch divided by its own standard deviation", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        d2 = self.drop_shortcut(self.ff(self.norm2(h)))
        return h + d2 / d2.std()
        """), (Change("d2->y", "divided by its standard deviation", "both", (10,)),)),
    # features reversed within each token were read as "received the output of norm2" (the same numbers, moved)
    Forward("features reversed into the feed-forward network", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        f = self.ff(self.norm2(h).flip(-1))
        return h + self.drop_shortcut(f)
        """), (Change("n2->f", "features reversed", "both", (8,)),)),
    # norm2 inside vmap (unrecorded): "the feed-forward network received a value that is not norm2(h)", though it did
    Forward("norm2 in vmap, second shortcut left out", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = torch.vmap(self.norm2)(h)
        return self.drop_shortcut(self.ff(n2))
        """), (Change("h->y", "zeroed", "both", (10,)),), hidden=("n2",)),
    # the feed-forward network's layers called one by one: "the feed-forward network never ran", and "what your block
    # returns does not change when its output changes"
    Forward("feed-forward layers one by one, second shortcut shifted", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = self.norm2(h)
        f = self.ff.layers[2](self.ff.layers[1](self.ff.layers[0](n2)))
        return torch.nn.functional.pad(h[:, 1:], (0, 0, 0, 1)) + self.drop_shortcut(f)
        """), (Change("h->y", "tokens shifted with zero padding", "both", (6,)),)),
    # two changes at the second sum (shortcut replaced, branch changed): step 10 was named from the branch alone
    Forward("second shortcut and branch both changed", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        d2 = self.drop_shortcut(self.ff(self.norm2(h)))
        return torch.sign(h) * h.abs().sqrt() + (d2 * 4).to(torch.int32).to(d2.dtype) / 4
        """), (Change("h->y", "sign times square root", "both", (6,)),
               Change("d2->y", "integer round trip", "both", (10,)))),
    # the first shortcut rolled and the sum quantized on its way into norm2: step 5 was named
    Forward("first shortcut rolled, sum quantized", _forward("""
        h = torch.roll(x, 1, dims=1) + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = self.norm2((h * 4).to(torch.int32).to(h.dtype) / 4)
        return h + self.drop_shortcut(self.ff(torch.nn.functional.pad(n2, (0, 0, 0, 3)))[:, :n2.shape[1]])
        """), (Change("x->h", "tokens rolled", "both", (1,)), Change("h->n2", "integer round trip", "both", (7,)))),
    # a hand-written dropout that also drops in eval mode was named at the sum (step 5), not at the dropout (4)
    Forward("hand-written dropout on in eval mode", _forward("""
        a = self.att(self.norm1(x))
        h = x + a * (torch.rand_like(a) >= self.drop_shortcut.p) / (1 - self.drop_shortcut.p)
        return h + self.drop_shortcut(self.ff(self.norm2(h)))
        """), (Change("d1", "dropout by hand, also in eval mode", "both", (4,)),)),
    # the sum halved on its way out, with the feed-forward network run on a padded tensor: no step was named
    Forward("output halved", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = self.norm2(h)
        f = self.ff(torch.nn.functional.pad(n2, (0, 0, 0, 3)))[:, :n2.shape[1]]
        return 0.5 * (h + torch.nn.functional.dropout(f, self.drop_shortcut.p, self.training))
        """), (Change("y->out", "halved", "both", (10,), open=False),)),
    # norm2 run inside vmap (unrecorded), then its output halved: step 7 (norm2) was named, but 7 and 8 look alike
    Forward("norm2 in vmap, its output halved", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        f = self.ff(0.5 * torch.vmap(self.norm2)(h))
        return h + torch.nn.functional.dropout(f, self.drop_shortcut.p, self.training)
        """), (Change("n2->f", "halved", "both", (8,), open=False),), hidden=("n2",)),
    # a hand-written dropout without rescaling and norm2 without scale and shift: "In train mode: step 7", from an
    # edit the replay verified by reading the unscaled mask as a mask, though the train run differs at step 4
    Forward("dropout by hand without rescaling, norm2 without scale and shift", _forward("""
        a = self.att(self.norm1(x))
        h = x + (a * (torch.rand_like(a) >= self.drop_shortcut.p) if self.training else a)
        n2 = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True, unbiased=False) + 1e-5)
        return h + self.drop_shortcut(self.ff(n2))
        """), (Change("d1", "dropout by hand without rescaling", "train", (4,)),
               Change("n2", "normalized without scale and shift", "both", (7,)))),
    # a gate into attention and the first shortcut halved: step 1 (shortcut replaced) was named, though a scaled
    # shortcut breaks the sum (step 5), after attention's step 3
    Forward("gate into attention, first shortcut halved", _forward("""
        n1 = self.norm1(x)
        a = self.att(n1 * torch.sigmoid(n1.roll(1, dims=-1)))
        h = 0.5 * x + self.drop_shortcut(a)
        return h + self.drop_shortcut(self.ff(self.norm2(h)))
        """), (Change("n1->a", "gate by another feature", "both", (3,)),
               Change("x->h", "halved", "both", (5,), open=False))),
    # the feed-forward network's first layer alone, its output folded: read as a pass over its layers whose output
    # has another shape, it was said to have received "pieces of norm2(h) covering 768 of 768 values"
    Forward("the feed-forward network's first layer, folded", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = self.norm2(h)
        f = self.ff.layers[0](n2).view(*n2.shape[:-1], 4, -1).sum(-2)
        return h + self.drop_shortcut(f)
        """), (Change("f", "only the feed-forward network's first layer, folded", "both", (8,)),)),
    # norm2 by hand and the feed-forward network on flipped tokens: the block's output less the feed-forward output
    # (flipped) was not h, so the first sum was taken to be wrong, and a shortcut reaching the output as it is was
    # read as an extra term (step 5)
    Forward("norm2 by hand, feed-forward network on flipped tokens", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True, unbiased=False) + 1e-5)
        f = self.ff(n2.flip(1)).flip(1)
        return h + self.drop_shortcut(f)
        """), (Change("n2", "normalized without scale and shift", "both", (7,)),)),
    # norm2 by hand and the second shortcut negated: the block input's move reached the output negated, read as a
    # scaled first shortcut (step 5), though the second shortcut is the one scaled
    Forward("norm2 by hand, second shortcut negated", _forward("""
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        n2 = self.norm2.scale * h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) + self.norm2.shift
        return -h + self.drop_shortcut(self.ff(n2))
        """), (Change("n2", "RMS norm by hand", "both", (7,)), Change("h->y", "negated", "both", (10,), open=False))),
]
