"""The typed, frozen recipe: every ScaleRL component as a named knob with its alternatives.

A recipe YAML is validated into :class:`Recipe` once, at the boundary (see
:mod:`scalerl.harness.recipe.loader`); everything downstream (planner, trainer, executors) reads these
frozen objects and never raw dicts. Unknown keys are errors (``extra="forbid"``).

A knob is ``{choice: <alternative>, alternatives: {<alternative>: {params...}}}``: the choice is a
``Literal`` of the alternatives, and every alternative carries its own parameters, so a LOO
variant is "the baseline with ``knobs.<knob>.choice`` set to another alternative" and nothing else.
Only the chosen alternative's parameters enter the resolved config and its hash
(:meth:`Recipe.resolved`), so tuning DAPO's clip does not change the CISPO baseline's run id.
"""

from __future__ import annotations

import math
import re
import string
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    model_serializer,
    model_validator,
)


def _is_number_type(annotation: Any) -> bool:
    """True for ``int`` / ``float`` fields (constrained, or ``| None``), never for ``bool`` ones."""
    args = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or (typing.get_origin(annotation) is typing.Union)
        else (annotation,)
    )
    args = tuple(typing.get_args(a)[0] if typing.get_origin(a) is Annotated else a for a in args)
    numbers = [a for a in args if a is not type(None)]
    return bool(numbers) and all(a in (int, float) for a in numbers)


class Frozen(BaseModel):
    # protected_namespaces=(): fields named model_* (the LM head's `model_dtype`) are ours; pydantic
    # < 2.10 warns about them at import otherwise. allow_inf_nan=False: YAML's .inf / 1e309 in a
    # float field would otherwise pass and be dumped (and hashed) as null.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, protected_namespaces=(), allow_inf_nan=False
    )

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_number(cls, data: Any) -> Any:
        # pydantic's lax mode reads true as 1 in an int or float field: `budget.value: true` would
        # silently train one step. A boolean is never a number in a config: it is handed on as
        # its YAML spelling, which the field then refuses with its own path, type and fix.
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {
            k: str(v).lower()
            if isinstance(v, bool) and k in fields and _is_number_type(fields[k].annotation)
            else v
            for k, v in data.items()
        }


