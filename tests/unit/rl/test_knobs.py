"""Every loss/aggregation/advantage/filter/length/resampling knob really reaches the step.

Each test swaps the registered implementation of the *chosen* alternative for a spy and checks
the spy ran (and the baseline's did not), so a trainer that ignored the knob fails.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from scalerl.harness.rl import advantages, aggregation, filters, losses
from scalerl.harness.rl.trainer import Trainer
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]


def _steps(tr: Trainer, n: int) -> None:
    for _ in range(n):
        batch = tr.next_batch()
        assert batch is not None
        tr.train_step(batch)


@pytest.mark.parametrize("choice", ["cispo", "dapo", "gspo", "grpo"])
def test_loss_knob_selects_the_registered_loss(choice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {}
    for name, cls in list(losses.LOSSES.items()):

        def token_terms(self: Any, *args: Any, _n: str = name, _c: Any = cls) -> Any:
            calls[_n] = calls.get(_n, 0) + 1
            return _c.token_terms(self, *args)

        monkeypatch.setitem(
            losses.LOSSES, name, type(f"Spy{cls.__name__}", (cls,), {"token_terms": token_terms})
        )
    tr = Trainer(micro_recipe(knobs={"loss": {"choice": choice}}), seed=0)
    tr.keep_fn = filters.keep_all  # every batch reaches the loss, whatever its rewards
    _steps(tr, 2)
    assert calls == {choice: 2}


@pytest.mark.parametrize("choice", ["prompt_avg", "sample_avg", "token_avg"])
def test_aggregation_knob(choice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    for name, agg in list(aggregation.AGGREGATORS.items()):

        class Spy(type(agg)):  # type: ignore[misc]
            def reduce(self, terms: Any, mask: Any, group: Any, _n: str = name, _a: Any = agg) -> Any:
                seen.append(_n)
                return _a.reduce(terms, mask, group)

        monkeypatch.setitem(aggregation.AGGREGATORS, name, Spy())
    tr = Trainer(micro_recipe(knobs={"aggregation": {"choice": choice}}), seed=0)
    tr.keep_fn = filters.keep_all
    _steps(tr, 2)
    assert seen == [choice, choice]


@pytest.mark.parametrize("choice", ["batch", "prompt", "none"])
def test_advantage_norm_knob(choice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    for name, norm in list(advantages.ADVANTAGE_NORMS.items()):

        class Spy(type(norm)):  # type: ignore[misc]
            def scale(self, centered: Any, group: Any, eps: float, _n: str = name, _m: Any = norm) -> Any:
                seen.append(_n)
                return _m.scale(centered, group, eps)

        monkeypatch.setitem(advantages.ADVANTAGE_NORMS, name, Spy())
    tr = Trainer(micro_recipe(knobs={"advantage_norm": {"choice": choice}}), seed=0)
    _steps(tr, 2)
    assert seen == [choice, choice]


def test_zero_variance_filter_knob_drops_constant_groups() -> None:
    on = Trainer(micro_recipe(), seed=0)
    off = Trainer(micro_recipe(knobs={"zero_variance_filter": {"choice": "off"}}), seed=0)
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    assert on.keep_fn(rewards, group).tolist() == [False, False, True, True]
    assert off.keep_fn(rewards, group).tolist() == [True, True, True, True]
    # In the loop: a batch whose every group is constant makes no optimizer update when on.
    for tr, expect_update in ((on, False), (off, True)):
        batch = tr.next_batch()
        assert batch is not None
        tr._scores = lambda batch, pool: torch.zeros(batch.tokens.shape[0])  # type: ignore[method-assign]
        before = [p.detach().clone() for p in tr.policy.model.parameters()]
        tr.train_step(batch)
        moved = any(not torch.equal(a, p) for a, p in zip(before, tr.policy.model.parameters(), strict=True))
        assert moved is expect_update


def test_length_penalty_knob_penalises_long_answers_and_never_interrupts() -> None:
    tr = Trainer(micro_recipe(knobs={"length_control": {"choice": "length_penalty"}}), seed=0)
    assert tr.spec.phrase_ids == ()
    batch = tr.next_batch()
    assert batch is not None
    assert not bool(batch.interrupted.any())
    tr._scores = lambda batch, pool: torch.ones(batch.tokens.shape[0])  # type: ignore[method-assign]
    batch.lengths[:] = torch.tensor([4, 8, 10, 12, 16, 4, 4, 4])[: len(batch.lengths)]
    stats = tr.train_step(batch)
    # l_max=12, l_cache=4: penalties 0, 0, -0.5, -1, -1, 0, 0, 0 on a reward of 1.
    assert stats["train/reward"] == pytest.approx((8 - 0.5 - 1 - 1) / 8)


def test_retired_prompts_are_never_sampled_again() -> None:
    recipe = micro_recipe(
        knobs={"no_positive_resampling": {"alternatives": {"on": {"threshold": 0.25}}}}, task={"n_train": 12}
    )
    tr = Trainer(recipe, seed=0)
    drawn_after: list[tuple[frozenset[int], list[int]]] = []
    real_draw = tr.sampler.draw

    def spy(count: int, tracker: Any) -> list[int] | None:
        retired = tracker.retired()
        out = real_draw(count, tracker)
        drawn_after.append((retired, out or []))
        return out

    tr.sampler.draw = spy  # type: ignore[method-assign]
    _steps(tr, 12)
    assert len(tr.tracker.retired()) >= 2  # some prompts really were retired
    for retired, out in drawn_after:
        assert not retired.intersection(out)
    off_recipe = micro_recipe(knobs={"no_positive_resampling": {"choice": "off"}}, task={"n_train": 12})
    off = Trainer(off_recipe, seed=0)
    _steps(off, 6)
    assert off.tracker.retired() == frozenset()
