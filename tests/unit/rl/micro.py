"""A micro recipe for the trainer's unit tests: the real code path, sizes cut to seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scalerl.harness.recipe.schema import Recipe


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def micro_recipe(**over: Any) -> Recipe:
    base: dict[str, Any] = {
        "name": "micro",
        "model": {
            "dtype": "bfloat16",
            "tiny": {"n_layer": 1, "n_head": 2, "d_model": 32, "warmstart_steps": 30, "warmstart_lr": 3e-3},
        },
        "task": {"name": "arith", "params": {"n_min": 2, "n_max": 5}, "n_train": 64, "n_val": 8},
        "scale": {"prompts_per_batch": 2, "generations_per_prompt": 4, "max_gen_len": 16},
        "knobs": {
            "pipeline": {"alternatives": {"pipeline_rl": {"k": 2}, "ppo_off_policy": {"k": 2}}},
            "length_control": {
                "alternatives": {
                    "interruption": {
                        "phrase": "</think>",
                        "budget_min": 4,
                        "budget_max": 6,
                        "answer_tokens": 3,
                    },
                    "length_penalty": {"l_max": 12, "l_cache": 4},
                }
            },
        },
        "optimizer": {"lr": 1e-3, "warmup_steps": 1, "eps": 1e-8},
        "eval": {"every_steps": 2, "k": 1, "temperature": 1.0},
        "budget": {"value": 4, "unit": "steps"},
        "checkpoint_every_steps": 2,
    }
    return Recipe(**_merge(base, over))


@pytest.fixture(autouse=True)
def _policy_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One warm-start cache per test session (the warm start is deterministic, so sharing is safe)."""
    root = tmp_path_factory.getbasetemp() / "policy-cache"
    monkeypatch.setenv("SCALERL_CACHE_DIR", str(root))
    return root