class Additive(Frozen):
    """A section that gained fields after run ids were first stored: each field named in
    ``_later`` is left out of the dump while it holds its default, so a recipe that does not use
    it keeps its resolved config, and so its run id."""

    _later: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_later_defaults(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for key in self._later:
                if getattr(self, key) == fields[key].get_default(call_default_factory=True):
                    data.pop(key, None)
        return data


# --------------------------------------------------------------------------- knob parameters
class PipelineRLParams(Frozen):
    """PipelineRL-k: generators keep sampling while the trainer pushes weights in flight."""

    k: PositiveInt = Field(8, description="max steps the trainer may run ahead of generation")


class PPOOffPolicyParams(Frozen):
    """PPO-off-policy-k: one frozen-policy batch, then k gradient steps on it."""

    k: PositiveInt = Field(8, description="gradient steps per generated batch")


class CispoParams(Frozen):
    eps_max: PositiveFloat = Field(4.0, description="truncation of the IS ratio, sg(min(rho, eps_max))")


class DapoParams(Frozen):
    eps_low: PositiveFloat = 0.2
    eps_high: PositiveFloat = 0.28


class GspoParams(Frozen):
    # GSPO clips the length-normalised sequence ratio; its published ranges are ~1e-4.
    eps_low: PositiveFloat = 3e-4
    eps_high: PositiveFloat = 4e-4


class GrpoParams(Frozen):
    eps: PositiveFloat = 0.2


class Empty(Frozen):
    """An alternative with no parameters."""


class InterruptionParams(Frozen):
    """Forced interruption: at a random point in [budget_min, budget_max] thinking tokens, append
    ``phrase`` and let the model answer; the inserted tokens are not trained on."""

    phrase: str = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"
    budget_min: PositiveInt = 10_000
    budget_max: PositiveInt = 12_000
    answer_tokens: PositiveInt = Field(2_048, description="generation allowed after the phrase")

    @model_validator(mode="after")
    def _window(self) -> InterruptionParams:
        if self.budget_min > self.budget_max:
            raise ValueError(
                f"budget_min={self.budget_min} > budget_max={self.budget_max}; "
                "fix: make budget_min <= budget_max"
            )
        return self


class LengthPenaltyParams(Frozen):
    """DAPO's overlong penalty: 0 up to l_max - l_cache, then linear down to -1 at l_max."""

    l_max: PositiveInt = 14_336
    l_cache: PositiveInt = 2_048

    @model_validator(mode="after")
    def _cache(self) -> LengthPenaltyParams:
        if self.l_cache >= self.l_max:
            raise ValueError(f"l_cache={self.l_cache} >= l_max={self.l_max}; fix: make l_cache < l_max")
        return self


class ResamplingParams(Frozen):
    threshold: float = Field(0.9, gt=0.0, le=1.0, description="historical pass rate that retires a prompt")


# --------------------------------------------------------------------------- knobs
class Knob(Frozen):
    """Base of every knob: ``choice`` names one field of ``alternatives``."""

    choice: str
    alternatives: Frozen

    @classmethod
    def alternative_names(cls) -> tuple[str, ...]:
        alts = cls.model_fields["alternatives"].annotation
        assert isinstance(alts, type) and issubclass(alts, BaseModel)
        return tuple(alts.model_fields)

    def active_params(self) -> dict[str, Any]:
        params: BaseModel = getattr(self.alternatives, self.choice)
        return params.model_dump(mode="json")


class PipelineAlternatives(Frozen):
    pipeline_rl: PipelineRLParams = PipelineRLParams()
    ppo_off_policy: PPOOffPolicyParams = PPOOffPolicyParams()


class PipelineKnob(Knob):
    choice: Literal["pipeline_rl", "ppo_off_policy"] = "pipeline_rl"
    alternatives: PipelineAlternatives = PipelineAlternatives()


class LossAlternatives(Frozen):
    cispo: CispoParams = CispoParams()
    dapo: DapoParams = DapoParams()
    gspo: GspoParams = GspoParams()
    grpo: GrpoParams = GrpoParams()


class LossKnob(Knob):
    choice: Literal["cispo", "dapo", "gspo", "grpo"] = "cispo"
    alternatives: LossAlternatives = LossAlternatives()


class LMHeadAlternatives(Frozen):
    fp32: Empty = Empty()
    model_dtype: Empty = Empty()


class LMHeadKnob(Knob):
    choice: Literal["fp32", "model_dtype"] = "fp32"
    alternatives: LMHeadAlternatives = LMHeadAlternatives()


class AggregationAlternatives(Frozen):
    prompt_avg: Empty = Empty()
    sample_avg: Empty = Empty()
    token_avg: Empty = Empty()


class AggregationKnob(Knob):
    choice: Literal["prompt_avg", "sample_avg", "token_avg"] = "prompt_avg"
    alternatives: AggregationAlternatives = AggregationAlternatives()


class AdvantageNormAlternatives(Frozen):
    batch: Empty = Empty()
    prompt: Empty = Empty()
    none: Empty = Empty()


class AdvantageNormKnob(Knob):
    choice: Literal["batch", "prompt", "none"] = "batch"
    alternatives: AdvantageNormAlternatives = AdvantageNormAlternatives()


class OnOffAlternatives(Frozen):
    on: Empty = Empty()
    off: Empty = Empty()


class ZeroVarianceFilterKnob(Knob):
    choice: Literal["on", "off"] = "on"
    alternatives: OnOffAlternatives = OnOffAlternatives()


class LengthControlAlternatives(Frozen):
    interruption: InterruptionParams = InterruptionParams()
    length_penalty: LengthPenaltyParams = LengthPenaltyParams()


class LengthControlKnob(Knob):
    choice: Literal["interruption", "length_penalty"] = "interruption"
    alternatives: LengthControlAlternatives = LengthControlAlternatives()


class ResamplingAlternatives(Frozen):
    on: ResamplingParams = ResamplingParams()
    off: Empty = Empty()


class NoPositiveResamplingKnob(Knob):
    choice: Literal["on", "off"] = "on"
    alternatives: ResamplingAlternatives = ResamplingAlternatives()


class Knobs(Frozen):
    pipeline: PipelineKnob = PipelineKnob()
    loss: LossKnob = LossKnob()
    lm_head: LMHeadKnob = LMHeadKnob()
    aggregation: AggregationKnob = AggregationKnob()
    advantage_norm: AdvantageNormKnob = AdvantageNormKnob()
    zero_variance_filter: ZeroVarianceFilterKnob = ZeroVarianceFilterKnob()
    length_control: LengthControlKnob = LengthControlKnob()
    no_positive_resampling: NoPositiveResamplingKnob = NoPositiveResamplingKnob()


@dataclass(frozen=True)
class KnobSpec:
    """What the planner needs to know about a knob beyond its schema."""

    name: str
    baseline: str  # ScaleRL's choice
    loo: str  # the alternative a LOO variant reverts to
    loo_name: str  # the paper's variant name
    summary: str


# The paper's leave-one-out table (DESIGN.md §3). Order = the order variants are listed in.
KNOB_SPECS: dict[str, KnobSpec] = {
    s.name: s
    for s in (
        KnobSpec("pipeline", "pipeline_rl", "ppo_off_policy", "loo-8op", "off-policy pipeline"),
        KnobSpec("loss", "cispo", "dapo", "loo-dapo", "policy-gradient loss"),
        KnobSpec("lm_head", "fp32", "model_dtype", "loo-fp32", "LM-head precision"),
        KnobSpec("aggregation", "prompt_avg", "sample_avg", "loo-savg", "loss aggregation"),
        KnobSpec("advantage_norm", "batch", "prompt", "loo-plan", "advantage normalization"),
        KnobSpec("zero_variance_filter", "on", "off", "loo-batch", "zero-variance filtering"),
        KnobSpec("length_control", "interruption", "length_penalty", "loo-lp", "length control"),
        KnobSpec("no_positive_resampling", "on", "off", "loo-npr", "no-positive-resampling"),
    )
}


# --------------------------------------------------------------------------- the rest of a recipe
class TinyModelConfig(Additive):
    """A small causal LM built locally from a config (no downloads) and warm-started by a short,
    deterministic supervised phase on the task's own traces; cached by content hash.

    ``warmstart_schedule: cosine`` decays the learning rate to 0 over the warm start, and a larger
    ``warmstart_batch`` averages out the draw: together they let the supervised phase *converge*,
    so the starting policy's quality is set by the task's traces, not by where a constant-rate
    optimiser happened to stop (with ``constant`` at batch 32 the last bit of a matmul moved the
    tiny preset's step-0 pass rate from 0.32 to 0.54; bench/README.md, "Warm start")."""

    _later = ("warmstart_batch", "warmstart_schedule")

    n_layer: PositiveInt = 2
    n_head: PositiveInt = 4
    d_model: PositiveInt = 128
    warmstart_steps: int = Field(200, ge=0)
    warmstart_lr: PositiveFloat = 3e-3
    warmstart_seed: int = 0
    warmstart_batch: PositiveInt = Field(32, description="traces per supervised step")
    warmstart_schedule: Literal["constant", "cosine"] = Field(
        "constant", description="learning rate over the warm start: constant, or cosine decay to 0"
    )


class ModelConfig(Additive):
    _later = ("think_end", "master_weights", "gradient_checkpointing", "attn_implementation")

    path: str | None = Field(None, description="local Hugging Face checkpoint dir; null = tiny")
    tiny: TinyModelConfig = TinyModelConfig()
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    think_end: str = Field(
        "</think>",
        min_length=1,
        description="the model's end-of-thinking marker (one token when its tokenizer has it)",
    )
    master_weights: Literal["float32", "model_dtype"] = Field(
        "float32",
        description="a checkpoint's trained weights: float32 masters with the body under autocast(dtype) "
        "on GPU, or the weights themselves in dtype (half the memory; small updates round away)",
    )
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward (checkpoints)")
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] | None = Field(
        None, description="transformers attention kernel; null = the library's default"
    )


