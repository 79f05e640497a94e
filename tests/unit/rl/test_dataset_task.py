"""The ``dataset`` task: local JSONL / Parquet / save_to_disk data, splits, caps, templates, scoring."""

from __future__ import annotations

import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.rl.tasks import Problem, make_task
from scalerl.harness.rl.tasks.dataset import DatasetTask, is_placeholder

N = 40
RECORDS = [
    {
        "problem": f"What is {i} + 1? Put the answer in \\boxed{{}}.",
        "answer": i + 1,
        "topic": ["add", "sub"][i % 2],
        "level": i % 5,
        "sol": f"{i} plus one</think>{i + 1}",
    }
    for i in range(N)
]


def write_jsonl(path: Path, records: list[dict[str, Any]], blank_every: int = 0) -> Path:
    lines = [json.dumps(r) for r in records]
    if blank_every:  # blank lines are skipped
        lines = [x for i, line in enumerate(lines) for x in ([line, ""] if i % blank_every == 0 else [line])]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_parquet(path: Path, records: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def task(path: Path | str, **params: Any) -> DatasetTask:
    params.setdefault("verifier", "exact")
    if not any(k in params for k in ("val_path", "val_split", "val_fraction", "val_size")):
        params["val_size"] = 5
    t = make_task("dataset", {"path": str(path), **params})
    assert isinstance(t, DatasetTask)
    return t


def everything(t: DatasetTask) -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    s = t.split(10_000, 10_000, seed=0)
    return s.train, s.val


def index(p: Problem) -> int:
    return int(p.answer) - 1  # RECORDS[i] has answer i + 1


# ------------------------------------------------------------------------------------ formats
def test_every_format_loads_the_same_problems(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    paths = [
        write_jsonl(tmp_path / "d.jsonl", RECORDS, blank_every=3),
        write_parquet(tmp_path / "d.parquet", RECORDS),
        tmp_path / "ds",
        tmp_path / "dd",
    ]
    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "ds"))
    dd = {"train": datasets.Dataset.from_list(RECORDS), "test": datasets.Dataset.from_list(RECORDS[:3])}
    datasets.DatasetDict(dd).save_to_disk(str(tmp_path / "dd"))
    params = {
        "solution_field": "sol",
        "difficulty_field": "level",
        "system_prompt": "Be brief.",
        "val_seed": 3,
    }
    loaded = [everything(task(p, **params)) for p in paths]
    assert all(x == loaded[0] for x in loaded[1:])
    train, val = loaded[0]
    assert (len(train), len(val)) == (N - 5, 5)
    p = next(q for q in train if q.answer == "8")
    assert p == Problem(RECORDS[7]["problem"], "8", 2, system="Be brief.", solution="7 plus one</think>8")
    # An explicit format overrides the guess by suffix.
    shutil.copy(tmp_path / "d.parquet", tmp_path / "d.bin")
    assert everything(task(tmp_path / "d.bin", format="parquet", **params)) == loaded[0]


def test_numbers_become_strings_and_other_values_are_errors(tmp_path: Path) -> None:
    rows = [{"problem": "a", "answer": 3}, {"problem": "b", "answer": 0.5}, {"problem": "c", "answer": 1e20}]
    t = task(write_jsonl(tmp_path / "n.jsonl", rows), val_size=1, val_seed=0)
    assert sorted(p.answer for p in t.split(9, 9, 0).train + t.split(9, 9, 0).val) == ["0.5", "1e+20", "3"]
    bad = write_jsonl(tmp_path / "b.jsonl", [*rows, {"problem": "d", "answer": [1, 2]}])
    with pytest.raises(
        ConfigError, match=r"b.jsonl:4: task.params.answer_field='answer': field 'answer' is a list"
    ):
        everything(task(bad))


