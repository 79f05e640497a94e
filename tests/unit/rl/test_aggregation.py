"""Loss aggregation modes, pinned by hand on a batch with unequal lengths.

Batch: 2 prompts x 2 generations, T = 4 (terms already zero where the mask is 0):

    seq  prompt  tokens          len  sum  mean
    0    0       [4]             1    4    4
    1    0       [1, 1, 1]       3    3    1
    2    1       [2, 4]          2    6    3
    3    1       [0, 0, 0, 0]    4    0    0

    prompt_avg = mean((4+3)/(1+3), (6+0)/(2+4)) = mean(1.75, 1.0) = 1.375
    sample_avg = mean(4, 1, 3, 0) = 2.0
    token_avg  = (4+3+6+0) / (1+3+2+4) = 13/10 = 1.3
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.recipe.schema import AggregationKnob
from scalerl.harness.rl.aggregation import AGGREGATORS, aggregate

TERMS = [[4.0, 0, 0, 0], [1, 1, 1, 0], [2, 4, 0, 0], [0, 0, 0, 0]]
MASK = [[1.0, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
GROUP = [0, 0, 1, 1]
EXPECTED = {"prompt_avg": 1.375, "sample_avg": 2.0, "token_avg": 1.3}


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_modes_by_hand_on_unequal_lengths(mode: str) -> None:
    out = aggregate(torch.tensor(TERMS), torch.tensor(MASK), torch.tensor(GROUP), mode)  # type: ignore[arg-type]
    assert out.dim() == 0
    assert out.item() == pytest.approx(EXPECTED[mode])


def test_prompt_avg_gradient_weights_by_hand() -> None:
    # d loss / d term = 1 / (n_prompts * tokens of the term's prompt group) on trained tokens:
    # prompt 0 has 4 tokens -> 1/8; prompt 1 has 6 -> 1/12; untrained positions get 0.
    terms = torch.tensor(TERMS, requires_grad=True)
    aggregate(terms, torch.tensor(MASK), torch.tensor(GROUP), "prompt_avg").backward()
    a, b = 1 / 8, 1 / 12
    expected = torch.tensor([[a, 0, 0, 0], [a, a, a, 0], [b, b, 0, 0], [b, b, b, b]])
    assert terms.grad is not None
    torch.testing.assert_close(terms.grad, expected)


def test_group_ids_are_labels_not_positions() -> None:
    # Same batch, prompts labelled 7 and 3 and interleaved: the same 1.375.
    order = [0, 2, 1, 3]
    terms = torch.tensor(TERMS)[order]
    mask = torch.tensor(MASK)[order]
    out = aggregate(terms, mask, torch.tensor([7, 3, 7, 3]), "prompt_avg")
    assert out.item() == pytest.approx(1.375)


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_empty_sequences_and_groups_are_skipped(mode: str) -> None:
    # A fifth sequence (new prompt 2) with no trained token, holding garbage: nothing changes.
    terms = torch.tensor([*TERMS, [0.0, 0, 0, 0]])
    mask = torch.tensor([*MASK, [0.0, 0, 0, 0]])
    out = aggregate(terms, mask, torch.tensor([*GROUP, 2]), mode)  # type: ignore[arg-type]
    assert out.item() == pytest.approx(EXPECTED[mode])


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_all_empty_batch_is_zero_and_differentiable(mode: str) -> None:
    terms = torch.zeros(2, 3, requires_grad=True)
    out = aggregate(terms, torch.zeros(2, 3), torch.tensor([0, 1]), mode)  # type: ignore[arg-type]
    out.backward()
    assert out.item() == 0.0
    assert terms.grad is not None and torch.equal(terms.grad, torch.zeros(2, 3))


def test_token_avg_lets_long_prompts_dominate() -> None:
    # Every sequence in prompt 0 has 1 token (terms 2, 2), in prompt 1 three tokens (all 0).
    # sample_avg = token-per-sequence means (2, 2, 0, 0) -> 1.0; prompt_avg = mean(2, 0) = 1.0;
    # token_avg = 4 / 8 = 0.5: only token_avg lets the long prompt dominate.
    terms = torch.tensor([[2.0, 0, 0], [2, 0, 0], [0, 0, 0], [0, 0, 0]])
    mask = torch.tensor([[1.0, 0, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]])
    group = torch.tensor([0, 0, 1, 1])
    assert aggregate(terms, mask, group, "prompt_avg").item() == pytest.approx(1.0)
    assert aggregate(terms, mask, group, "sample_avg").item() == pytest.approx(1.0)
    assert aggregate(terms, mask, group, "token_avg").item() == pytest.approx(0.5)


@settings(max_examples=40, deadline=None)
@given(
    n_prompts=st.integers(1, 4),
    gens=st.integers(1, 4),
    length=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_modes_agree_when_every_sequence_has_the_same_length(
    n_prompts: int, gens: int, length: int, seed: int
) -> None:
    # Equal lengths and equal group sizes: every token weighs 1/(B*L) in all three modes.
    gen = torch.Generator().manual_seed(seed)
    b, t = n_prompts * gens, length + 2
    mask = torch.zeros(b, t)
    mask[:, :length] = 1.0
    terms = torch.randn(b, t, generator=gen, dtype=torch.float64) * mask
    group = torch.arange(n_prompts).repeat_interleave(gens)
    outs = [aggregate(terms, mask, group, m).item() for m in ("prompt_avg", "sample_avg", "token_avg")]
    assert outs[0] == pytest.approx(outs[1], abs=1e-12)
    assert outs[0] == pytest.approx(outs[2], abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    c=st.floats(-100, 100, allow_nan=False),
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=8).filter(lambda ls: sum(ls) > 0),
    n_prompts=st.integers(1, 3),
    mode=st.sampled_from(sorted(EXPECTED)),
)
def test_constant_terms_aggregate_to_the_constant(
    c: float, lengths: list[int], n_prompts: int, mode: str
) -> None:
    mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in lengths], dtype=torch.float64)
    group = torch.arange(len(lengths)) % n_prompts
    out = aggregate(c * mask, mask, group, mode)  # type: ignore[arg-type]
    assert out.item() == pytest.approx(c, abs=1e-9)


def test_registry_matches_schema_and_rejects_unknown_modes() -> None:
    assert set(AGGREGATORS) == set(AggregationKnob.alternative_names())
    with pytest.raises(ConfigError, match=re.escape("knobs.aggregation.choice='seq_avg'")):
        aggregate(torch.zeros(1, 1), torch.ones(1, 1), torch.zeros(1, dtype=torch.long), "seq_avg")  # type: ignore[arg-type]
    with pytest.raises(HarnessError, match="group"):
        aggregate(torch.zeros(2, 1), torch.ones(2, 1), torch.zeros(3, dtype=torch.long), "token_avg")
