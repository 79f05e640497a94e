"""Zero-variance filter and the no-positive-resampling tracker."""

from __future__ import annotations

import json
import re

import pytest
import torch

from scalerl.harness.errors import ConfigError, HarnessError
from scalerl.harness.recipe.schema import (
    NoPositiveResamplingKnob,
    ResamplingAlternatives,
    ResamplingParams,
    ZeroVarianceFilterKnob,
)
from scalerl.harness.rl.filters import (
    ZERO_VARIANCE_FILTERS,
    ResamplingTracker,
    make_zero_variance_filter,
    zero_variance_keep,
)

# prompt 0 all pass, prompt 1 mixed, prompt 2 all fail, prompt 3 differs by 1e-6 (kept),
# prompts interleaved so the filter cannot rely on contiguous groups.
REWARDS = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.5, 0.500001])
GROUP = torch.tensor([0, 1, 0, 2, 3, 1, 2, 0, 3, 3])
KEEP = [False, True, False, False, True, True, False, False, True, True]


def test_zero_variance_filter_drops_only_all_equal_groups() -> None:
    assert zero_variance_keep(REWARDS, GROUP).tolist() == KEEP


def test_knob_on_filters_and_off_keeps_everything() -> None:
    on = make_zero_variance_filter(ZeroVarianceFilterKnob(choice="on"))
    off = make_zero_variance_filter(ZeroVarianceFilterKnob(choice="off"))
    assert on(REWARDS, GROUP).tolist() == KEEP
    assert off(REWARDS, GROUP).tolist() == [True] * 10
    assert set(ZERO_VARIANCE_FILTERS) == set(ZeroVarianceFilterKnob.alternative_names())


def test_zero_variance_filter_edge_cases() -> None:
    assert zero_variance_keep(torch.tensor([0.3]), torch.tensor([0])).tolist() == [False]  # G=1
    assert zero_variance_keep(torch.zeros(0), torch.zeros(0, dtype=torch.long)).tolist() == []
    with pytest.raises(HarnessError, match="must both be"):
        zero_variance_keep(torch.zeros(2), torch.zeros(3, dtype=torch.long))


# --------------------------------------------------------------------------- no-positive-resampling
# Pass rate of each prompt in each epoch (None: not asked, since the prompt is retired).
SCHEDULE: dict[int, list[float]] = {
    0: [0.95, 0.0, 0.0, 0.0],  # retired after epoch 0
    1: [0.5, 0.9, 0.0, 0.0],  # exactly the threshold in epoch 1 -> retired
    2: [0.875, 0.875, 0.875, 0.875],  # never reaches 0.9
    3: [0.0, 0.25, 1.0, 0.0],  # retired after epoch 2
    4: [0.0, 0.0, 0.0, 0.0],
    5: [0.8999, 0.8999, 0.8999, 0.8999],  # just below
}


def run_epochs(tracker: ResamplingTracker, epochs: range) -> list[list[int]]:
    sampled = []
    for epoch in epochs:
        ids = tracker.filter(range(6))
        tracker.update(ids, [SCHEDULE[p][epoch] for p in ids])
        sampled.append(ids)
    return sampled


def test_retired_prompts_never_come_back() -> None:
    tracker = ResamplingTracker(0.9)
    assert run_epochs(tracker, range(4)) == [
        [0, 1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
        [2, 3, 4, 5],
        [2, 4, 5],
    ]
    assert tracker.retired() == frozenset({0, 1, 3})
    assert tracker.is_retired(3) and not tracker.is_retired(5)
    # A later low pass rate (e.g. a stale generation arriving late) does not revive a prompt.
    tracker.update([0], [0.0])
    assert tracker.is_retired(0) and tracker.filter([0, 0, 4]) == [4]
    assert tracker.last_pass_rate(0) == 0.0 and tracker.last_pass_rate(99) is None


def test_disabled_tracker_never_retires() -> None:
    tracker = ResamplingTracker.from_knob(NoPositiveResamplingKnob(choice="off"))
    assert not tracker.enabled
    assert run_epochs(tracker, range(4)) == [[0, 1, 2, 3, 4, 5]] * 4
    assert tracker.retired() == frozenset()
    assert tracker.last_pass_rate(3) == 0.0  # still recorded


def test_knob_threshold_is_used() -> None:
    params = ResamplingAlternatives(on=ResamplingParams(threshold=0.8))
    tracker = ResamplingTracker.from_knob(NoPositiveResamplingKnob(choice="on", alternatives=params))
    tracker.update([2, 4], [0.875, 0.75])
    assert tracker.retired() == frozenset({2})


def test_state_round_trips_through_json_and_resumes() -> None:
    tracker = ResamplingTracker(0.9)
    run_epochs(tracker, range(2))
    state = json.loads(json.dumps(tracker.state_dict()))
    assert state == {
        "threshold": 0.9,
        "retired": [0, 1],
        "last_pass_rate": {"0": 0.95, "1": 0.9, "2": 0.875, "3": 0.25, "4": 0.0, "5": 0.8999},
    }
    resumed = ResamplingTracker(0.9)
    resumed.load_state_dict(state)
    assert run_epochs(resumed, range(2, 4)) == [[2, 3, 4, 5], [2, 4, 5]]


def test_resume_with_another_threshold_or_bad_state_fails_clearly() -> None:
    state = ResamplingTracker(0.9).state_dict()
    with pytest.raises(ConfigError, match=r"knobs\.no_positive_resampling=0\.9.*different"):
        ResamplingTracker(None).load_state_dict(state)
    with pytest.raises(HarnessError, match="malformed state"):
        ResamplingTracker(0.9).load_state_dict({"threshold": 0.9, "retired": [1]})


def test_bad_updates_are_rejected() -> None:
    tracker = ResamplingTracker()
    with pytest.raises(HarnessError, match="2 prompt ids but 1 pass rates"):
        tracker.update([1, 2], [0.5])
    with pytest.raises(HarnessError, match=re.escape("prompt 7 has pass rate 1.5")):
        tracker.update([7], [1.5])
    with pytest.raises(ConfigError, match=re.escape("threshold=0.0")):
        ResamplingTracker(0.0)
