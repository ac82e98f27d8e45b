"""The energy scorer: masks, the fast path against the oracle and hand computations, the CLI."""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_MAX_LEN, TINY_WORDS, tiny_vocab

from mlmia.cli import main
from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key
from mlmia.models.loading import load_mlm, mlm_parts
from mlmia.scoring import energy as scoring
from mlmia.scoring import fast_path, schedules
from mlmia.scoring.energy import score_samples as score_samples_strict
from mlmia.scoring.energy import score_samples_oracle as score_samples_oracle_strict
from mlmia.scoring.masks import mask_patterns, n_masked
from mlmia.terms.scores import SCORE_COLUMNS

ATOL = 1e-5
# CUDA (bf16 autocast; fp16 where bf16 is missing) against the fp32 CPU oracle: bf16 keeps 8
# mantissa bits (relative rounding 2^-9 per value), rounding errors accumulate over the
# layers and the tiny models' energies are 3-6 nats, so 2% relative plus 0.05 absolute.
GPU_RTOL, GPU_ATOL = 0.02, 0.05
DOCUMENTED_COLUMNS = [
    "sample_id", "model", "energy_kind", "energy", "n_tokens", "n_masked", "per_pattern", "patterns", "seed",
    "token_logp", "token_mean", "token_var", "token_top1",
]  # fmt: skip


def _texts(n_words_list, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(TINY_WORDS, n)) for n in n_words_list]


# content lengths 1..35 (C(T, l) <= 10 for T <= 5: exact enumeration) and two texts longer
# than the tiny models' 40 positions: these tests allow truncation (the scorer refuses such
# texts by default: test_an_over_long_text_is_refused_unless_truncation_is_allowed)
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 13, 20, 35, 60, 90]


def score_samples(*args, **kwargs):
    return score_samples_strict(*args, **{"truncate": True, **kwargs})


def score_samples_oracle(*args, **kwargs):
    return score_samples_oracle_strict(*args, **{"truncate": True, **kwargs})


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def samples():
    return pd.DataFrame({"sample_id": [f"note-{i}" for i in range(len(LENGTHS))], "text": _texts(LENGTHS)})


@pytest.fixture(scope="module")
def bert(tiny_bert_dir):
    return load_mlm(tiny_bert_dir, "cpu")


@pytest.fixture(scope="module")
def bert_b(tiny_bert_dir_b):
    return load_mlm(tiny_bert_dir_b, "cpu")


def _assert_same(fast: pd.DataFrame, ref: pd.DataFrame, atol=ATOL):
    assert list(fast.columns) == DOCUMENTED_COLUMNS
    for col in ["sample_id", "model", "energy_kind", "n_tokens", "n_masked", "patterns", "seed"]:
        assert fast[col].tolist() == ref[col].tolist(), col
    np.testing.assert_allclose(fast["energy"].to_numpy(), ref["energy"].to_numpy(), rtol=0, atol=atol)
    for a, b in zip(fast["per_pattern"], ref["per_pattern"]):
        assert len(a) == len(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)
    for column in ("token_logp", "token_mean", "token_var"):
        for a, b in zip(fast[column], ref[column]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=10 * atol)
    for a, b, n in zip(fast["token_top1"], ref["token_top1"], fast["patterns"] * fast["n_masked"]):
        assert len(a) == len(b) == n
        assert np.mean(np.asarray(a) == np.asarray(b)) > 0.95  # near-ties may flip the argmax


