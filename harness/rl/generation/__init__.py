"""Generation backends behind one interface (:mod:`.base`): ``hf`` (transformers) and ``vllm``."""

from scalerl.harness.rl.generation.base import (
    GENERATORS,
    Cohort,
    Generator,
    Rollouts,
    SamplingSpec,
    make_generator,
    register_generator,
)

__all__ = [
    "GENERATORS",
    "Cohort",
    "Generator",
    "Rollouts",
    "SamplingSpec",
    "make_generator",
    "register_generator",
]