# ------------------------------------------------------------------------------ validation split
def test_val_path_and_val_split(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", RECORDS[:30])
    val = write_parquet(tmp_path / "val.parquet", RECORDS[30:])
    t = task(train, val_path=str(val))
    got_train, got_val = everything(t)
    assert [index(p) for p in got_train] == list(range(30))
    assert [index(p) for p in got_val] == list(range(30, N))
    assert t.paths() == {"path": str(train), "val_path": str(val)}
    assert task(train).paths() == {"path": str(train)}

    datasets = pytest.importorskip("datasets")
    splits = {"train": RECORDS[:25], "test": RECORDS[25:32], "dev": RECORDS[32:]}
    datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()}).save_to_disk(
        str(tmp_path / "dd")
    )
    got_train, got_val = everything(task(tmp_path / "dd", val_split="test"))
    assert ([index(p) for p in got_train], [index(p) for p in got_val]) == (
        list(range(25)),
        list(range(25, 32)),
    )
    got_train, got_val = everything(task(tmp_path / "dd", train_split="dev", val_split="test"))
    assert ([index(p) for p in got_train], [index(p) for p in got_val]) == (
        list(range(32, N)),
        list(range(25, 32)),
    )
    with pytest.raises(
        ConfigError, match=r"dd: task.params.val_split='nope': no split 'nope'.*'dev'.*fix: use one"
    ):
        everything(task(tmp_path / "dd", val_split="nope"))
    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(
        ConfigError, match=r"val_split='test': path is not a DatasetDict directory \(fix: use"
    ):
        everything(task(tmp_path / "ds", val_split="test"))


@pytest.mark.parametrize(("option", "k"), [({"val_fraction": 0.25}, 10), ({"val_size": 7}, 7)])
def test_fraction_and_size_hold_out_a_seeded_subset(tmp_path: Path, option: dict[str, Any], k: int) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS)
    train, val = everything(task(path, val_seed=5, **option))
    assert (len(train), len(val)) == (N - k, k)
    order = list(range(N))
    random.Random(5).shuffle(order)  # the documented rule: shuffle with Random(val_seed), hold out k
    assert [index(p) for p in val] == sorted(order[:k])
    assert [index(p) for p in train] == sorted(order[k:])  # file order, disjoint, together everything
    assert everything(task(path, val_seed=5, **option)) == (train, val)
    assert everything(task(path, val_seed=6, **option))[1] != val


def test_n_train_and_n_val_cap_the_splits_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = task(write_jsonl(tmp_path / "d.jsonl", RECORDS), val_size=10)
    with caplog.at_level(logging.WARNING, logger="scalerl.harness.rl.tasks.dataset"):
        s = t.split(12, 4, seed=1)
    assert (len(s.train), len(s.val)) == (12, 4)
    full_train, full_val = everything(t)
    assert set(s.train) <= set(full_train) and set(s.val) <= set(full_val)
    assert [index(p) for p in s.train] == sorted(index(p) for p in s.train)  # file order kept
    assert t.split(12, 4, seed=1) == s and t.split(12, 4, seed=2).train != s.train
    msgs = [r.getMessage() for r in caplog.records]
    assert any(
        "task.n_train=12" in m and "30 problems" in m and "raise task.n_train to 30" in m for m in msgs
    )
    assert any("task.n_val=4" in m and "10 problems" in m and "raise task.n_val to 10" in m for m in msgs)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scalerl.harness.rl.tasks.dataset"):
        s = t.split(30, 10, seed=1)
    assert (s.train, s.val) == (full_train, full_val) and not caplog.records  # no cap: no warning
    rng = random.Random(0)
    drawn = t.problems(100, rng)
    assert len(drawn) == 100 and set(drawn) <= set(full_train) and len(set(drawn)) > 15


