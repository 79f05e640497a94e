"""A toy checkpoint and a toy math dataset, built on the spot: the ``dataset`` task end to end
with no download (tests, the README's first try, GPU benches of a model *shape*).

- :func:`word_problems`: one-step word problems ("Ann has 3 pens. She gets 4 more. How many
  pens does Ann have now?") whose reference solutions think, close with ``</think>`` and answer
  in ``\\boxed{}``. ``slip`` makes that share of the solutions carry an arithmetic slip through
  to their boxed answer (the ``answer`` field stays right), so a model warm-started on them is
  reliably imperfect and RL has something to fix, as the ``arith`` task's ``trace_noise`` does.
- :func:`build_tokenizer`: a byte-level BPE trained with the ``tokenizers`` library on the given
  texts (digits split one per token), saved in Hugging Face format with a chat template and
  ``</think>`` as one token.
- :func:`build_checkpoint`: a random-initialised Llama- or Qwen2-style causal LM of any shape
  with that tokenizer, written with ``save_pretrained`` like any downloaded checkpoint.
- :func:`warm_start_checkpoint`: a short supervised phase on a task's reference solutions, through
  the same prompt rendering (chat template) the trainer uses, saved in place.

``python -m scalerl.harness.rl.toy OUT`` writes ``OUT/train.jsonl``, ``OUT/val.jsonl`` and a warm-started
``OUT/checkpoint``; ``recipes/examples/toy-math.yaml`` trains on them.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from scalerl.harness.rl.model import torch_seed
from scalerl.harness.rl.tasks import THINK_END, Task

log = logging.getLogger(__name__)

NAMES = ("Ann", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gus", "Hana")
ITEMS = ("apples", "pens", "books", "coins", "shells", "cards")
SPECIALS = ("<pad>", "<bos>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", THINK_END)
# Role markers, then the content, then <|end|> (the end-of-sequence token ends the assistant turn).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def word_problems(n: int, seed: int, slip: float = 0.0) -> list[dict[str, str]]:
    """``n`` problems ``{question, answer, solution}``; answers are 0..9 (one token each)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        a = rng.randrange(10)
        if rng.random() < 0.5 and a > 0:
            b = rng.randrange(1, a + 1)
            question = f"{name} has {a} {item}. {name} gives away {b}. How many {item} does {name} have now?"
            op, result = "-", a - b
        else:
            b = rng.randrange(10 - a)
            question = f"{name} has {a} {item}. {name} gets {b} more. How many {item} does {name} have now?"
            op, result = "+", a + b
        shown = result
        if rng.random() < slip:
            shown = (result + rng.choice((-1, 1))) % 10  # a slip the solution then answers with
        solution = f"{a} {op} {b} = {shown}{THINK_END}\\boxed{{{shown}}}"
        out.append({"question": question, "answer": str(result), "solution": solution})
    return out


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def build_tokenizer(texts: Sequence[str], vocab_size: int = 400) -> Any:
    """A byte-level BPE (``tokenizers``) trained on ``texts``, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<bos>", eos_token="<|end|>", pad_token="<pad>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_checkpoint(
    out: Path,
    *,
    texts: Sequence[str],
    arch: Literal["llama", "qwen2"] = "llama",
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    vocab_size: int | None = None,
    tie: bool = False,
    max_positions: int = 512,
    tokenizer_vocab: int = 400,
    seed: int = 0,
) -> Path:
    """A random-initialised checkpoint directory at ``out`` (weights, config, tokenizer).

    ``vocab_size`` None: the tokenizer's size; larger pads the embedding (as Qwen's checkpoints
    do), so a bench can take a real model's shape with this small tokenizer."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer(texts, tokenizer_vocab)
    ids = {name: tok.convert_tokens_to_ids(name) for name in ("<bos>", "<|end|>", "<pad>")}
    shape = dict(
        vocab_size=max(vocab_size or 0, len(tok)),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=tie,
        bos_token_id=ids["<bos>"],
        eos_token_id=ids["<|end|>"],
        pad_token_id=ids["<pad>"],
    )
    classes: tuple[Any, Any] = (
        (LlamaConfig, LlamaForCausalLM) if arch == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    )
    config_cls, model_cls = classes
    with torch_seed(seed):
        model = model_cls(config_cls(**shape))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    GenerationConfig(
        bos_token_id=ids["<bos>"], eos_token_id=ids["<|end|>"], pad_token_id=ids["<pad>"]
    ).save_pretrained(out)
    return out


def warm_start_checkpoint(
    path: Path, task: Task, *, steps: int, lr: float, seed: int, batch: int = 32
) -> None:
    """Fit the checkpoint at ``path`` to ``task``'s reference solutions for ``steps`` steps (AdamW,
    float32, CPU), prompts rendered as the trainer renders them, and save it in place."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from scalerl.harness.rl.model import HFTokenizer, Policy, fit_traces

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
    tok = HFTokenizer(AutoTokenizer.from_pretrained(path, local_files_only=True))
    policy = Policy(model, tok, torch.float32, head_fp32=True, autocast=False)
    train = task.split(1 << 30, 1 << 30, seed).train
    with torch_seed(seed):
        loss = fit_traces(policy, task, train, steps=steps, lr=lr, seed=seed, batch=batch)
    model.save_pretrained(path)
    log.info("warm-started %s for %d steps (final loss %.3f)", path, steps, loss)


def build_toy(
    out: Path, *, n_train: int = 600, n_val: int = 200, warmstart_steps: int = 300, seed: int = 0
) -> Path:
    """``out/train.jsonl``, ``out/val.jsonl`` and a warm-started ``out/checkpoint``; returns ``out``."""
    from scalerl.harness.rl.tasks import make_task

    train = word_problems(n_train, seed, slip=0.3)
    val = word_problems(n_val, seed + 1)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "val.jsonl", val)
    texts = [r["question"] + " " + r["solution"] for r in train]
    ckpt = build_checkpoint(out / "checkpoint", texts=texts, seed=seed)
    task = make_task(
        "dataset",
        {
            "path": str(out / "train.jsonl"),
            "val_path": str(out / "val.jsonl"),
            "prompt_field": "question",
            "solution_field": "solution",
            "verifier": "exact",
        },
    )
    if warmstart_steps:
        warm_start_checkpoint(ckpt, task, steps=warmstart_steps, lr=3e-3, seed=seed)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scalerl.harness.rl.toy", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="directory to write the data and the checkpoint into")
    from scalerl.harness.argtypes import non_negative_int, whole

    # Bounded like every numeric flag: a hostile count fails here, not by filling memory.
    p.add_argument("--train", type=whole(1, 10_000_000), default=600, help="training problems (default 600)")
    p.add_argument("--val", type=whole(1, 10_000_000), default=200, help="validation problems (default 200)")
    p.add_argument(
        "--warmstart-steps", type=whole(0, 10_000_000), default=300, help="supervised steps (default 300)"
    )
    p.add_argument("--seed", type=non_negative_int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build_toy(
        args.out, n_train=args.train, n_val=args.val, warmstart_steps=args.warmstart_steps, seed=args.seed
    )
    print(f"wrote {args.out}/train.jsonl, {args.out}/val.jsonl and {args.out}/checkpoint")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