class TaskConfig(Frozen):
    name: str = Field("arith", description="a registered task (scalerl.harness.rl.tasks)")
    params: dict[str, Any] = Field(default_factory=dict, description="task-specific, checked by the task")
    n_train: PositiveInt = 4096
    n_val: PositiveInt = 256
    seed: int = Field(1234, description="fixes the generated train/val split (not the run seed)")


# Upper bounds far above any recipe (ScaleRL's 48 x 16 per step; large labs' ~512 x 16; 128k-token
# generations), so that a typo such as 1e18 is refused here instead of eating the machine's memory
# when the trainer allocates a batch.
MAX_SEQUENCES_PER_STEP = 2**20
MAX_GEN_LEN = 2**20


class ScaleConfig(Frozen):
    prompts_per_batch: PositiveInt = 48
    generations_per_prompt: PositiveInt = 16
    max_gen_len: PositiveInt = Field(14_336, le=MAX_GEN_LEN)

    @model_validator(mode="after")
    def _batch_fits(self) -> ScaleConfig:
        n = self.prompts_per_batch * self.generations_per_prompt
        if n > MAX_SEQUENCES_PER_STEP:
            raise ValueError(
                f"prompts_per_batch x generations_per_prompt = {n} sequences per step, more than "
                f"{MAX_SEQUENCES_PER_STEP}; fix: use a batch a machine can hold (the paper's is 48 x 16)"
            )
        return self