# ------------------------------------------------------------------------------------ templates
def test_prompt_template(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS[:6])
    template = "[{topic}] {prompt}\nFinal answer in \\boxed{} or {{prompt}} or { prompt } or {}."
    train, val = everything(task(path, prompt_template=template, val_size=1))
    p = next(q for q in train + val if q.answer == "2")
    assert p.prompt == (
        "[sub] What is 1 + 1? Put the answer in \\boxed{}.\n"
        "Final answer in \\boxed{} or {prompt} or { prompt } or {}."
    )
    train, val = everything(
        task(path, prompt_field="topic", prompt_template="{prompt}/{problem}", val_size=1)
    )
    assert next(q for q in train + val if q.answer == "1").prompt == "add/" + RECORDS[0]["problem"]
    with pytest.raises(ConfigError) as err:
        everything(task(path, prompt_template="{prompt} {hint}"))
    msg = str(err.value)
    assert "d.jsonl:1: task.params.prompt_template='{prompt} {hint}'" in msg
    assert "['hint']" in msg and "['problem', 'answer', 'topic', 'level', 'sol']" in msg and "fix:" in msg


# --------------------------------------------------------------------------------------- errors
def test_params_are_checked_without_touching_the_filesystem() -> None:
    assert task("/nowhere/at/all.jsonl").paths() == {"path": "/nowhere/at/all.jsonl"}  # built, not read
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {},
            r"task.params: no validation split given \(fix: set one of val_path, val_split, val_fr",
        ),
        (
            {"val_size": 3, "val_fraction": 0.1},
            r"val_size=3: several validation splits given: \['val_fraction', 'val_s",
        ),
        ({"val_fraction": 1.5}, r"task.params.val_fraction=1.5: must be in \(0, 1\) \(fix:"),
        ({"val_size": 0}, r"task.params.val_size=0: must be >= 1"),
        ({"val_size": True}, r"task.params.val_size=True: must be an integer"),
        (
            {"val_split": "test"},
            r"task.params.val_split='test': a jsonl file has no splits \(fix: use val_path",
        ),
        ({"val_size": 1, "format": "csv"}, r"task.params.format='csv': unknown format \(fix: use one of"),
        ({"val_size": 1, "solution_field": 3}, r"task.params.solution_field=3: must be a string or null"),
        ({"val_size": 1, "verifier_timeout_s": 0}, r"task.params.verifier_timeout_s=0: must be > 0"),
    ]
    for extra, pattern in cases:
        with pytest.raises(ConfigError, match=pattern):
            make_task("dataset", {"path": "/nowhere/d.jsonl", "verifier": "exact", **extra})
    with pytest.raises(ConfigError, match=r"task.params.path=3: must be a string"):
        make_task("dataset", {"path": 3, "val_size": 1})
    with pytest.raises(ConfigError, match=r"task.params=.*: bad parameters for task 'dataset'.*'bogus'"):
        make_task("dataset", {"path": "d.jsonl", "val_size": 1, "bogus": 1})
    with pytest.raises(ConfigError, match=r"bad parameters for task 'dataset'.*path"):
        make_task("dataset", {"val_size": 1})


def test_missing_placeholder_and_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"task.params.path='.*nope.jsonl': no such file.*nothing is downloaded"
    ):
        everything(task(tmp_path / "nope.jsonl"))
    assert (
        is_placeholder("<your MATH train.jsonl>")
        and is_placeholder("/data/<name>/x")
        and not is_placeholder("a.b")
    )
    with pytest.raises(
        ConfigError, match=r"task.params.path='<your MATH train.jsonl>': still a placeholder \(fix:"
    ):
        everything(task("<your MATH train.jsonl>"))
    good = write_jsonl(tmp_path / "d.jsonl", RECORDS)
    with pytest.raises(ConfigError, match=r"task.params.val_path='<val>': still a placeholder"):
        everything(task(good, val_path="<val>"))
    (tmp_path / "d.csv").write_text("problem,answer\n")
    with pytest.raises(
        ConfigError, match=r"task.params.format='auto': cannot tell the format of 'd.csv'.*fix:"
    ):
        everything(task(tmp_path / "d.csv"))
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match=r"bad.parquet: not a readable Parquet file.*fix:"):
        everything(task(tmp_path / "bad.parquet"))


