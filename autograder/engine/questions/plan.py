"""The grader's questions for one submission: the `Plan` the trusted parent draws from a seed.

Every seed, input, read-out, dropout probability, Task-2 factor and depth is the parent's. The child only reads
the plan; the parent asks the reference the same questions and decides every point itself.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from . import chains as chains_
from . import sweep as sweep_

GRADING_CFG = {
    "vocab_size": 101,
    "context_length": 8,
    "emb_dim": 32,
    "n_heads": 4,
    "n_layers": 2,
    "drop_rate": 0.1,
    "qkv_bias": False,
}
PROFILE_DEPTH = 24
# The deep stack's weights and input: the same for every grade. The profile is judged by thresholds on a measured
# quantity, so its verdict must not depend on the grade's seed: every grade of one submission measures the very same
# stack (the block's own values are checked on fresh inputs by every other question).
PROFILE_SEED = 7
BATCH = 3
BIG_BATCH = 5
SHORT = 3  # tokens fewer than context_length in the questions about a short sequence
# The inputs of the questions asked after the recorded runs, each drawn from a seed of its own: the answers
# cannot be copied from an earlier answer, they must be computed.
FRESH = ("repeat", "small", "batch", "double", "other")
# The components whose outputs the `respond` question changes, one at a time.
RESPONDING = ("norm1", "att", "norm2", "ff")
# The `moved` question's runs: with attention's and the feed-forward network's outputs held, as they are, then with
# the block input, attention's held output or the feed-forward network's moved by one amount.
MOVED_RUNS = ("base", "x", "att", "ff")


@dataclass
class Plan:
    """The grader's questions for one submission. Drawn by the parent; the child only reads it."""

    seed: int
    device: str = "cpu"
    cfg: dict = field(default_factory=lambda: dict(GRADING_CFG))
    weights: int = 1  # the block's weights and LayerNorm parameters
    inputs: int = 2  # the block input x
    readout: int = 3  # the read-out whose gradient the probes report
    rng: tuple = (4, 5, 6)  # torch's global seed before a call: the forward's own, then two for eval_seeds
    drop_p: float = 0.5
    profile_seed: int = PROFILE_SEED  # the deep stack's weights and input (one for every grade)
    fresh: tuple = (8, 9, 10, 11, 12)  # the inputs of the later questions (see FRESH)
    respond: int = 13  # the changes the `respond` question makes to each component's output
    chains: tuple = ((2.0, 10),)  # Task 2: (factor, n_layers) for magnitude_by_formula
    layers: tuple = (((2.0, ()), 10),)  # Task 2: (layer spec, n_layers) for magnitude_by_autograd (chains.py)
    factors: tuple = (2.0,)  # Task 2: factors for classify_factor
    sweep: tuple = ()  # the blocks and calls drawn from the whole space of inputs (sweep.py)

    @classmethod
    def draw(cls, seed: int, device: str = "cpu") -> "Plan":
        """Every question of a grading run, from its seed (the same seed gives the same questions)."""
        rng = random.Random(f"plan:{seed}")
        draw = lambda: rng.randrange(1, 2**31)  # noqa: E731
        chains = [
            (2.0, 10),
            (0.5, 10),
            (1.0, 6),
            (-1.5, rng.randint(3, 8)),
            (0.9, 1),
            (round(rng.uniform(1.05, 1.6), 3), rng.randint(5, 14)),
            (round(rng.uniform(0.3, 0.95), 3), rng.randint(5, 14)),
            (-round(rng.uniform(0.3, 0.95), 3), rng.randint(3, 9)),
        ]
        factors = [
            1.0,
            -1.0,
            0.999,
            1.001,
            2.0,
            0.5,
            0.0,
            -2.0,
            -0.5,
            round(rng.uniform(0.1, 0.99), 3),
            round(rng.uniform(1.01, 3.0), 3),
            -round(rng.uniform(1.01, 3.0), 3),
        ]
        rng.shuffle(factors)
        seeds = dict(weights=draw(), inputs=draw(), readout=draw(), rng=(draw(), draw(), draw()))
        draw()  # once the deep stack's seed, now fixed (PROFILE_SEED): the seeds after it stay as they were
        seeds["respond"] = draw()
        fresh = tuple(draw() for _ in FRESH)
        layers = [(chains_.constant(factor), n) for factor, n in chains[:4]] + [
            (chains_.draw(rng), rng.randint(5, 12)) for _ in range(3)
        ]  # drawn last: the seeds above stay
        chains, layers, factors = _whole_domain(random.Random(f"domain:{seed}"), chains, layers, factors)
        cfg = GRADING_CFG
        sweep = sweep_.draw(seed, taken=((cfg["emb_dim"], cfg["n_heads"], cfg["context_length"]),))
        return cls(
            seed=seed,
            device=device,
            **seeds,
            fresh=fresh,
            chains=tuple(chains),
            layers=tuple(layers),
            factors=tuple(factors),
            sweep=sweep,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        return cls(
            **{
                **data,
                "rng": tuple(data["rng"]),
                "chains": tuple(tuple(c) for c in data["chains"]),
                "layers": tuple((chains_.as_spec(spec), n) for spec, n in data["layers"]),
                "factors": tuple(data["factors"]),
                "fresh": tuple(data["fresh"]),
                "sweep": tuple(data.get("sweep") or ()),
            }
        )


def _whole_domain(rng: random.Random, chains: list, layers: list, factors: list) -> tuple:
    """Task 2 over its whole domain, for every function that takes each: factors of 0, 1 and -1, a tiny and a
    huge magnitude (either sign), and depths of 0 and 1."""
    tiny = rng.choice((-1, 1)) * round(10 ** -rng.uniform(3, 6), 9)
    huge = rng.choice((-1, 1)) * round(10 ** rng.uniform(3, 6), 1)
    extra = [(0.0, rng.randint(2, 6)), (1.0, 0), (-1.0, rng.randint(2, 9)), (tiny, rng.randint(2, 6)), (huge, rng.randint(2, 6))]
    extra += [(rng.choice((2.0, 0.5, -1.5)), 1), (0.0, 1), (round(rng.uniform(0.3, 3.0), 3), 0)]
    chains = chains + extra
    layers = layers + [(chains_.constant(f), n) for f, n in extra] + [(chains_.draw(rng), rng.choice((0, 1)))]
    factors = factors + [tiny, huge]
    return chains, layers, factors