class OptimizerConfig(Additive):
    _later = ("micro_batch",)

    name: Literal["adamw"] = "adamw"
    lr: PositiveFloat = 5e-7
    betas: tuple[float, float] = (0.9, 0.999)
    eps: PositiveFloat = 1e-15
    weight_decay: float = Field(0.01, ge=0.0)
    warmup_steps: int = Field(100, ge=0)
    grad_clip: PositiveFloat = 1.0
    micro_batch: PositiveInt | None = Field(
        None,
        description="sequences per forward/backward, gradients accumulated (same loss); null = all at once",
    )


class VLLMOptions(Frozen):
    """The vLLM engine beside the trainer on the same GPU (``generation.backend: vllm``)."""

    gpu_memory_utilization: float = Field(
        0.3, gt=0.0, lt=1.0, description="share of GPU memory vLLM may take; the trainer needs the rest"
    )
    enforce_eager: bool = Field(False, description="skip CUDA graphs (slower decode, faster start)")
    max_model_len: PositiveInt | None = Field(None, description="null = prompt + scale.max_gen_len")


class GenerationConfig(Additive):
    _later = ("vllm",)

    backend: Literal["hf", "vllm"] = "hf"
    temperature: PositiveFloat = 1.0
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    vllm: VLLMOptions = VLLMOptions()


class EvalConfig(Frozen):
    every_steps: PositiveInt = 10
    n_val: PositiveInt | None = Field(None, description="validation prompts used; null = all of task.n_val")
    k: PositiveInt = Field(1, description="samples per validation prompt (mean@k)")
    temperature: PositiveFloat = 0.6


ComputeUnit = Literal["gpu_hours", "flops", "tokens", "samples", "steps"]


class BudgetConfig(Frozen):
    value: PositiveFloat
    unit: ComputeUnit = "steps"


class TensorBoardCompute(Frozen):
    """One compute unit of a tailed TensorBoard run: the event ``step`` or its ``wall_time``
    (seconds since the run's first scalar) times ``scale``. A bare string is ``{column: ...}``."""

    column: Literal["step", "wall_time"]
    scale: PositiveFloat = 1.0

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"column": data} if isinstance(data, str) else data


