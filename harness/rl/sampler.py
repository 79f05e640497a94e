"""Which training prompt comes next: epochs of seeded permutations, minus retired prompts.

No-positive-resampling (:class:`scalerl.harness.rl.filters.ResamplingTracker`) retires prompts whose pass
rate reached the threshold; the sampler skips a retired prompt at draw time, so once retired a
prompt is never generated for again (not even later in the same epoch). The position, the
current permutation and the RNG are part of the checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalerl.harness.rl.filters import ResamplingTracker


class PromptSampler:
    def __init__(self, n_prompts: int, seed: int) -> None:
        self.n = n_prompts
        self.rng = np.random.default_rng(seed)
        self.epoch = 0
        self.perm = self.rng.permutation(n_prompts)
        self.pos = 0
        self.drawn = 0

    def draw(self, count: int, tracker: ResamplingTracker) -> list[int] | None:
        """``count`` prompt indices, or None when every prompt is retired."""
        out: list[int] = []
        while len(out) < count:
            if len(tracker.retired()) >= self.n:
                return None
            if self.pos >= self.n:
                self.epoch += 1
                self.perm = self.rng.permutation(self.n)
                self.pos = 0
            idx = int(self.perm[self.pos])
            self.pos += 1
            if not tracker.is_retired(idx):
                out.append(idx)
        self.drawn += len(out)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "epoch": self.epoch,
            "perm": self.perm.tolist(),
            "pos": self.pos,
            "drawn": self.drawn,
            "n": self.n,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.epoch, self.pos, self.drawn, self.n = state["epoch"], state["pos"], state["drawn"], state["n"]
        self.perm = np.asarray(state["perm"], dtype=np.int64)
