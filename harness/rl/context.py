"""Prompts must fit the policy's context: checked once, before a run trains.

A prompt of 18k characters against a checkpoint of 512 positions is not a long step: attention
over positions the model never learnt, memory that grows with the prompt (6 GB for one batch on
a tiny model), and completions that mean nothing. The rule, one for every task:

    len(prompt tokens, rendered as the trainer renders them) + scale.max_gen_len <= context

where ``context`` is the checkpoint's ``max_position_embeddings`` (``n_positions`` for GPT-2
style configs; no bound is known for a config with neither). Prompts are never truncated: a cut
question is another question, scored against the first one's reference answer. A split holding
a longer prompt is refused with a :class:`ConfigError` that counts the prompts that do not fit
and names the first ones by their row (``data.jsonl:12``), with the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scalerl.harness.errors import ConfigError

if TYPE_CHECKING:
    from scalerl.harness.rl.model import TokenizerLike
    from scalerl.harness.rl.tasks.base import Problem, Split

_SHOWN = 3


def context_length(model: Any) -> int | None:
    """The number of positions the model was built for, or None when its config does not say."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def check_prompt_lengths(
    split: Split, tokenizer: TokenizerLike, context: int | None, max_gen_len: int
) -> None:
    """Raise ConfigError unless every prompt of ``split`` leaves ``max_gen_len`` positions free."""
    if context is None:
        return
    budget = context - max_gen_len
    if budget <= 0:
        raise ConfigError(
            f"the checkpoint has {context} positions, and scale.max_gen_len={max_gen_len} leaves "
            "none for the prompt",
            field="scale.max_gen_len",
            value=max_gen_len,
            fix=f"set scale.max_gen_len below {context}, e.g. {context // 2}",
        )
    for which, problems in (("train", split.train), ("validation", split.val)):
        _check(which, problems, tokenizer, budget, context, max_gen_len)


def _check(
    which: str,
    problems: Sequence[Problem],
    tokenizer: TokenizerLike,
    budget: int,
    context: int,
    max_gen_len: int,
) -> None:
    long: list[tuple[int, Problem, int]] = []
    overhead: dict[str | None, int] = {}  # tokens the rendering adds (chat template, BOS) per system
    for i, p in enumerate(problems):
        # A shortcut that skips tokenizing short prompts: byte-level BPE, byte-fallback
        # SentencePiece and the character tokenizer all give at most one token per UTF-8 byte
        # (a margin covers a leading-space marker), on top of what the rendering adds.
        if p.system not in overhead:
            overhead[p.system] = len(tokenizer.prompt_ids("", p.system))
        if overhead[p.system] + len(p.prompt.encode("utf-8", "replace")) + 16 <= budget:
            continue
        n = len(tokenizer.prompt_ids(p.prompt, p.system))
        if n > budget:
            long.append((i, p, n))
    if not long:
        return
    shown = "; ".join(
        f"{p.where or f'{which} problem {i}'}: {n} tokens ({len(p.prompt)} characters)"
        for i, p, n in long[:_SHOWN]
    )
    more = f"; and {len(long) - _SHOWN} more" if len(long) > _SHOWN else ""
    raise ConfigError(
        f"{len(long)} of {len(problems)} {which} prompt(s) do not fit the checkpoint's context: "
        f"{context} positions, {max_gen_len} of them for the completion (scale.max_gen_len), so at "
        f"most {budget} prompt tokens: {shown}{more}",
        field="task.params.path",
        fix=f"filter the data to prompts of at most {budget} tokens (prompts are never truncated: "
        "a cut question is another question), lower scale.max_gen_len, or use a checkpoint with a "
        "longer context",
    )