class CommandRunnerConfig(Additive):
    """A lab's own trainer: ``argv`` is templated with the variant's overrides."""

    # The TensorBoard tail and the launcher came later: left out of the dump while unset (see Additive).
    _later = ("tensorboard_dir", "tensorboard_tags", "tensorboard_compute", "launcher", "nproc_per_node")

    type: Literal["command"]
    argv: tuple[str, ...] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    metrics_file: str | None = Field(None, description="JSONL the script appends to; tailed and ingested")
    # TensorBoard tail (scalerl.harness.execution.runners.tail); left out of the dump while unset, so
    # command recipes written before it keep their run ids.
    tensorboard_dir: str | None = Field(
        None, min_length=1, description="the run's TensorBoard directory (templated; from the workdir)"
    )
    tensorboard_tags: dict[str, str] = Field(
        default_factory=dict, description="TensorBoard tag -> metric name; empty = every scalar tag as is"
    )
    tensorboard_compute: dict[
        Literal["gpu_hours", "flops", "tokens", "samples", "wall_s"], TensorBoardCompute
    ] = Field(default_factory=dict, description="compute unit -> step or wall_time x scale")
    # Multi-process launch (scalerl.harness.execution.runners.command.launch_argv): torchrun starts
    # nproc_per_node copies of argv, each with RANK / WORLD_SIZE; opt-in, because trainers such as
    # verl and OpenRLHF start their own workers (through Ray) from a single driver process.
    launcher: Literal["torchrun"] | None = Field(
        None, description="torchrun: launch argv as `torchrun --standalone --nproc-per-node N`"
    )
    nproc_per_node: PositiveInt | None = Field(
        None, description="processes torchrun starts; default: the run's GPUs (resources.gpus), at least 1"
    )

    @model_validator(mode="after")
    def _no_secrets(self) -> CommandRunnerConfig:
        # argv and env are part of the run's config: stored, hashed and printed by `scalerl config`.
        # A password or token written here would reach the store; the command inherits the
        # environment of the sweep (and of the Slurm job), which is where a secret belongs.
        from scalerl.db.redaction import is_secret_key, scrub

        found = [f"env.{k}" for k, v in self.env.items() if (v and is_secret_key(k)) or scrub(v) != v]
        found += [f"argv[{i}]" for i, a in enumerate(self.argv) if scrub(a) != a]
        if found:
            raise ValueError(
                f"runner.{found[0]} holds a password, token or other secret, which would be stored "
                "with the run's config and printed by `scalerl config`; fix: export it in the "
                "environment the sweep is launched from (the command inherits it) and drop it here"
            )
        return self

    @model_validator(mode="after")
    def _tensorboard(self) -> CommandRunnerConfig:
        if self.tensorboard_dir is None and (self.tensorboard_tags or self.tensorboard_compute):
            raise ValueError(
                "tensorboard_tags / tensorboard_compute without tensorboard_dir; "
                "fix: set tensorboard_dir to the directory the trainer's SummaryWriter writes"
            )
        return self

    @model_validator(mode="after")
    def _launcher(self) -> CommandRunnerConfig:
        if self.nproc_per_node is not None and self.launcher is None:
            raise ValueError(
                f"nproc_per_node={self.nproc_per_node} without a launcher; "
                "fix: add launcher: torchrun, or drop nproc_per_node"
            )
        return self

    def placeholders(self) -> Iterator[str]:
        """Every ``{name}`` in the templated fields: ``argv``, ``env`` values, ``metrics_file`` and
        ``tensorboard_dir`` (``{{`` is a literal brace). A malformed template yields nothing here;
        rendering reports it."""
        paths = (self.metrics_file, self.tensorboard_dir)
        texts = [*self.argv, *self.env.values(), *(p for p in paths if p)]
        for text in texts:
            try:
                parsed = list(string.Formatter().parse(text))
            except ValueError:
                continue
            yield from (name for _, name, _, _ in parsed if name)


class ReferenceRunnerConfig(Frozen):
    type: Literal["reference"] = "reference"


DbComputeUnit = Literal["gpu_hours", "flops", "tokens", "samples", "wall_s"]


class ReplayComputeColumn(Frozen):
    """Where one of our compute units comes from in a replayed curve: ``column`` (a source column,
    a stored compute unit, or ``step``) times ``scale``. A bare string is ``{column: <string>}``."""

    column: str = Field(min_length=1)
    scale: PositiveFloat = 1.0

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"column": data} if isinstance(data, str) else data


class ReplayRunnerConfig(Frozen):
    """Replay a curve point by point as if training (:mod:`scalerl.harness.execution.runners.replay`).

    The source is exactly one of ``file`` (any format :mod:`scalerl.harness.importers` reads; ``run``
    picks one run of a file that holds several, ``format`` overrides detection) or ``run_id`` (a
    run in the store at ``db_url``, default the job's own store)."""

    type: Literal["replay"]
    file: str | None = Field(None, description="curve file; a relative path is from the job's cwd")
    run: str | None = Field(None, description="which run of the file (W&B exports hold several)")
    format: str | None = Field(None, description="importer name when detection cannot tell")
    run_id: str | None = Field(None, min_length=1, description="a run in the store")
    db_url: str | None = Field(None, min_length=1, description="store holding run_id; null = the job's")
    metrics: tuple[str, ...] | None = Field(None, min_length=1, description="names or globs; null = all")
    compute: dict[DbComputeUnit, ReplayComputeColumn] | None = Field(
        None, description="our compute unit -> source column x scale; null = the source's own"
    )
    speed: float | None = Field(None, ge=0.0, description="points per second; 0 or null = no waiting")

    @model_validator(mode="after")
    def _source(self) -> ReplayRunnerConfig:
        if (self.file is None) == (self.run_id is None):
            given = f"both file={self.file!r} and run_id={self.run_id!r}" if self.file else "neither"
            raise ValueError(
                f"replay source: {given} given; "
                "fix: give exactly one of file (a curve file) or run_id (a stored run)"
            )
        if self.file is not None and self.db_url is not None:
            raise ValueError("db_url only applies to a run_id source; fix: drop db_url or replay a run_id")
        if self.run_id is not None:
            for name in ("run", "format"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name}={getattr(self, name)!r} only applies to a file source; "
                        f"fix: drop {name} or replay a file"
                    )
        if self.format is not None:
            from scalerl.harness.errors import ImportFormatError
            from scalerl.harness.importers import get_importer

            try:
                get_importer(self.format)
            except ImportFormatError as err:
                raise ValueError(f"format={self.format!r}: {err}") from None
        if self.db_url is not None:
            from scalerl.db.redaction import secret_in

            where = secret_in(self.db_url)  # user:PW@, ?password=, ?sslpassword=, options...
            if where is not None:
                raise ValueError(
                    f"db_url holds a password or other secret ({where}), which would be stored "
                    "with the run's config; "
                    "fix: leave the password out (use ~/.pgpass, PGPASSFILE or PGPASSWORD) or drop db_url"
                )
        return self


