"""Advantage normalisation modes, pinned by hand.

Rewards of 3 prompts (G = 4, 4, 2):

    prompt 0: [1, 0, 0, 0]  mean .25 -> centred [.75, -.25, -.25, -.25]
    prompt 1: [1, 1, 1, 1]  mean 1   -> centred [0, 0, 0, 0]          (zero variance)
    prompt 2: [1, 0]        mean .5  -> centred [.5, -.5]

    none:   the centred values.
    prompt: divide by each group's population std:
            prompt 0: sqrt((.5625 + 3*.0625)/4) = sqrt(.1875) = .4330127 -> [1.7320508, -.5773503 x3]
            prompt 2: .5 -> [1, -1];  prompt 1 stays 0.
    batch:  divide by the population std of all 10 centred values (their mean is 0):
            sqrt((.5625 + 3*.0625 + 0 + 2*.25)/10) = sqrt(.125) = .3535534
            -> [2.1213203, -.7071068 x3, 0 x4, 1.4142136, -1.4142136]
            (the std of the raw rewards, sqrt(.7*.3) = .4582576, would give .75/.458 = 1.6366.)
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.recipe.schema import AdvantageNormKnob
from scalerl.harness.rl.advantages import ADVANTAGE_NORMS, compute_advantages

REWARDS = [1.0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
GROUP = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
S3 = 3**0.5
EXPECTED = {
    "none": [0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0, 0.5, -0.5],
    "prompt": [S3, -1 / S3, -1 / S3, -1 / S3, 0, 0, 0, 0, 1.0, -1.0],
    "batch": [0.75 / 0.125**0.5, -0.25 / 0.125**0.5, -0.25 / 0.125**0.5, -0.25 / 0.125**0.5,
              0, 0, 0, 0, 0.5 / 0.125**0.5, -0.5 / 0.125**0.5],
}  # fmt: skip


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_modes_by_hand(mode: str) -> None:
    rewards = torch.tensor(REWARDS, dtype=torch.float64)
    adv = compute_advantages(rewards, torch.tensor(GROUP), mode, eps=0.0)  # type: ignore[arg-type]
    torch.testing.assert_close(adv, torch.tensor(EXPECTED[mode], dtype=torch.float64))


def test_batch_std_is_of_centred_advantages_not_raw_rewards() -> None:
    adv = compute_advantages(torch.tensor(REWARDS), torch.tensor(GROUP), "batch", eps=0.0)
    assert adv[0].item() == pytest.approx(2.1213203, abs=1e-6)
    assert adv[0].item() != pytest.approx(0.75 / (0.7 * 0.3) ** 0.5, abs=1e-3)


def test_eps_is_added_to_the_divisor() -> None:
    # prompt 2 alone, std .5: with eps = .5 the advantage is .5 / (.5 + .5) = .5.
    adv = compute_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), "prompt", eps=0.5)
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]))


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_zero_variance_groups_get_exactly_zero(mode: str) -> None:
    # 0.1 three times does not average to exactly 0.1 in floating point; the advantage must
    # still be exactly 0, not a residue blown up by a near-zero std.
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.7])
    adv = compute_advantages(rewards, torch.tensor([4, 4, 4, 9, 9]), mode)  # type: ignore[arg-type]
    assert torch.equal(adv, torch.zeros(5))


def test_integer_rewards_give_float_advantages_without_gradient() -> None:
    adv = compute_advantages(torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 1, 1]), "none")
    assert adv.dtype == torch.get_default_dtype()
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5, 0.0, 0.0]))
    r = torch.tensor([1.0, 0.0], requires_grad=True)
    assert not compute_advantages(r, torch.tensor([0, 0]), "batch").requires_grad


@settings(max_examples=40, deadline=None)
@given(
    rewards=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=12),
    n_prompts=st.integers(1, 4),
)
def test_normalised_scales(rewards: list[float], n_prompts: int) -> None:
    r = torch.tensor(rewards, dtype=torch.float64)
    group = torch.arange(len(rewards)) % n_prompts
    none = compute_advantages(r, group, "none", eps=0.0)
    for g in group.unique():
        sel = group == g
        assert none[sel].sum().item() == pytest.approx(0.0, abs=1e-12)  # centred per prompt
        prompt = compute_advantages(r, group, "prompt", eps=0.0)[sel]
        spread = r[sel].max() > r[sel].min()
        # prompt mode: unit population std inside every group that has any variance
        assert prompt.std(correction=0).item() == pytest.approx(1.0 if spread else 0.0, abs=1e-9)
    batch = compute_advantages(r, group, "batch", eps=0.0)
    if none.abs().max() > 0:
        assert batch.std(correction=0).item() == pytest.approx(1.0, abs=1e-9)
        # batch mode is the centred advantages times one common factor
        ratio = batch[none != 0] / none[none != 0]
        assert torch.allclose(ratio, ratio[0].expand_as(ratio))


def test_registry_matches_schema_and_rejects_bad_input() -> None:
    assert set(ADVANTAGE_NORMS) == set(AdvantageNormKnob.alternative_names())
    with pytest.raises(ConfigError, match=re.escape("knobs.advantage_norm.choice='group'")):
        compute_advantages(torch.zeros(2), torch.zeros(2, dtype=torch.long), "group")  # type: ignore[arg-type]
    with pytest.raises(HarnessError, match="must both be"):
        compute_advantages(torch.zeros(2), torch.zeros(3, dtype=torch.long), "none")
