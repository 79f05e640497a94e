"""The policy losses, pinned against values worked out by hand.

Shared batch (B=3, T=3). Ratios rho = exp(logp - old_logp) are chosen round:

    rho  = [[0.5, 1.0, 5.0],     adv = [ 2,      mask = [[1, 1, 1],
            [1.1, 0.5, 2.0],             -1,              [1, 1, 1],
            [2.0, 1.0, pad]]             -1]              [1, 1, 0]]

    logp = [[-1.0, -2.0, -0.5],
            [-1.5, -0.3, -0.7],
            [-0.2, -1.0, -inf]]   (the padded entry holds garbage on purpose)

The gradient of ``rho * A`` with respect to ``logp`` is ``rho * A`` (d rho / d logp = rho).
"""

from __future__ import annotations

import math

import pytest
import torch

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.recipe.schema import DapoParams, LossAlternatives, LossKnob
from scalerl.harness.rl.losses import CISPO, DAPO, GRPO, GSPO, LOSSES, make_loss

RHO = [[0.5, 1.0, 5.0], [1.1, 0.5, 2.0], [2.0, 1.0, 1.0]]
LOGP = [[-1.0, -2.0, -0.5], [-1.5, -0.3, -0.7], [-0.2, -1.0, float("-inf")]]
MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
ADV = [2.0, -1.0, -1.0]


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    logp = torch.tensor(LOGP, dtype=torch.float64)
    old = torch.where(
        torch.tensor(MASK).bool(),
        logp - torch.tensor(RHO, dtype=torch.float64).log(),
        torch.zeros(3, 3).double(),
    )
    return logp.requires_grad_(True), old, torch.tensor(ADV, dtype=torch.float64), torch.tensor(MASK)


def terms_and_grad(loss: object) -> tuple[torch.Tensor, torch.Tensor]:
    assert hasattr(loss, "token_terms")
    logp, old, adv, mask = batch()
    terms = loss.token_terms(logp, old, adv, mask)
    terms.sum().backward()
    assert logp.grad is not None
    return terms.detach(), logp.grad


def close(actual: torch.Tensor, expected: list[list[float]]) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-9)


# --------------------------------------------------------------------------- CISPO
def test_cispo_terms_and_gradient_by_hand() -> None:
    # weight w = min(rho, 4) = [[.5, 1, 4], [1.1, .5, 2], [2, 1, -]]; term = -w * A * logp
    # row0 (A=2):  -.5*2*-1 = 1.0;  -1*2*-2 = 4.0;  -4*2*-.5 = 4.0  (rho=5 truncated to 4)
    # row1 (A=-1): 1.1*-1.5 = -1.65;  .5*-.3 = -.15;  2*-.7 = -1.4
    # row2 (A=-1): 2*-.2 = -.4;  1*-1 = -1.0;  padded 0
    terms, grad = terms_and_grad(CISPO(eps_max=4.0))
    close(terms, [[1.0, 4.0, 4.0], [-1.65, -0.15, -1.4], [-0.4, -1.0, 0.0]])
    # stop-gradient on the ratio: d term / d logp = -w * A exactly (a ratio carrying gradient
    # would add -A * w * logp on the untruncated tokens, e.g. 0 instead of -1 at [0, 0]).
    close(grad, [[-1.0, -2.0, -8.0], [1.1, 0.5, 2.0], [2.0, 1.0, 0.0]])


def test_cispo_eps_max_is_the_truncation() -> None:
    # eps_max=10 leaves rho=5 untruncated: term[0,2] = -5*2*-.5 = 5.0, grad -5*2 = -10.
    terms, grad = terms_and_grad(CISPO(eps_max=10.0))
    assert terms[0, 2].item() == pytest.approx(5.0)
    assert grad[0, 2].item() == pytest.approx(-10.0)
    # eps_max=0.75 truncates rho=1 and 1.1 and 2 too: term[1,0] = .75*-1.5 = -1.125.
    terms, _ = terms_and_grad(CISPO(eps_max=0.75))
    assert terms[1, 0].item() == pytest.approx(-1.125)
    assert terms[0, 0].item() == pytest.approx(1.0)  # rho=.5 below the cap: unchanged


def test_cispo_old_logp_gets_no_gradient() -> None:
    logp, old, adv, mask = batch()
    old.requires_grad_(True)
    CISPO().token_terms(logp, old, adv, mask).sum().backward()
    assert old.grad is None


# --------------------------------------------------------------------------- DAPO
def test_dapo_terms_and_gradient_by_hand() -> None:
    # term = -min(rho*A, clip(rho, .8, 1.28)*A)
    # row0 (A=2):  rho .5 -> min(1.0, 1.6) = 1.0 ; rho 1 -> 2.0 ; rho 5 -> min(10, 2.56) = 2.56 (clipped)
    # row1 (A=-1): rho 1.1 -> -1.1 ; rho .5 -> min(-.5, -.8) = -.8 (clipped) ; rho 2 -> min(-2, -1.28) = -2
    # row2 (A=-1): rho 2 -> -2 ; rho 1 -> -1 ; padded 0
    terms, grad = terms_and_grad(DAPO(eps_low=0.2, eps_high=0.28))
    close(terms, [[-1.0, -2.0, -2.56], [1.1, 0.8, 2.0], [2.0, 1.0, 0.0]])
    # gradient -rho*A on the unclipped side, exactly 0 on the clipped side ([0,2] and [1,1]).
    close(grad, [[-1.0, -2.0, 0.0], [1.1, 0.0, 2.0], [2.0, 1.0, 0.0]])


