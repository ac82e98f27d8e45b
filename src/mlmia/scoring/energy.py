"""Energies of samples under a masked language model (paper Eq. 2, the normalized variant,
and the word-aware pseudo-log-likelihood).

Masked energy: for a sample with T content tokens, l = ceil(0.15 T); a masking pattern
replaces l content positions by the mask token and its value is the mean (or sum)
cross-entropy of the original tokens there; the energy is the mean over K patterns
(every pattern, in lexicographic order, when K >= C(T, l)). Normalized energy: every
content position masked alone; the energy is the mean cross-entropy over positions.
PLL-word-l2r energy (Kauf and Ivanova, "A Better Way to Do Masked Language Model Scoring",
ACL 2023): every content position scored once, with it and the rest of its word to the
right masked (a word's later pieces do not give its earlier ones away); the energy is the
mean cross-entropy over positions. Progressive (SAMA's nested masks, each step scoring the tokens
it masks first) and ELBO (the masked-diffusion ELBO under a fixed schedule of masking ratios)
energies: their patterns and schedules are in `mlmia.scoring.schedules`; the energy is the mean
over their patterns too.

Per-token evidence, from the same forward passes: for every scored position, the true
token's log-probability, the mean and the variance of log p under the model's distribution
there (E_p[log p], Var_p[log p]: what Min-K%++ standardises by) and whether the top-1
prediction is the true token; lists per sample in pattern order (`token_*` columns).

Two implementations share tokenization and masks (`mlmia.scoring.prepared`; patterns from
`mlmia.scoring.schedules`, keyed on `mask_keys`):

- `score_samples`, the fast path (`mlmia.scoring.fast_path`): the masked copies of all samples are sorted by length
  and cut into batches under a token budget, the encoder runs once per batch and the LM
  head only on the masked positions; inference mode, bf16/fp16 autocast on CUDA, fp32 on
  CPU, cross-entropy in fp32. On CUDA without a batch size or token budget, the rows of a
  batch come from the free GPU memory (`batch_size_for_memory`); a batch that runs out of
  memory is halved and retried. Throughput is logged and returned (`ScoringStats`).
- `score_samples_oracle`, the test oracle: one sample and one pattern at a time, the full
  model forward `model(input_ids).logits`.

Output: one row per sample, in input order, with the columns in `SCORE_COLUMNS`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from mlmia.core.errors import UserError
from mlmia.core.io import atomic_path, read_samples
from mlmia.core.logs import get_logger
from mlmia.models.batching import eval_mode
from mlmia.models.loading import load_mlm, resolve_device
from mlmia.scoring.fast_path import run_fast, token_evidence
from mlmia.scoring.masks import n_masked
from mlmia.scoring.memory import batch_size_for_memory, sequence_bytes
from mlmia.scoring.prepared import REDUCTIONS, check_params, prepare, score_frame
from mlmia.scoring.schedules import SCHEDULE_KEYS
from mlmia.terms.scores import ENERGY_KINDS, SCORE_COLUMNS

log = get_logger(__name__)

THREADS_ENV = "MLMIA_NUM_THREADS"
#: the keyword defaults of the functions below, for a user or a test calling them directly: the
#: config schema's `scoring` section's and a tables spec experiment's energy kind, written out so
#: that no job reads the schema (tests/test_study.py pins them equal to it). A job passes every
#: setting (`mlmia.scoring.settings.ScoringSettings.score_arguments`) and relies on none of these.
SCORING = {
    "patterns": 10,
    "seed": 0,
    "reduction": "mean",
    "mask_count": "ceil",
    "precision": "auto",
    "batch_size": None,
    "truncate": False,
    "device": "auto",
    "progressive": {"steps": 4, "min_fraction": 0.05, "max_fraction": 0.5},
    "elbo": {"ratios": 5, "patterns": 2},
}
ENERGY = "masked"
PROGRESS_SECONDS = 30.0


def _default_name(model) -> str:
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    return Path(str(name).rstrip("/")).name if os.path.isdir(str(name)) else str(name)


@contextlib.contextmanager
def _threads(num_threads: int | None):
    """Use `num_threads` (or $MLMIA_NUM_THREADS) torch threads inside the block, then restore."""
    if num_threads is None and os.environ.get(THREADS_ENV, "").strip():
        try:
            num_threads = int(os.environ[THREADS_ENV])
        except ValueError as exc:
            raise UserError(f"{THREADS_ENV}={os.environ[THREADS_ENV]!r} is not an integer") from exc
    before = torch.get_num_threads()
    if num_threads is not None and num_threads > 0 and num_threads != before:
        torch.set_num_threads(int(num_threads))
        try:
            yield
        finally:
            torch.set_num_threads(before)
    else:
        yield


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


@dataclass(frozen=True)
class ScoringStats:
    """What one `score_samples` call did, for the job log. No texts."""

    n_samples: int
    n_sequences: int  # masked copies run through the model
    n_tokens: int  # tokens of all masked copies, special tokens included, no padding
    n_scored_tokens: int  # masked positions scored
    n_batches: int
    seconds: float  # the whole call: tokenization, masks, forward passes
    device: str
    dtype: str  # of the forward pass (autocast on CUDA)
    batch_size: int  # the largest batch run (masked copies)
    batch_policy: str  # how batches were cut
    oom_halvings: int = 0

    @property
    def samples_per_s(self) -> float:
        return self.n_samples / max(self.seconds, 1e-9)

    @property
    def sequences_per_s(self) -> float:
        return self.n_sequences / max(self.seconds, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / max(self.seconds, 1e-9)

    @property
    def scored_tokens_per_s(self) -> float:
        return self.n_scored_tokens / max(self.seconds, 1e-9)

    def as_dict(self) -> dict:
        out = asdict(self)
        for name in ("samples_per_s", "sequences_per_s", "tokens_per_s", "scored_tokens_per_s"):
            out[name] = getattr(self, name)
        return out

    def summary(self) -> str:
        return (
            f"scored {self.n_samples} samples ({self.n_sequences} sequences, {self.n_tokens} tokens, "
            f"{self.n_scored_tokens} scored tokens) in {self.seconds:.1f} s: {self.samples_per_s:.1f} samples/s, "
            f"{self.sequences_per_s:.1f} sequences/s, {self.tokens_per_s:.0f} tokens/s, "
            f"{self.scored_tokens_per_s:.0f} scored tokens/s; device {self.device}, {self.dtype}, "
            f"batch size up to {self.batch_size} ({self.batch_policy}), {self.n_batches} batches"
            + (f", {self.oom_halvings} out-of-memory halvings" if self.oom_halvings else "")
        )


def _schedule(energy: str, schedule: Mapping | None) -> Mapping | None:
    """The schedule given, or (None) the default one of a progressive or ELBO energy: a schedule
    given is taken whole (`mlmia.scoring.schedules.check_schedule`)."""
    if schedule is None and energy in SCHEDULE_KEYS:
        return dict(SCORING[energy])
    return schedule


# --------------------------------------------------------------------------- fast path


def score_samples(
    model,
    tokenizer,
    samples: pd.DataFrame,
    *,
    energy: str = ENERGY,
    patterns: int = SCORING["patterns"],
    seed: int = SCORING["seed"],
    reduction: str = SCORING["reduction"],
    batch_size: int | None = SCORING["batch_size"],
    device: str | torch.device | None = None,
    model_name: str | None = None,
    token_budget: int | None = None,
    num_threads: int | None = None,
    progress_seconds: float = PROGRESS_SECONDS,
    return_stats: bool = False,
    mask_count: str = SCORING["mask_count"],
    precision: str = SCORING["precision"],
    truncate: bool = SCORING["truncate"],
    schedule: Mapping | None = None,
) -> pd.DataFrame | tuple[pd.DataFrame, ScoringStats]:
    """Score an in-memory sample table (`sample_id`, `text`) with a loaded model: one row per sample.

    `batch_size` caps the masked copies per forward pass. Without it, batches are cut by a
    token budget (padded rows x length; `token_budget`, default per device type), except
    on CUDA without a `token_budget`, where the rows per batch come from the free GPU
    memory (`batch_size_for_memory`, logged). A batch that runs out of memory is halved
    and retried (logged). `device` None keeps the model where it is; otherwise the model
    is moved there. Throughput is logged at the end; `return_stats` also returns it as
    (scores, ScoringStats). `schedule`: the settings of a progressive or ELBO energy, every key
    (`mlmia.scoring.schedules.SCHEDULE_KEYS`; None: the config schema's default schedule).
    """
    t0 = time.perf_counter()
    schedule = _schedule(energy, schedule)
    schedule = check_params(energy, patterns, seed, reduction, batch_size, mask_count, precision, schedule)
    if token_budget is not None and int(token_budget) < 1:
        raise UserError(f"the token budget must be >= 1, got {token_budget}")
    if device is not None:
        dev = resolve_device(device)
        if _model_device(model) != dev:
            model.to(dev)
    dev = _model_device(model)
    model_name = model_name or _default_name(model)
    prep = prepare(model, tokenizer, samples, energy, patterns, seed, mask_count, truncate, schedule, reduction)
    with _threads(num_threads), eval_mode(model):
        values, run = run_fast(model, prep, reduction, batch_size, token_budget, dev, progress_seconds, precision)
    evidence = run.pop("evidence", [])
    stats = ScoringStats(n_samples=len(prep.ids), seconds=time.perf_counter() - t0, device=str(dev), **run)
    log.info("%s", stats.summary())
    scores = score_frame(prep, values, evidence, energy, seed, model_name)
    return (scores, stats) if return_stats else scores


# --------------------------------------------------------------------------- oracle


def score_samples_oracle(
    model,
    tokenizer,
    samples: pd.DataFrame,
    *,
    energy: str = ENERGY,
    patterns: int = SCORING["patterns"],
    seed: int = SCORING["seed"],
    reduction: str = SCORING["reduction"],
    model_name: str | None = None,
    mask_count: str = SCORING["mask_count"],
    truncate: bool = SCORING["truncate"],
    schedule: Mapping | None = None,
) -> pd.DataFrame:
    """The deliberately simple reference: one sample, one pattern, one full forward at a time."""
    schedule = _schedule(energy, schedule)
    schedule = check_params(energy, patterns, seed, reduction, None, mask_count, "fp32", schedule)
    model_name = model_name or _default_name(model)
    prep = prepare(model, tokenizer, samples, energy, patterns, seed, mask_count, truncate, schedule, reduction)
    dev = _model_device(model)
    per_pattern, evidence = [], []
    with torch.inference_mode(), eval_mode(model):
        for i, (ids, patterns) in enumerate(zip(prep.ids, prep.patterns)):
            original = torch.tensor(ids, device=dev).unsqueeze(0)
            values, tokens = [], {"logp": [], "mean": [], "var": [], "top1": []}
            for j, pattern in enumerate(patterns):
                pos = torch.tensor(pattern, device=dev)
                masked = original.clone()
                masked[0, torch.tensor(prep.masked(i, j), device=dev)] = prep.mask_id
                logits = model(masked).logits[0]
                ce = F.cross_entropy(logits[pos].float(), original[0, pos], reduction="none")
                value = ce.mean() if reduction == "mean" else ce.sum()
                values.append(float(value * prep.n_tokens[i] / len(pattern) if prep.per_sequence else value))
                for key, value in zip(tokens, token_evidence(logits[pos], original[0, pos])):
                    tokens[key].extend(value.cpu().numpy().tolist())
            per_pattern.append(np.array(values, dtype=np.float64))
            evidence.append(tokens)
    return score_frame(prep, per_pattern, evidence, energy, seed, model_name)


# --------------------------------------------------------------------------- files


#: samples scored and written per step of `score_file`: its peak memory stays flat in the corpus size
FILE_CHUNK_SAMPLES = 2048


def score_file(
    model: str,
    samples: str,
    out: str,
    energy: str = ENERGY,
    patterns: int = SCORING["patterns"],
    seed: int = SCORING["seed"],
    reduction: str = SCORING["reduction"],
    batch_size: int | None = SCORING["batch_size"],
    device: str = SCORING["device"],
    model_name: str | None = None,
    tokenizer: str | None = None,
    mask_count: str = SCORING["mask_count"],
    precision: str = SCORING["precision"],
    truncate: bool = SCORING["truncate"],
    chunk_samples: int = FILE_CHUNK_SAMPLES,
    schedule: Mapping | None = None,
) -> int:
    """Read samples, load the model (with `tokenizer` when it is not the model's own; see
    `load_mlm`), score, and write `out` (Parquet) atomically; returns the number of rows.

    Samples are scored and written `chunk_samples` at a time (one Parquet row group each), so
    the scores and per-token evidence of a large corpus are never all in memory. Masks depend
    on (seed, sample_id, patterns) only, so the chunking changes no score."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schedule = _schedule(energy, schedule)
    schedule = check_params(energy, patterns, seed, reduction, batch_size, mask_count, precision, schedule)
    df = read_samples(samples)
    mdl, tok = load_mlm(model, device, tokenizer=tokenizer)
    local = Path(str(model)).expanduser()
    # default label: a local directory's name, or the hub id as given
    label = model_name or (local.resolve().name if local.is_dir() else str(model))
    step = max(1, int(chunk_samples))
    with atomic_path(out) as tmp:
        writer = None
        try:
            for start in range(0, max(len(df), 1), step):
                part = score_samples(
                    mdl,
                    tok,
                    df.iloc[start : start + step],
                    energy=energy,
                    patterns=patterns,
                    seed=seed,
                    reduction=reduction,
                    batch_size=batch_size,
                    device=None,
                    model_name=label,
                    mask_count=mask_count,
                    precision=precision,
                    truncate=truncate,
                    schedule=schedule,
                )
                table = pa.Table.from_pandas(part, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table.cast(writer.schema))
        finally:
            if writer is not None:
                writer.close()
    log.info("wrote %d rows to %s", len(df), out)
    return len(df)


__all__ = [
    "ENERGY_KINDS",
    "SCORE_COLUMNS",
    "REDUCTIONS",
    "ScoringStats",
    "batch_size_for_memory",
    "n_masked",
    "score_file",
    "score_samples",
    "score_samples_oracle",
    "sequence_bytes",
]
