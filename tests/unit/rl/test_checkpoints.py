"""Real checkpoints in the reference trainer: tokenizer adapter, head chunking, micro-batches,
parameter count, and the recipe fields that came with them (issue 17)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer

import scalerl.harness.rl.model as model_mod
from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_recipe
from scalerl.harness.recipe.hashing import run_id
from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.rl.model import HFTokenizer, Policy, non_embedding_params
from scalerl.harness.rl.tasks import make_task
from scalerl.harness.rl.toy import build_checkpoint, word_problems
from scalerl.harness.rl.trainer import Trainer
from tests.unit.rl.micro import _policy_cache, micro_recipe

__all__ = ["_policy_cache"]

TEXTS = [r["question"] + " " + r["solution"] for r in word_problems(200, 0)]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("ckpt") / "c", texts=TEXTS, arch="qwen2", tie=True)


def test_recipes_that_do_not_use_the_new_fields_keep_their_run_ids() -> None:
    plain = Recipe(name="x")
    spelled = Recipe(
        name="x",
        model={"think_end": "</think>", "master_weights": "float32", "gradient_checkpointing": False},
        optimizer={"micro_batch": None},
        generation={"vllm": {"gpu_memory_utilization": 0.3}},
    )
    assert run_id(plain, 0) == run_id(spelled, 0)
    for section, key in (("model", "think_end"), ("optimizer", "micro_batch"), ("generation", "vllm")):
        assert key not in plain.resolved()[section]
    used = Recipe(name="x", model={"gradient_checkpointing": True}, optimizer={"micro_batch": 4})
    assert used.resolved()["model"]["gradient_checkpointing"] is True
    assert used.resolved()["optimizer"]["micro_batch"] == 4
    assert run_id(used, 0) != run_id(plain, 0)


def test_a_checkpoint_recipe_needs_a_phrase_that_closes_the_thinking() -> None:
    with pytest.raises(ValueError, match=r"does not end with model.think_end.*fix:"):
        Recipe(name="x", model={"path": "/ckpt", "think_end": "</reason>"})
    phrase = {"phrase": "Time is up. </reason>"}
    ok = Recipe(
        name="x",
        model={"path": "/ckpt", "think_end": "</reason>"},
        knobs={"length_control": {"alternatives": {"interruption": phrase}}},
    )
    assert ok.model.think_end == "</reason>"


def test_extending_a_recipe_with_another_task_starts_its_params_afresh(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("name: b\ntask: {name: arith, params: {n_min: 2, n_max: 4}}\n")
    (tmp_path / "same.yaml").write_text("extends: base.yaml\nname: s\ntask: {params: {n_max: 5}}\n")
    (tmp_path / "other.yaml").write_text(
        "extends: base.yaml\nname: o\ntask: {name: dataset, params: {path: d.jsonl, val_size: 5}}\n"
    )
    assert load_recipe(tmp_path / "same.yaml").task.params == {"n_min": 2, "n_max": 5}
    assert load_recipe(tmp_path / "other.yaml").task.params == {"path": "d.jsonl", "val_size": 5}


def test_hf_tokenizer_renders_chat_prompts_and_collects_stop_ids(ckpt: Path) -> None:
    tok = HFTokenizer(AutoTokenizer.from_pretrained(ckpt, local_files_only=True), generation_eos=[7, 9, 7])
    end = tok.encode("<|end|>")[0]
    assert end == 2 and tok.stop_ids == (2, 7, 9)  # EOS first, then the config's, deduplicated
    chat = tok.decode(tok.prompt_ids("How many?", system="Be brief."))
    assert chat == "<|system|>Be brief.<|end|><|user|>How many?<|end|><|assistant|>"
    raw = AutoTokenizer.from_pretrained(ckpt, local_files_only=True)
    raw.chat_template = None
    plain = HFTokenizer(raw)
    ids = plain.prompt_ids("How many?", system="Be brief.")
    assert ids[0] == raw.bos_token_id and plain.decode(ids[1:]) == "Be brief.\n\nHow many?"
    assert len(tok.encode("</think>")) == 1  # the model's own end-of-thinking token


def test_tied_head_is_counted_once_as_compute(ckpt: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt, local_files_only=True)
    assert model.config.tie_word_embeddings
    total = sum(p.numel() for p in model.parameters())  # the shared matrix once
    assert non_embedding_params(model) == total


def _policy(ckpt: Path) -> Policy:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(ckpt, local_files_only=True, dtype=torch.float32)
    tok = HFTokenizer(AutoTokenizer.from_pretrained(ckpt, local_files_only=True))
    return Policy(model, tok, torch.float32, head_fp32=True, autocast=False)


def test_chunked_head_gives_the_same_logprobs_and_gradients(ckpt: Path, monkeypatch: Any) -> None:
    policy = _policy(ckpt)
    hidden = torch.randn(5, 7, policy.model.config.hidden_size, requires_grad=True)
    targets = torch.randint(0, policy.model.config.vocab_size, (5, 7))
    full = policy.token_logprobs(hidden, targets, 0.7)
    (g_full,) = torch.autograd.grad(full.sum(), hidden)
    vocab = policy.model.config.vocab_size
    monkeypatch.setattr(model_mod, "LOGITS_BUDGET", 2 * 7 * vocab)  # two rows per chunk: 3 chunks
    chunked = policy.token_logprobs(hidden, targets, 0.7)
    (g_chunked,) = torch.autograd.grad(chunked.sum(), hidden)
    assert torch.equal(full, chunked)
    assert torch.allclose(g_full, g_chunked, atol=1e-6)


@pytest.mark.parametrize("aggregation", ["prompt_avg", "sample_avg", "token_avg"])
@pytest.mark.parametrize("loss", ["cispo", "gspo"])
def test_micro_batches_give_the_full_batch_gradient(aggregation: str, loss: str) -> None:
    grads = []
    for micro in (None, 3):
        recipe = micro_recipe(
            knobs={
                "aggregation": {"choice": aggregation},
                "loss": {"choice": loss},
                "zero_variance_filter": {"choice": "off"},  # every row trains
            },
            optimizer={"micro_batch": micro},
            scale={"prompts_per_batch": 4, "generations_per_prompt": 4},
        )
        trainer = Trainer(recipe, 3)
        for _ in range(20):  # the first batch whose rewards differ (else every advantage is 0)
            batch = trainer.next_batch()
            assert batch is not None
            if trainer._scores(batch, trainer.split.train).std() > 0:
                break
        # Zero the step size: train_step runs, parameters keep their values, gradients remain.
        for group in trainer.opt.param_groups:
            group["lr"] = 0.0
        trainer.train_step(batch)
        grads.append([p.grad.clone() for p in trainer.policy.model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    assert any(g.abs().sum() > 0 for g in grads[0])
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_model_path_errors_name_the_field_and_the_fix(tmp_path: Path) -> None:
    recipe = micro_recipe(model={"path": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match=r"model.path=.*not a local checkpoint directory.*fix:"):
        Trainer(recipe, 0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"cannot load the checkpoint.*fix:"):
        Trainer(micro_recipe(model={"path": str(tmp_path / "empty")}), 0)


def test_fp32_head_on_a_tied_qwen2_checkpoint(ckpt: Path) -> None:
    policy = _policy(ckpt)
    hidden = torch.randn(3, policy.model.config.hidden_size)
    weight = policy.model.get_output_embeddings().weight
    assert weight is policy.model.get_input_embeddings().weight  # tied, as Qwen2.5-0.5B
    exact = torch.log_softmax(hidden.double() @ weight.double().T, -1)
    fp32 = policy.logprobs(hidden, 1.0)
    policy.body_dtype, policy.head_fp32 = torch.bfloat16, False
    bf16 = policy.logprobs(hidden, 1.0)
    err32, err16 = (fp32.double() - exact).abs().max(), (bf16.double() - exact).abs().max()
    assert err32 < 1e-5 < err16


class _FakeVLLM:
    """A stand-in for the ``vllm`` module: every request answers ``answer`` after a short thought
    (``x + 0 = x</think>\\boxed{x}``) and ends with the checkpoint's end-of-turn id, within
    ``max_tokens``."""

    def __init__(self, tok: Any, answer: str) -> None:
        self.tok, self.kwargs, self.requests, self.params, self.pushed = tok, {}, [], [], 0
        self.text = f"{answer} + 0 = {answer}</think>\\boxed{{{answer}}}"
        fake = self

        class LLM:
            def __init__(self, **kwargs: Any) -> None:
                fake.kwargs = kwargs

            def generate(self, requests: list[Any], params: list[Any], use_tqdm: bool) -> list[Any]:
                outs = []
                for req, p in zip(requests, params, strict=True):
                    fake.requests.append(req["prompt_token_ids"])
                    fake.params.append(p)
                    done = len(req["prompt_token_ids"]) - fake.prompt_len(req["prompt_token_ids"])
                    want = [*fake.tok.encode(fake.text), p.stop_token_ids[0]]
                    toks = want[done : done + p.max_tokens]
                    lps = [{t: type("Lp", (), {"logprob": -0.5})()} for t in toks]
                    outs.append(
                        type("O", (), {"outputs": [type("S", (), {"token_ids": toks, "logprobs": lps})()]})
                    )
                return outs

            def apply_model(self, fn: Any) -> None:
                fake.pushed += 1

        class SamplingParams:
            def __init__(self, **kw: Any) -> None:
                self.__dict__.update(kw)

        self.LLM, self.SamplingParams = LLM, SamplingParams

    def prompt_len(self, ids: list[int]) -> int:
        assistant = self.tok.encode("<|assistant|>")[0]
        return len(ids) - ids[::-1].index(assistant)


def test_vllm_backend_runs_the_dataset_task(ckpt: Path, tmp_path: Path, monkeypatch: Any) -> None:
    import scalerl.harness.rl.generation.vllm as vllm_mod
    from scalerl.harness.rl.sink import ListSink
    from scalerl.harness.rl.toy import write_jsonl
    from scalerl.harness.rl.trainer import train

    rows = word_problems(60, 5)
    write_jsonl(tmp_path / "d.jsonl", rows)
    recipe = micro_recipe(
        model={"path": str(ckpt), "dtype": "float32"},
        generation={"backend": "vllm", "vllm": {"gpu_memory_utilization": 0.25}},
        scale={"max_gen_len": 24},
        knobs={"length_control": {"alternatives": {"interruption": {"budget_min": 10, "budget_max": 12}}}},
        budget={"value": 2, "unit": "steps"},
        eval={"every_steps": 1, "k": 1},
    )
    task = {
        "name": "dataset",
        "params": {"path": str(tmp_path / "d.jsonl"), "val_size": 20, "prompt_field": "question"},
        "n_train": 40,
        "n_val": 20,
    }
    recipe = Recipe(**{**recipe.model_dump(), "task": task})
    val = make_task("dataset", task["params"]).split(40, 20, recipe.task.seed).val
    answer = Counter(p.answer for p in val).most_common(1)[0][0]
    expected = sum(p.answer == answer for p in val) / len(val)  # the fake always answers it
    assert 0 < expected < 1
    fake = _FakeVLLM(HFTokenizer(AutoTokenizer.from_pretrained(ckpt, local_files_only=True)), answer)
    monkeypatch.setattr(vllm_mod, "_require_vllm", lambda: fake)
    sink = ListSink()
    train(recipe, 0, sink=sink, workdir=tmp_path / "w")
    assert [p.step for p in sink.points] == [0, 1, 2]
    assert all(p.metrics["val/pass_rate"] == expected for p in sink.points)
    assert fake.kwargs["model"] == str(ckpt) and fake.kwargs["gpu_memory_utilization"] == 0.25
    end = fake.tok.encode("<|end|>")[0]
    assert all(p.stop_token_ids[0] == end for p in fake.params)
    # Prompts reach the engine as chat-template token ids.
    assert fake.tok.decode(fake.requests[0]).startswith("<|user|>")
    assert fake.pushed >= 2  # a weight push after every optimizer step