class TrlRunnerConfig(Frozen):
    """TRL's ``GRPOTrainer`` on the recipe (:mod:`scalerl.harness.execution.runners.trl`): each knob is
    mapped onto ``GRPOConfig``; one TRL cannot express is an error unless ``unsupported: ignore``,
    which trains without it and records the ignored knobs with the run."""

    type: Literal["trl"]
    unsupported: Literal["error", "ignore"] = Field(
        "error", description="a knob TRL cannot express: refuse the recipe, or ignore it and record that"
    )


RunnerConfig = ReferenceRunnerConfig | CommandRunnerConfig | ReplayRunnerConfig | TrlRunnerConfig


# Recipe fields that do not enter the run identity (see Recipe.resolved).
IDENTITY_EXCLUDED: frozenset[str] = frozenset({"name", "checkpoint_every_steps"})

# Sections only the reference trainer reads. Under another runner they enter the run identity
# only when the command's templates reference them (see Recipe.resolved).
REFERENCE_ONLY: tuple[str, ...] = ("model", "task", "knobs", "scale", "optimizer", "generation", "eval")

# Run fields of a command template that stand for recipe sections: {knob} and {alternative} name a
# knob's alternative, {variant} may stand for any override, so it keeps every section.
_FIELD_SECTIONS: dict[str, tuple[str, ...]] = {
    "knob": ("knobs",),
    "alternative": ("knobs",),
    "variant": REFERENCE_ONLY,
}

# --------------------------------------------------------------------------- free-form params
PARAM_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ParamScalar = str | bool | int | float | None


def _param_key(key: str) -> str:
    if not PARAM_KEY.match(key):
        raise ValueError(
            f"params key {key!r} is not an identifier; "
            "fix: use letters, digits and _ (not first a digit), e.g. kl_coef"
        )
    from scalerl.db.redaction import is_secret_key

    if is_secret_key(key):
        raise ValueError(
            f"params key {key!r} names a secret, which would be stored with the run's config and "
            "printed by `scalerl config`; fix: have the script read it from its environment (a "
            "command inherits the sweep's) and drop it from params"
        )
    return key


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return value is None or isinstance(value, str | bool | int | float)


def _param_value(value: Any) -> Any:
    ok = _is_scalar(value) or (isinstance(value, list | tuple) and all(_is_scalar(v) for v in value))
    if not ok:
        shown = repr(value) if isinstance(value, float) else type(value).__name__
        raise ValueError(
            f"a params value must be a string, number, true/false, null or a flat list of those, "
            f"not {shown}; fix: flatten it into several params, write a finite number, or quote it"
        )
    return value


ParamKey = Annotated[str, AfterValidator(_param_key)]
ParamValue = Annotated[ParamScalar | tuple[ParamScalar, ...], BeforeValidator(_param_value)]


