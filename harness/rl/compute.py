"""Compute accounting: every evaluation point carries cumulative compute in every unit.

FLOPs are a deterministic estimate (the usual ``6N`` rule split by phase), with ``N`` the
non-embedding parameter count (:func:`scalerl.harness.rl.model.non_embedding_params`):

- generation: ``2 N`` per prompt and generated token of every batch the trainer consumed
  (counted when consumed, so PipelineRL's in-flight work enters with the step that uses it);
- training: ``2 N`` forward + ``4 N`` backward per token of each trained sequence (prompt +
  completion), for every optimizer step the sequence enters (PPO-off-policy minibatches enter once).

Attention's ``O(T^2)`` term and the LM head are left out, as in the usual estimate; what matters
for the fits is that the same run always gets the same numbers. ``tokens`` counts generated
tokens of consumed batches (sampled + forced), ``samples`` counts consumed sequences.
``gpu_hours`` is ``wall_s x devices / 3600`` (on CPU, ``devices = 1``: device-hours). Validation
is excluded from every unit, wall time included: it is measurement, not training.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ComputeMeter:
    n_params: int
    devices: int = 1
    flops: float = 0.0
    tokens: int = 0
    samples: int = 0
    wall_s: float = 0.0

    def add_generation(self, prompt_tokens: int, generated_tokens: int, samples: int) -> None:
        self.flops += 2.0 * self.n_params * (prompt_tokens + generated_tokens)
        self.tokens += generated_tokens
        self.samples += samples

    def add_training(self, tokens: int) -> None:
        self.flops += 6.0 * self.n_params * tokens

    def add_wall(self, seconds: float) -> None:
        self.wall_s += seconds

    def snapshot(self) -> dict[str, float]:
        return {
            "gpu_hours": self.wall_s * self.devices / 3600.0,
            "flops": self.flops,
            "tokens": float(self.tokens),
            "samples": float(self.samples),
            "wall_s": self.wall_s,
        }

    def state_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def value(self, unit: str, steps: int) -> float:
        """Cumulative compute in a budget unit (``steps`` is passed in: the trainer owns it)."""
        return float(steps) if unit == "steps" else self.snapshot()[unit]