def test_malformed_records_name_file_line_and_field(tmp_path: Path) -> None:
    lines = [json.dumps(RECORDS[0]), "", '{"problem": "x", "answer": }', json.dumps(RECORDS[1])]
    (tmp_path / "m.jsonl").write_text("\n".join(lines))
    with pytest.raises(
        ConfigError, match=r"m.jsonl:3: malformed JSON: Expecting value \(column 28\) \(fix: write one"
    ):
        everything(task(tmp_path / "m.jsonl"))
    (tmp_path / "a.jsonl").write_text(json.dumps(RECORDS[:2]))
    with pytest.raises(ConfigError, match=r"a.jsonl:1: expected a JSON object, got list \(fix:"):
        everything(task(tmp_path / "a.jsonl"))
    rows = [*RECORDS[:5], {"problem": "no answer here"}]
    with pytest.raises(ConfigError) as err:
        everything(task(write_jsonl(tmp_path / "f.jsonl", rows)))
    assert str(err.value) == (
        f"{tmp_path / 'f.jsonl'}:6: task.params.answer_field='answer': field 'answer' is missing "
        "(fields: ['problem']) (fix: fix the record, or set task.params.answer_field to one of its fields)"
    )
    rows = [dict(r) for r in RECORDS[:5]]
    rows[2]["sol"] = None
    with pytest.raises(ConfigError) as err:
        everything(task(write_parquet(tmp_path / "n.parquet", rows), solution_field="sol"))
    msg = str(err.value)
    assert (
        f"{tmp_path / 'n.parquet'}: task.params.solution_field='sol': row 2 (0-based): field 'sol' is null"
        in msg
    )
    assert "(fields: ['problem', 'answer', 'topic', 'level', 'sol'])" in msg and "fix:" in msg
    rows = [{**r, "level": "hard"} for r in RECORDS[:3]]
    with pytest.raises(
        ConfigError, match=r"d.jsonl:1: task.params.difficulty_field='level': difficulty 'hard'"
    ):
        everything(task(write_jsonl(tmp_path / "d.jsonl", rows), difficulty_field="level"))


def test_empty_data_and_empty_splits(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ConfigError, match=r"e.jsonl: task.params.path: no records \(fix:"):
        everything(task(tmp_path / "e.jsonl"))
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS[:4])
    with pytest.raises(
        ConfigError, match=r"d.jsonl: task.params.val_size: an empty split: 0 train and 4 valid"
    ):
        everything(task(path, val_size=4))
    with pytest.raises(
        ConfigError, match=r"task.params.val_fraction: an empty split: 4 train and 0 valid.*fix:"
    ):
        everything(task(path, val_fraction=0.1))


def test_trace_returns_the_solution_or_says_how_to_get_one(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS)
    train, val = everything(task(path, solution_field="sol"))
    p = next(q for q in train + val if q.answer == "1")
    assert task(path).trace(p, random.Random(0)) == "0 plus one</think>1"
    with pytest.raises(ConfigError, match=r"task.params.solution_field: the data has no reference.*fix: set"):
        task(path).trace(everything(task(path))[0][0], random.Random(0))


# ---------------------------------------------------------------------------------- fingerprint
def test_fingerprint_follows_the_bytes_and_the_shaping_params(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS)
    fp = task(path).fingerprint()
    assert fp is not None and len(fp) == 16 and int(fp, 16) >= 0
    moved = tmp_path / "elsewhere" / "copy.jsonl"
    moved.parent.mkdir()
    shutil.copy(path, moved)
    assert task(moved).fingerprint() == fp  # a digest of the content, not of where it lives
    assert task(path, verifier_timeout_s=9.0).fingerprint() == fp  # scoring params do not shape problems
    assert task(path, prompt_template="Q: {prompt}").fingerprint() != fp
    assert task(path, val_size=6).fingerprint() != fp
    data = bytearray(path.read_bytes())
    data[data.index(b"What is 7")] = ord("w")  # one byte
    path.write_bytes(bytes(data))
    assert task(path).fingerprint() != fp
    assert task(moved).fingerprint() == fp  # the copy did not change

    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "ds"))
    fp_dir = task(tmp_path / "ds").fingerprint()
    assert task(tmp_path / "ds").fingerprint() == fp_dir  # loading does not write into the directory
    (tmp_path / "ds" / "notes.txt").write_text("x")
    assert task(tmp_path / "ds").fingerprint() != fp_dir