def test_dapo_clip_is_asymmetric() -> None:
    # eps_high=0.5: rho=5 with A=2 clips at 1.5 -> term -3.0; eps_low=0.6: rho=.5 with A=-1 sits
    # inside [0.4, 1.28] -> unclipped term 0.5 with gradient 0.5.
    terms, grad = terms_and_grad(DAPO(eps_low=0.2, eps_high=0.5))
    assert terms[0, 2].item() == pytest.approx(-3.0)
    terms, grad = terms_and_grad(DAPO(eps_low=0.6, eps_high=0.28))
    assert terms[1, 1].item() == pytest.approx(0.5)
    assert grad[1, 1].item() == pytest.approx(0.5)


# --------------------------------------------------------------------------- GRPO
def test_grpo_symmetric_clip_by_hand() -> None:
    # As DAPO but clip(rho, .8, 1.2): only [0,2] changes: min(10, 1.2*2) = 2.4.
    terms, grad = terms_and_grad(GRPO(eps=0.2))
    close(terms, [[-1.0, -2.0, -2.4], [1.1, 0.8, 2.0], [2.0, 1.0, 0.0]])
    close(grad, [[-1.0, -2.0, 0.0], [1.1, 0.0, 2.0], [2.0, 1.0, 0.0]])
    # With eps_low = eps_high = eps, DAPO is exactly GRPO.
    dapo_terms, _ = terms_and_grad(DAPO(eps_low=0.2, eps_high=0.2))
    torch.testing.assert_close(dapo_terms, terms)


# --------------------------------------------------------------------------- GSPO
def test_gspo_sequence_ratio_by_hand() -> None:
    # s_i = exp(mean of log rho over masked tokens):
    #   s0 = (0.5*1*5)^(1/3) = 2.5^(1/3) = 1.357209 ; s1 = (1.1*.5*2)^(1/3) = 1.1^(1/3) = 1.032280
    #   s2 = (2*1)^(1/2) = 1.414214 (2 masked tokens)
    # eps_low=.1, eps_high=.2 -> clip range [.9, 1.2]:
    #   row0 (A=2):  min(2.714, 1.2*2) = 2.4 (clipped, zero gradient)
    #   row1 (A=-1): min(-1.03228, -1.03228) = -1.03228 -> term 1.03228
    #   row2 (A=-1): min(-1.414214, -1.2) = -1.414214 -> term 1.414214
    # d(-s*A)/d logp_t = -A * s / n_i for each masked token; terms.sum() holds n_i copies of the
    # sequence's term, so the summed gradient per token is -A * s: row1 s1, row2 s2.
    s1, s2 = 1.1 ** (1 / 3), math.sqrt(2.0)
    terms, grad = terms_and_grad(GSPO(eps_low=0.1, eps_high=0.2))
    close(terms, [[-2.4, -2.4, -2.4], [s1, s1, s1], [s2, s2, 0.0]])
    close(grad, [[0.0, 0.0, 0.0], [s1, s1, s1], [s2, s2, 0.0]])
    # Through one token's term only (the per-sequence objective): -A * s / n_i = s1/3 = .344093.
    logp, old, adv, mask = batch()
    GSPO(eps_low=0.1, eps_high=0.2).token_terms(logp, old, adv, mask)[1, 0].backward()
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad[1], torch.full((3,), s1 / 3, dtype=torch.float64))


def test_gspo_default_clip_is_tight() -> None:
    # Published GSPO range [1-3e-4, 1+4e-4]: row0 clips at 1.0004 * 2 = 2.0008.
    terms, _ = terms_and_grad(make_loss(LossKnob(choice="gspo")))
    close(terms[0:1], [[-2.0008, -2.0008, -2.0008]])


# --------------------------------------------------------------------------- all losses
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_masked_tokens_are_zero_and_finite(name: str) -> None:
    terms, grad = terms_and_grad(LOSSES[name]())
    assert terms[2, 2].item() == 0.0 and grad[2, 2].item() == 0.0  # logp there is -inf
    assert torch.isfinite(terms).all() and torch.isfinite(grad).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_on_policy_gradient_is_reinforce(name: str) -> None:
    # At rho = 1 every loss's summed gradient is the policy gradient -A per token (for GSPO,
    # |y_i| copies of a term whose gradient is -A/|y_i| per token).
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], requires_grad=True)
    adv = torch.tensor([1.5, -0.5])
    LOSSES[name]().token_terms(logp, logp.detach(), adv, torch.ones(2, 2)).sum().backward()
    expected = torch.tensor([[-1.5, -1.5], [0.5, 0.5]])
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad, expected)


def test_registry_matches_schema_and_make_loss_reads_params() -> None:
    assert set(LOSSES) == set(LossKnob.alternative_names())
    for name in LOSSES:
        assert type(make_loss(LossKnob(choice=name))) is LOSSES[name]
    knob = LossKnob(choice="dapo", alternatives=LossAlternatives(dapo=DapoParams(eps_high=0.5)))
    assert make_loss(knob) == DAPO(eps_low=0.2, eps_high=0.5)
    assert make_loss(LossKnob()) == CISPO(eps_max=4.0)  # the ScaleRL baseline


def test_unknown_loss_and_bad_shapes_are_harness_errors() -> None:
    knob = LossKnob.model_construct(choice="ppo", alternatives=LossAlternatives())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"knobs\.loss\.choice='ppo'.*cispo"):
        make_loss(knob)
    with pytest.raises(HarnessError, match="adv has shape"):
        CISPO().token_terms(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))