def _split(df, n):
    """n contiguous shards, like the workflow's shard step."""
    bounds = np.linspace(0, len(df), n + 1).astype(int)
    return [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _hand_ids(words):
    """Token ids built from the vocabulary list itself, not from the tokenizer."""
    vocab = tiny_vocab()
    return [vocab.index("[CLS]")] + [vocab.index(w) for w in words] + [vocab.index("[SEP]")]


def _hand_pattern_ce(model, ids, positions):
    """Cross-entropy of the original tokens at `positions` (sequence indices) when all are masked."""
    mask_id = tiny_vocab().index("[MASK]")
    x = torch.tensor([ids])
    x[0, positions] = mask_id
    with torch.no_grad():
        logp = torch.log_softmax(model(x).logits[0].double(), dim=-1)
    return [-float(logp[p, ids[p]]) for p in positions]


# --------------------------------------------------------------------------- masks


@pytest.mark.parametrize(
    "t, expected", [(1, 1), (3, 1), (6, 1), (7, 2), (13, 2), (14, 3), (20, 3), (21, 4), (100, 15), (510, 77)]
)
def test_n_masked_is_ceil_15_percent(t, expected):
    assert n_masked(t, "ceil") == expected


@pytest.mark.parametrize(
    "t, expected", [(1, 1), (6, 1), (7, 1), (13, 1), (14, 2), (20, 3), (21, 3), (100, 15), (510, 76)]
)
def test_floor_mask_count_as_the_authors_code(t, expected):
    # int(0.15 * T), at least one masked token
    assert n_masked(t, "floor") == expected


def test_floor_masks_fewer_positions_in_the_scorer(bert, samples):
    model, tok = bert
    ceil = score_samples(model, tok, samples, patterns=4, seed=0)
    floor = score_samples(model, tok, samples, patterns=4, seed=0, mask_count="floor")
    expected = [max(1, (15 * t) // 100) for t in ceil["n_tokens"]]
    assert floor["n_masked"].tolist() == expected
    assert (floor["n_masked"] <= ceil["n_masked"]).all() and (floor["n_masked"] < ceil["n_masked"]).any()
    with pytest.raises(UserError, match="mask count"):
        score_samples(model, tok, samples, mask_count="round")


def test_mask_patterns_are_valid_distinct_and_prefix_stable():
    pats = mask_patterns(7, "note-1", 30, 12, "ceil")
    assert pats.shape == (12, 5)
    assert all(list(r) == sorted(set(r)) for r in pats.tolist())
    assert pats.min() >= 0 and pats.max() < 30
    assert len({tuple(r) for r in pats.tolist()}) == 12
    # pattern j does not depend on K
    np.testing.assert_array_equal(mask_patterns(7, "note-1", 30, 5, "ceil"), pats[:5])
    # deterministic, and a function of seed and sample id
    np.testing.assert_array_equal(mask_patterns(7, "note-1", 30, 12, "ceil"), pats)
    assert not np.array_equal(mask_patterns(8, "note-1", 30, 12, "ceil"), pats)
    assert not np.array_equal(mask_patterns(7, "note-2", 30, 12, "ceil"), pats)


def test_exact_enumeration_when_k_covers_all_patterns():
    np.testing.assert_array_equal(mask_patterns(0, "x", 4, 10, "ceil"), [[0], [1], [2], [3]])
    # T = 7: l = 2, C(7, 2) = 21 patterns, all in lexicographic order
    pats = mask_patterns(0, "x", 7, 21, "ceil").tolist()
    expected = [[a, b] for a in range(7) for b in range(a + 1, 7)]
    assert pats == expected
    assert mask_patterns(0, "x", 7, 50, "ceil").tolist() == expected
    # one short of all: 20 distinct sampled patterns
    sampled = mask_patterns(0, "x", 7, 20, "ceil").tolist()
    assert len(sampled) == 20 and len({tuple(r) for r in sampled}) == 20


def test_masks_do_not_depend_on_python_hash_seed():
    code = "from mlmia.core.keys import stable_key; from mlmia.scoring.masks import mask_patterns; print(stable_key('abc'), mask_patterns(3, 'abc', 25, 4, 'ceil').tolist())"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    }
    assert outs == {f"{stable_key('abc')} {mask_patterns(3, 'abc', 25, 4, 'ceil').tolist()}\n"}


# --------------------------------------------------------------------------- fast path vs oracle


@pytest.mark.parametrize("energy", ["masked", "normalized", "pll_word_l2r"])
@pytest.mark.parametrize("batch_size", [None, 1, 7, 1000])
def test_fast_path_equals_oracle(bert, samples, energy, batch_size):
    model, tok = bert
    ref = score_samples_oracle(model, tok, samples, energy=energy, patterns=10, seed=3, model_name="m")
    fast = score_samples(model, tok, samples, energy=energy, patterns=10, seed=3, batch_size=batch_size, model_name="m")
    _assert_same(fast, ref)
    assert fast["n_tokens"].tolist()[:-2] == [min(n, TINY_MAX_LEN - 2) for n in LENGTHS][:-2]
    assert fast["n_tokens"].tolist()[-2:] == [TINY_MAX_LEN - 2] * 2  # truncated
    if energy == "masked":
        combos = [
            min(
                10,
                int(np.prod(range(t - n_masked(t, "ceil") + 1, t + 1)) // np.prod(range(1, n_masked(t, "ceil") + 1))),
            )
            for t in fast["n_tokens"]
        ]
        assert fast["patterns"].tolist() == combos
        assert fast["patterns"].tolist()[:5] == [1, 2, 3, 4, 5]  # exact enumeration, l = 1
    else:
        assert fast["patterns"].tolist() == fast["n_tokens"].tolist()
        assert set(fast["n_masked"]) == {1}


def test_small_token_budget_many_batches(bert, samples):
    model, tok = bert
    ref = score_samples_oracle(model, tok, samples, patterns=6, seed=1)
    _assert_same(score_samples(model, tok, samples, patterns=6, seed=1, token_budget=50), ref)


@pytest.mark.parametrize(
    "fixture, split", [("tiny_roberta", True), ("tiny_distilbert", True), ("tiny_bert_unsplit", False)]
)
def test_other_architectures(request, samples, fixture, split):
    """RoBERTa's `lm_head` and DistilBERT's vocab_* head split off; a model whose head is not
    recognised is scored with full logits, to the same energies."""
    if fixture == "tiny_bert_unsplit":
        import copy

        model, tok = request.getfixturevalue("bert")
        model = copy.deepcopy(model)
        model._mlmia_parts = None  # what mlm_parts caches for an unrecognised head
    else:
        model, tok = request.getfixturevalue(fixture)
    assert (mlm_parts(model) is not None) == split
    for energy in ("masked", "normalized"):
        ref = score_samples_oracle(model, tok, samples, energy=energy, patterns=5, seed=0)
        _assert_same(score_samples(model, tok, samples, energy=energy, patterns=5, seed=0, batch_size=9), ref)


def test_shards_give_the_same_results(bert, samples):
    model, tok = bert
    whole = score_samples(model, tok, samples, patterns=10, seed=5, model_name="m")
    shards = [score_samples(model, tok, part, patterns=10, seed=5, model_name="m") for part in _split(samples, 3)]
    _assert_same(pd.concat(shards, ignore_index=True), whole)  # fp32 rounding of other batch shapes


def test_input_order_is_kept_and_irrelevant(bert, samples):
    model, tok = bert
    shuffled = samples.sample(frac=1.0, random_state=4).reset_index(drop=True)
    out = score_samples(model, tok, shuffled, patterns=10, seed=5)
    assert out["sample_id"].tolist() == shuffled["sample_id"].tolist()
    base = (
        score_samples(model, tok, samples, patterns=10, seed=5)
        .set_index("sample_id")
        .loc[shuffled["sample_id"]]
        .reset_index()
    )
    _assert_same(out, base)


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (CPU-only machine: CUDA autocast not testable)"
)
@pytest.mark.parametrize("energy", ["masked", "normalized"])
def test_gpu_autocast_close_to_cpu_oracle(tiny_bert_dir, samples, energy):
    model, tok = load_mlm(tiny_bert_dir, "cpu")
    ref = score_samples_oracle(model, tok, samples, energy=energy, patterns=10, seed=3)
    fast, stats = score_samples(
        model, tok, samples, energy=energy, patterns=10, seed=3, device="cuda", return_stats=True
    )
    assert fast["patterns"].tolist() == ref["patterns"].tolist()
    np.testing.assert_allclose(fast["energy"], ref["energy"], rtol=GPU_RTOL, atol=GPU_ATOL)
    assert stats.device.startswith("cuda") and stats.dtype in ("bfloat16", "float16")
    assert stats.batch_policy.startswith("free memory") and stats.batch_size >= 1


@pytest.mark.parametrize("energy", ["masked", "normalized"])
def test_cpu_bf16_close_to_the_fp32_oracle(bert, samples, energy):
    """bf16 on CPU (autocast: bf16 matmuls, fp32 softmax and cross-entropy) is an option whose
    energies stay within the same tolerance as CUDA's autocast; the default stays fp32."""
    model, tok = bert
    ref = score_samples_oracle(model, tok, samples, energy=energy, patterns=10, seed=3)
    fast, stats = score_samples(
        model, tok, samples, energy=energy, patterns=10, seed=3, precision="bf16", return_stats=True
    )
    assert stats.dtype == "bfloat16"
    np.testing.assert_allclose(fast["energy"], ref["energy"], rtol=GPU_RTOL, atol=GPU_ATOL)
    assert np.abs(fast["energy"].to_numpy() - ref["energy"].to_numpy()).max() > 1e-6  # bf16 did run
    with pytest.raises(UserError, match="precision fp16 needs a CUDA device; on CPU use fp32 or bf16"):
        score_samples(model, tok, samples.head(2), patterns=2, precision="fp16")


def test_stats_are_returned_and_logged_without_texts(bert, samples):
    model, tok = bert
    with scoring_log() as records:
        out, stats = score_samples(model, tok, samples, patterns=4, seed=1, batch_size=6, return_stats=True)
    assert stats.n_samples == len(samples) and stats.n_sequences == int(out["patterns"].sum())
    assert stats.n_scored_tokens == int((out["patterns"] * out["n_masked"]).sum())
    assert stats.n_tokens == int((out["patterns"] * (out["n_tokens"] + 2)).sum())  # [CLS] and [SEP]
    assert (stats.device, stats.dtype, stats.batch_size, stats.batch_policy) == ("cpu", "float32", 6, "batch size 6")
    assert stats.n_batches == -(-stats.n_sequences // 6) and stats.oom_halvings == 0
    assert stats.seconds > 0 and stats.tokens_per_s == pytest.approx(stats.n_tokens / stats.seconds)
    assert set(stats.as_dict()) >= {
        "samples_per_s",
        "sequences_per_s",
        "tokens_per_s",
        "scored_tokens_per_s",
        "device",
        "dtype",
    }
    final = [r.getMessage() for r in records if r.getMessage().startswith(f"scored {len(samples)} samples (")]
    assert final == [stats.summary()]
    for part in ("sequences/s", "scored tokens/s", "device cpu", "float32", "batch size up to 6"):
        assert part in final[0]
    logged = " ".join(r.getMessage() for r in records)
    assert not any(t[:15] in logged for t in samples["text"])
    _, cpu_default = score_samples(model, tok, samples.head(3), patterns=2, return_stats=True)
    assert cpu_default.batch_policy == f"token budget {fast_path.DEFAULT_TOKEN_BUDGET['cpu']}"


def test_out_of_memory_halves_the_batch_and_retries(monkeypatch, bert, samples):
    model, tok = bert
    ref = score_samples(model, tok, samples, patterns=5, seed=2, batch_size=16)
    real = fast_path._score_batch
    seen = []

    def small_memory(inp, a, b):
        seen.append(b - a)
        if b - a > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(inp, a, b)

    monkeypatch.setattr(fast_path, "_score_batch", small_memory)
    out, stats = score_samples(model, tok, samples, patterns=5, seed=2, batch_size=16, return_stats=True)
    _assert_same(out, ref)
    assert seen[:3] == [16, 8, 4] and max(seen[3:]) <= 3  # halved until it fits, the smaller cap kept
    assert stats.oom_halvings == 3 and stats.batch_size == 2  # 16 -> 8 -> 4 -> 2 rows

    def no_memory(inp, a, b):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(fast_path, "_score_batch", no_memory)
    with pytest.raises(UserError, match=r"out of memory on cpu with a single sequence of \d+ tokens"):
        score_samples(model, tok, samples.head(2), patterns=2, batch_size=4)


def test_cuda_batches_from_free_memory(monkeypatch, bert):
    """The rule `score_samples` uses on CUDA without a batch size, checked on CPU with a fake reading."""
    model, _ = bert
    free = 3_000_000
    monkeypatch.setattr(fast_path, "_free_memory", lambda dev: free)
    monkeypatch.setattr(fast_path, "compute_dtype", lambda dev, precision: torch.bfloat16)
    copy_len = np.repeat([5, 12, 30, 40], [50, 300, 200, 100])
    copy_l = np.array([max(1, -(-3 * (n - 2) // 20)) for n in copy_len])
    rows_for, policy = fast_path.batch_rule(model, torch.device("cuda"), None, None, copy_len, copy_l, False, "auto")
    assert policy.startswith("free memory")
    for i in (0, 60, 400, 599):
        want = scoring.batch_size_for_memory(free, model.config, int(copy_len[i]), 2, masked_per_seq=int(copy_l[i]))
        assert rows_for(i) == want
    assert rows_for(0) > rows_for(599) >= 1
    batches = fast_path.cut_batches(len(copy_len), rows_for)
    assert batches[0][0] == 0 and batches[-1][1] == len(copy_len)
    assert all(b - a <= rows_for(b - 1) for a, b in batches)
    assert all(a2 == b1 for (_, b1), (a2, _) in zip(batches, batches[1:]))
    # an explicit token budget or batch size wins over the memory reading
    assert (
        fast_path.batch_rule(model, torch.device("cuda"), None, 100, copy_len, copy_l, False, "auto")[1]
        == "token budget 100"
    )
    assert (
        fast_path.batch_rule(model, torch.device("cuda"), 7, None, copy_len, copy_l, False, "auto")[1] == "batch size 7"
    )


# --------------------------------------------------------------------------- hand computations


@pytest.mark.parametrize("energy", ["masked", "normalized"])
def test_three_token_sample_by_hand(bert, energy):
    model, tok = bert
    words = ["chest", "pain", "daily"]
    ids = _hand_ids(words)
    assert tok(" ".join(words))["input_ids"] == ids
    by_hand = [_hand_pattern_ce(model, ids, [p])[0] for p in (1, 2, 3)]  # l = 1, C(3, 1) = 3 patterns
    df = pd.DataFrame({"sample_id": ["s"], "text": [" ".join(words)]})
    for out in (
        score_samples(model, tok, df, energy=energy, patterns=10),
        score_samples_oracle(model, tok, df, energy=energy, patterns=10),
    ):
        row = out.iloc[0]
        assert (row.n_tokens, row.n_masked, row.patterns) == (3, 1, 3)
        np.testing.assert_allclose(row.per_pattern, by_hand, atol=ATOL)
        assert abs(row.energy - np.mean(by_hand)) < ATOL


def test_sampled_patterns_and_sum_reduction_by_hand(bert):
    model, tok = bert
    words = ["patient", "admitted", "with", "chest", "pain", "and", "fever", "no", "cough", "daily"]
    ids = _hand_ids(words)
    df = pd.DataFrame({"sample_id": ["abc-7"], "text": [" ".join(words)]})
    pats = mask_patterns(11, "abc-7", 10, 4, "ceil")  # l = 2, C(10, 2) = 45 > 4: sampled
    assert pats.shape == (4, 2)
    ces = [_hand_pattern_ce(model, ids, [int(p) + 1 for p in pat]) for pat in pats]  # +1: after [CLS]
    mean_out = score_samples(model, tok, df, patterns=4, seed=11, reduction="mean").iloc[0]
    sum_out = score_samples(model, tok, df, patterns=4, seed=11, reduction="sum").iloc[0]
    np.testing.assert_allclose(mean_out.per_pattern, [np.mean(c) for c in ces], atol=ATOL)
    np.testing.assert_allclose(sum_out.per_pattern, [np.sum(c) for c in ces], atol=ATOL)
    assert abs(sum_out.energy - 2 * mean_out.energy) < ATOL  # sum = l * mean, l = 2
    assert abs(mean_out.energy - np.mean([np.mean(c) for c in ces])) < ATOL


def test_sum_reduction_is_l_times_mean(bert, samples):
    model, tok = bert
    mean = score_samples(model, tok, samples, patterns=10, seed=2, reduction="mean")
    total = score_samples(model, tok, samples, patterns=10, seed=2, reduction="sum")
    np.testing.assert_allclose(total.energy, mean.energy * mean.n_masked, atol=1e-4)
    assert (mean.n_masked > 1).any()


# --------------------------------------------------------------------------- common random numbers


def test_masks_identical_across_models_batches_and_shards(monkeypatch, bert, bert_b, samples):
    seen: dict[str, list] = {}

    def recording(seed, sample_id, n_tokens, k, mask_count="ceil"):
        out = mask_patterns(seed, sample_id, n_tokens, k, mask_count)
        seen.setdefault(sample_id, []).append(out.tolist())
        return out

    monkeypatch.setattr(schedules, "mask_patterns", recording)  # every energy kind's patterns come from here
    score_samples(*bert, samples, patterns=10, seed=9, batch_size=3)
    for part in _split(samples.iloc[::-1], 2):
        score_samples(*bert_b, part, patterns=10, seed=9)
    assert set(seen) == set(samples["sample_id"])
    for sid, calls in seen.items():
        assert len(calls) == 2 and calls[0] == calls[1], sid


def test_masks_are_keyed_on_mask_id_where_the_table_has_one(bert):
    model, tok = bert
    words = ["patient", "admitted", "with", "chest", "pain", "and", "fever", "no", "cough", "daily"]
    swapped = ["patient", "admitted", "with", "chest", "pain", "and", "nausea", "no", "cough", "daily"]
    plain = pd.DataFrame({"sample_id": ["abc-7", "abc-7~n0"], "text": [" ".join(words), " ".join(swapped)]})
    for score in (score_samples, score_samples_oracle):
        before = score(model, tok, plain, patterns=4, seed=11)
        # no mask_id, an empty one or the sample's own id: the scores are exactly those of the plain table
        for mask_id in ([None, None], ["abc-7", "abc-7~n0"]):
            again = score(model, tok, plain.assign(mask_id=mask_id), patterns=4, seed=11)
            pd.testing.assert_frame_equal(again, before, check_exact=True)
        # the neighbour keyed on its sample's id: its sample's patterns, by hand
        keyed = score(model, tok, plain.assign(mask_id=["abc-7", "abc-7"]), patterns=4, seed=11)
        pd.testing.assert_frame_equal(keyed.iloc[[0]], before.iloc[[0]], check_exact=True)
        pats = mask_patterns(11, "abc-7", 10, 4, "ceil")  # l = 2, C(10, 2) = 45 > 4: sampled
        assert not np.array_equal(pats, mask_patterns(11, "abc-7~n0", 10, 4, "ceil"))
        ids = _hand_ids(swapped)
        by_hand = [np.mean(_hand_pattern_ce(model, ids, [int(p) + 1 for p in pat])) for pat in pats]
        np.testing.assert_allclose(keyed.per_pattern[1], by_hand, atol=ATOL)
        assert not np.allclose(before.per_pattern[1], by_hand, atol=1e-3)  # its own id draws other patterns
    with pytest.raises(UserError, match="sample 'abc-7~n0' has an empty mask_id"):
        score_samples(model, tok, plain.assign(mask_id=["abc-7", ""]), patterns=4, seed=11)


def test_fewer_patterns_are_a_prefix(bert, samples):
    model, tok = bert
    k10 = score_samples(model, tok, samples, patterns=10, seed=4)
    k5 = score_samples(model, tok, samples, patterns=5, seed=4)
    for a, b in zip(k5["per_pattern"], k10["per_pattern"]):
        np.testing.assert_allclose(a, b[: len(a)], rtol=0, atol=ATOL)


# --------------------------------------------------------------------------- inputs and errors


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def scoring_log():
    """The records the scorer logs at INFO and above inside the block."""
    handler = _ListHandler()
    logger = logging.getLogger("mlmia.scoring")  # the scorer logs from its modules (energy, prepared, fast_path)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_truncation_is_logged_with_a_count_and_no_text(bert):
    model, tok = bert
    texts = _texts([5, 80, 100], seed=8)
    df = pd.DataFrame({"sample_id": ["a", "b", "c"], "text": texts})
    with scoring_log() as records:
        out = score_samples(model, tok, df, patterns=3, batch_size=2, progress_seconds=0)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("2 of 3 samples")
    assert out["n_tokens"].tolist() == [5, TINY_MAX_LEN - 2, TINY_MAX_LEN - 2]
    progress = [
        r.getMessage() for r in records if re.match(r"scored \d+/3 samples, [\d.]+ samples/s on cpu", r.getMessage())
    ]
    assert progress and progress[-1].startswith("scored 2/3")
    logged = " ".join(r.getMessage() for r in records)
    assert not any(t[:20] in logged for t in texts)


def test_text_without_tokens_names_the_sample(bert):
    df = pd.DataFrame({"sample_id": ["ok", "blank-3"], "text": ["chest pain", "   "]})
    with pytest.raises(UserError, match="blank-3"):
        score_samples(*bert, df)


def test_bad_parameters_are_user_errors(bert, samples):
    with pytest.raises(UserError, match="energy"):
        score_samples(*bert, samples, energy="bogus")
    with pytest.raises(UserError, match=">= 1"):
        score_samples(*bert, samples, patterns=0)


# --------------------------------------------------------------------------- CLI


def _write_samples(path, df):
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path, index=False)


def test_a_file_is_scored_in_chunks_to_the_same_scores(tmp_path, tiny_bert_dir, bert, samples):
    """`score_file` writes a chunk of samples at a time (flat memory on a large corpus): the same
    rows, in the input's order, with the energies of one in-memory pass."""
    import pyarrow.parquet as pq

    from mlmia.scoring.energy import score_file

    _write_samples(tmp_path / "s.parquet", samples)
    assert score_file(
        str(tiny_bert_dir), tmp_path / "s.parquet", tmp_path / "o.parquet", patterns=4, chunk_samples=3, truncate=True
    ) == len(samples)
    assert pq.ParquetFile(tmp_path / "o.parquet").num_row_groups == -(-len(samples) // 3)
    chunked = pd.read_parquet(tmp_path / "o.parquet")
    whole = score_samples(*bert, samples, patterns=4, model_name=chunked["model"].iloc[0], truncate=True)
    assert chunked["sample_id"].tolist() == samples["sample_id"].tolist()
    _assert_same(chunked, whole)


@pytest.mark.parametrize("suffix, energy", [(".csv", "masked"), (".jsonl", "normalized"), (".parquet", "masked")])
def test_cli_score_end_to_end(tmp_path, tiny_bert_dir, bert, samples, suffix, energy):
    src = tmp_path / f"samples{suffix}"
    _write_samples(src, samples)
    out = tmp_path / "out" / "scores.parquet"
    rc = main(["score", "--model", str(tiny_bert_dir), "--samples", str(src), "--out", str(out),
               "--energy", energy, "--patterns", "4", "--seed", "2", "--model-name", "target", "--truncate"])  # fmt: skip
    assert rc == 0
    got = pd.read_parquet(out)
    assert list(got.columns) == DOCUMENTED_COLUMNS == SCORE_COLUMNS
    assert got["sample_id"].tolist() == samples["sample_id"].tolist()
    assert set(got["model"]) == {"target"} and set(got["energy_kind"]) == {energy} and set(got["seed"]) == {2}
    assert got["energy"].dtype == np.float64
    for col in ("n_tokens", "n_masked", "patterns", "seed"):
        assert pd.api.types.is_integer_dtype(got[col]), col
    assert (got["per_pattern"].map(len) == got["patterns"]).all()
    ref = score_samples_oracle(*bert, samples, energy=energy, patterns=4, seed=2, model_name="target")
    _assert_same(got, ref)
    assert not [p for p in out.parent.iterdir() if p.name != "scores.parquet"]  # no temp files left


def test_cli_unknown_model_path_fails_in_one_line(tmp_path, capsys, samples):
    src = tmp_path / "s.csv"
    _write_samples(src, samples)
    out = tmp_path / "scores.parquet"
    missing = tmp_path / "models" / "no_such_model"
    rc = main(["score", "--model", str(missing), "--samples", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and str(missing) in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_cli_refuses_an_encoder_without_mlm_head(tmp_path, capsys, tiny_bert_dir, samples):
    from transformers import AutoTokenizer, BertConfig, BertModel

    enc = tmp_path / "encoder_only"
    BertModel(
        BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    ).save_pretrained(enc)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(enc)
    src = tmp_path / "s.csv"
    _write_samples(src, samples)
    capsys.readouterr()  # drop the progress bars of saving
    out = tmp_path / "scores.parquet"
    rc = main(["score", "--model", str(enc), "--samples", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and str(enc) in err[0] and "head" in err[0]
    assert not out.exists()


def test_cli_default_model_label_is_the_directory_name(tmp_path, tiny_bert_dir, samples):
    src = tmp_path / "s.jsonl"
    _write_samples(src, samples.head(3))
    out = tmp_path / "scores.parquet"
    assert (
        main(
            ["score", "--model", str(tiny_bert_dir) + "/", "--samples", str(src), "--out", str(out), "--patterns", "2"]
        )
        == 0
    )
    assert set(pd.read_parquet(out)["model"]) == {tiny_bert_dir.name}


def test_cli_unknown_hub_id_fails_fast_offline(tmp_path, capsys, samples, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = tmp_path / "s.csv"
    _write_samples(src, samples)
    out = tmp_path / "scores.parquet"
    rc = main(["score", "--model", "no-such-org/no-such-mlm", "--samples", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "no-such-org/no-such-mlm" in err[0]
    assert not out.exists()


def test_cli_duplicate_sample_id_fails_in_one_line(tmp_path, capsys, tiny_bert_dir):
    src = tmp_path / "dup.csv"
    pd.DataFrame({"sample_id": ["a", "b", "a"], "text": ["chest pain", "fever", "cough"]}).to_csv(src, index=False)
    out = tmp_path / "scores.parquet"
    rc = main(["score", "--model", str(tiny_bert_dir), "--samples", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "duplicate" in err[0] and "'a'" in err[0]
    assert not out.exists()


def test_library_rejects_duplicate_ids(bert):
    df = pd.DataFrame({"sample_id": ["a", "a"], "text": ["chest pain", "fever"]})
    with pytest.raises(UserError, match="duplicate"):
        score_samples(*bert, df)


def test_an_over_long_text_is_refused_unless_truncation_is_allowed(bert):
    model, tok = bert
    df = pd.DataFrame({"sample_id": ["short", "long"], "text": _texts([5, 80], seed=3)})
    with pytest.raises(UserError) as info:
        score_samples_strict(model, tok, df, patterns=2)
    message = str(info.value)
    assert message.startswith("sample 'long' is longer than the model's maximum length (40 tokens")
    assert "scoring.truncate: true" in message and "\n" not in message
    assert df.text[1][:20] not in message
    cut = score_samples_strict(model, tok, df, patterns=2, truncate=True)
    assert cut.n_tokens.tolist() == [5, TINY_MAX_LEN - 2]


def test_per_token_evidence_by_hand(bert):
    """log p of the true token, E_p[log p], Var_p[log p] and the top-1 check of every scored
    position, recomputed from the full model's logits in float64."""
    model, tok = bert
    words = ["chest", "pain", "daily", "aspirin"]
    ids = _hand_ids(words)
    df = pd.DataFrame({"sample_id": ["s"], "text": [" ".join(words)]})
    row = score_samples(model, tok, df, energy="normalized").iloc[0]
    mask_id = tiny_vocab().index("[MASK]")
    expected = {"logp": [], "mean": [], "var": [], "top1": []}
    for position in range(1, len(words) + 1):
        x = torch.tensor([ids])
        x[0, position] = mask_id
        with torch.no_grad():
            logits = model(x).logits[0, position].double()
        logp = torch.log_softmax(logits, -1).numpy()
        prob = np.exp(logp)
        expected["logp"].append(logp[ids[position]])
        expected["mean"].append(float(np.sum(prob * logp)))
        expected["var"].append(float(np.sum(prob * logp**2) - np.sum(prob * logp) ** 2))
        expected["top1"].append(int(np.argmax(logp)) == ids[position])
    np.testing.assert_allclose(row.token_logp, expected["logp"], atol=ATOL)
    np.testing.assert_allclose(row.token_mean, expected["mean"], atol=ATOL)
    np.testing.assert_allclose(row.token_var, expected["var"], atol=1e-4)
    assert list(row.token_top1) == expected["top1"]
    assert np.mean(row.token_logp) == pytest.approx(-row.energy, abs=ATOL)


def test_pll_word_l2r_masks_the_rest_of_the_word(bert):
    """Kauf and Ivanova's PLL-word-l2r by hand: a word of three pieces (a, ##b, ##c) scores
    a with a, b, c masked, b with b, c masked, c alone; a one-piece word as the normalized
    energy does."""
    model, tok = bert
    vocab = tiny_vocab()
    text = "chest abc"  # "abc" -> a ##b ##c in the tiny vocabulary
    ids = tok(text)["input_ids"]
    assert [vocab[i] for i in ids] == ["[CLS]", "chest", "a", "##b", "##c", "[SEP]"]
    expected = [
        _hand_pattern_ce(model, ids, [1])[0],
        _masked_ce(model, ids, masked=[2, 3, 4], scored=2),
        _masked_ce(model, ids, masked=[3, 4], scored=3),
        _masked_ce(model, ids, masked=[4], scored=4),
    ]
    df = pd.DataFrame({"sample_id": ["s"], "text": [text]})
    for out in (
        score_samples(model, tok, df, energy="pll_word_l2r"),
        score_samples_oracle(model, tok, df, energy="pll_word_l2r"),
    ):
        row = out.iloc[0]
        assert (row.n_tokens, row.n_masked, row.patterns) == (4, 1, 4)
        np.testing.assert_allclose(row.per_pattern, expected, atol=ATOL)
        assert row.energy == pytest.approx(np.mean(expected), abs=ATOL)
    normalized = score_samples(model, tok, df, energy="normalized").iloc[0]
    assert normalized.per_pattern[0] == pytest.approx(expected[0], abs=ATOL)  # "chest" is one piece
    assert normalized.per_pattern[1] != pytest.approx(expected[1], abs=1e-3)  # "a" saw ##b ##c there


def _masked_ce(model, ids, masked, scored):
    mask_id = tiny_vocab().index("[MASK]")
    x = torch.tensor([ids])
    x[0, masked] = mask_id
    with torch.no_grad():
        logp = torch.log_softmax(model(x).logits[0].double(), dim=-1)
    return -float(logp[scored, ids[scored]])


def test_a_score_table_of_an_older_version_still_reads(tmp_path):
    # score tables written before the column was renamed call K `k`: the attacks read them as `patterns`
    from mlmia.attacks.table import group_score_inputs
    from mlmia.terms.scores import SCORE_COLUMNS

    old = tmp_path / "old.parquet"
    pd.DataFrame({"sample_id": ["a", "b"], "energy": [1.0, 2.0], "k": [10, 10]}).to_parquet(old)
    read = group_score_inputs({"members__masked": str(old)})[("members", "masked")]
    assert read.columns.tolist() == ["sample_id", "energy", "patterns"] and read["patterns"].tolist() == [10, 10]
    assert "patterns" in SCORE_COLUMNS and "k" not in SCORE_COLUMNS