# -------------------------------------------------------------------------------------- scoring
def test_score_many_with_exact_after_the_last_marker(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", RECORDS[:3])
    t = task(path, verifier="exact")
    p = Problem("q", "42", 0)
    completions = ["think</think>42", "a</think>41</think>42", "a</think>42</think>41", "42", "</think>43"]
    assert t.score_many([p] * 5, completions) == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert t.score(p, "ok</think> 42 ") == 1.0
    assert t.score_many([p, p], ["x<END>42", "x</think>42"], think_end="<END>") == [1.0, 0.0]
    strict = task(path, verifier="exact", require_think_end=True)
    assert strict.score_many([p] * 3, ["42", "x</think>42", "</think>"]) == [0.0, 1.0, 0.0]
    assert t.counters() == {"verifier_timeouts": 0, "verifier_errors": 0}
    t.close()
    t.close()  # idempotent
    assert t.score(p, "x</think>42") == 1.0  # a closed task starts a new scorer when used again
    with pytest.raises(ConfigError, match=r"task.params.verifier='nope': unknown verifier \(fix: use one of"):
        task(path, verifier="nope")


class FakeScorer:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []
        self.timeouts, self.errors, self.closed = 0, 0, 0

    def score_many(self, completions: list[str], answers: list[str]) -> list[float]:
        self.calls.append((list(completions), list(answers)))
        self.timeouts += 1
        self.errors += 2
        return [0.5] * len(completions)

    def close(self) -> None:
        self.closed += 1


def test_the_scorer_is_lazy_batched_counted_and_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, dict[str, Any], FakeScorer]] = []

    def fake_get_verifier(name: str, **params: Any) -> FakeScorer:
        made.append((name, params, FakeScorer()))
        return made[-1][2]

    monkeypatch.setattr("scalerl.harness.rl.verifiers.get_verifier", fake_get_verifier)
    params = {"verifier": "regex", "verifier_params": {"pattern": r"\d+"}, "verifier_timeout_s": 2.0}
    t = task(write_jsonl(tmp_path / "d.jsonl", RECORDS[:3]), require_think_end=True, **params)
    assert made == [] and t.counters() == {"verifier_timeouts": 0, "verifier_errors": 0}
    ps = [Problem("q", "1", 0), Problem("q", "2", 0), Problem("q", "3", 0)]
    assert t.score_many(ps, ["no marker", " a</think> b</think> 7 ", "</think>3"]) == [0.0, 0.5, 0.5]
    assert t.score_many(ps[:1], ["no marker"]) == [0.0]  # nothing to judge: the scorer is not called
    name, kwargs, scorer = made[0]
    assert (name, kwargs) == ("regex", {"timeout_s": 2.0, "pattern": r"\d+"})
    assert scorer.calls == [(["7", "3"], ["2", "3"])]
    assert t.counters() == {"verifier_timeouts": 1, "verifier_errors": 2}
    t.close()
    assert scorer.closed == 1 and t.counters() == {"verifier_timeouts": 1, "verifier_errors": 2}
    t.score(ps[0], "</think>1")
    assert len(made) == 2 and t.counters() == {"verifier_timeouts": 2, "verifier_errors": 4}
    t.close()
    t.close()
    assert made[1][2].closed == 1