class Recipe(Frozen):
    """One fully specified training run (minus its seed)."""

    name: str = Field(min_length=1)
    model: ModelConfig = ModelConfig()
    task: TaskConfig = TaskConfig()
    knobs: Knobs = Knobs()
    scale: ScaleConfig = ScaleConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    generation: GenerationConfig = GenerationConfig()
    eval: EvalConfig = EvalConfig()
    budget: BudgetConfig = BudgetConfig(value=1000, unit="steps")
    runner: RunnerConfig = Field(default_factory=ReferenceRunnerConfig, discriminator="type")
    params: dict[ParamKey, ParamValue] = Field(
        default_factory=dict,
        description="the lab's own hyperparameters: hashed, templated as {params.<key>}, sweepable",
    )
    checkpoint_every_steps: PositiveInt = 10

    @model_validator(mode="after")
    def _cross_field(self) -> Recipe:
        lc = self.knobs.length_control
        phrase = lc.alternatives.interruption.phrase
        # Checked for checkpoints only: the tiny preset's tests use other phrases on purpose.
        ends = phrase.rstrip().endswith(self.model.think_end)
        if lc.choice == "interruption" and self.model.path is not None and not ends:
            raise ValueError(
                f"knobs.length_control.alternatives.interruption.phrase ({phrase!r}) does not end with "
                f"model.think_end ({self.model.think_end!r}), so the forced phrase would not close the "
                "thinking; fix: end the phrase with the model's end-of-thinking marker"
            )
        if lc.choice == "interruption":
            p = lc.alternatives.interruption
            if p.budget_max + p.answer_tokens > self.scale.max_gen_len:
                raise ValueError(
                    f"knobs.length_control.alternatives.interruption: budget_max ({p.budget_max}) + "
                    f"answer_tokens ({p.answer_tokens}) exceeds scale.max_gen_len "
                    f"({self.scale.max_gen_len}); fix: lower budget_max or raise max_gen_len"
                )
        else:
            lp = lc.alternatives.length_penalty
            if lp.l_max > self.scale.max_gen_len:
                raise ValueError(
                    f"knobs.length_control.alternatives.length_penalty.l_max ({lp.l_max}) exceeds "
                    f"scale.max_gen_len ({self.scale.max_gen_len}); fix: make l_max <= max_gen_len"
                )
        return self

    def resolved(self) -> dict[str, Any]:
        """The run's identity as plain JSON data: every field that can change the curve, with each
        knob reduced to its choice and the chosen alternative's parameters. This is what is hashed
        and stored. Left out on purpose, because they cannot change a single point: ``name`` (two
        recipe files that resolve to the same training are the same run) and
        ``checkpoint_every_steps`` (an operational cadence; changing it must not orphan a run's
        checkpoints). ``budget`` stays in: a run trained to another budget is another run.

        ``params`` stays in (as written: ``3`` an int, ``3.0`` a float; canonical JSON then writes
        both as ``3``, as the command template does, so they are one run). Under a runner other
        than the reference trainer, a section the reference trainer alone reads
        (:data:`REFERENCE_ONLY`) stays in only when a command template references a key under it
        (``{knobs.loss.choice}`` keeps all of ``knobs``; ``{knob}``/``{alternative}`` keep
        ``knobs``; ``{variant}`` keeps every section); otherwise it cannot change the run.
        ``budget``, ``runner`` and ``params`` always stay in (an empty ``params`` is left out, so
        recipes without params keep their run ids)."""
        data = self.model_dump(mode="json", exclude={"knobs", *IDENTITY_EXCLUDED})
        data["knobs"] = {
            name: {"choice": knob.choice, "params": knob.active_params()}
            for name, knob in ((n, getattr(self.knobs, n)) for n in Knobs.model_fields)
        }
        if not self.params:
            del data["params"]  # so that recipes without params keep their run ids
        if not isinstance(self.runner, ReferenceRunnerConfig):
            used = self.used_sections()
            for section in REFERENCE_ONLY:
                if section not in used:
                    del data[section]
        return data

    def used_sections(self) -> frozenset[str]:
        """The :data:`REFERENCE_ONLY` sections this recipe's runner reads: all of them for the
        reference trainer and TRL, those its templates reference for a command, none for a replay."""
        if isinstance(self.runner, ReferenceRunnerConfig | TrlRunnerConfig):
            return frozenset(REFERENCE_ONLY)
        if not isinstance(self.runner, CommandRunnerConfig):
            return frozenset()
        used: set[str] = set()
        for name in self.runner.placeholders():
            head, dot, _ = name.partition(".")
            used.update((head,) if dot else _FIELD_SECTIONS.get(head, ()))
        return frozenset(used) & frozenset(REFERENCE_ONLY)
