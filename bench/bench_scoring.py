"""Benchmark the energy scorer on random BERTs (nothing downloaded).

Builds random BertForMaskedLM models (default: 2 layers x 128 wide and 4 x 256, a
3k WordPiece vocabulary), scores synthetic samples of 10-60 tokens with the masked energy
(K = 10) and the normalized energy, and reports samples/s, tokens/s (content tokens of the
masked copies) and the achieved GFLOP/s (useful FLOPs: encoder on unpadded copies, LM
head on masked positions), next to the simple oracle's speed on a subset.

    .venv/bin/python bench/bench_scoring.py                      # defaults
    .venv/bin/python bench/bench_scoring.py --models 2x128 --samples 200 --token-budget 4096 8192
    .venv/bin/python bench/bench_scoring.py --json results/bench_scoring.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import string
import time

import numpy as np
import pandas as pd
import torch

from mlmia.scoring.energy import score_samples, score_samples_oracle
from mlmia.scoring.masks import n_masked


def build_tokenizer(vocab_size: int, seed: int = 0):
    from transformers import BertTokenizerFast

    rng = np.random.default_rng(seed)
    words: set[str] = set()
    letters = np.array(list(string.ascii_lowercase))
    while len(words) < vocab_size - 5:
        words.add("".join(rng.choice(letters, int(rng.integers(3, 9)))))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(words)
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=512)
    return tok, sorted(words)


def build_model(layers: int, hidden: int, vocab_size: int, seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
    )
    return BertForMaskedLM(cfg).eval()


def synthetic_samples(words: list[str], n: int, lo: int, hi: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(lo, hi + 1, n)
    texts = [" ".join(rng.choice(words, int(t))) for t in lengths]
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "text": texts})


def useful_flops(
    lengths: np.ndarray, copies: np.ndarray, masked: np.ndarray, layers: int, hidden: int, vocab: int
) -> float:
    """FLOPs of the work that has to be done: encoder on every copy (no padding), head on masked tokens."""
    seq = lengths + 2  # [CLS] and [SEP]
    per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * 4 * hidden)
    attention = 2 * 2 * seq * seq * hidden  # QK^T and AV per sequence per layer
    encoder = (copies * (seq * per_token_layer + attention)).sum() * layers
    head = (copies * masked).sum() * (2 * hidden * hidden + 2 * hidden * vocab)
    return float(encoder + head)


def timed(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def interleaved_arguments(doc: str) -> argparse.ArgumentParser:
    """The options of the interleaved A/B scorer benchmarks (bench_evidence.py, bench_attention.py)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["2x128", "4x256"], help="LAYERSxHIDDEN")
    parser.add_argument("--vocab", type=int, default=3000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--patterns", type=int, default=10, help="K, masking patterns per sample")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the rows here too")
    return parser


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["2x128", "4x256"], help="LAYERSxHIDDEN, e.g. 2x128")
    ap.add_argument("--vocab", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--min-tokens", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=60)
    ap.add_argument("--patterns", type=int, default=10, help="K, masking patterns per sample")
    ap.add_argument("--token-budget", type=int, nargs="+", default=[None], help="one or more budgets to compare")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--oracle-samples", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--energies", nargs="+", default=["masked", "normalized"])
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    tok, words = build_tokenizer(args.vocab)
    df = synthetic_samples(words, args.samples, args.min_tokens, args.max_tokens)
    lengths = np.array([len(x) for x in tok(df.text.tolist(), add_special_tokens=False)["input_ids"]])
    print(
        f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(
        f"{args.samples} samples, {lengths.min()}-{lengths.max()} tokens (mean {lengths.mean():.1f}), vocab {args.vocab}, K={args.patterns}"
    )
    results = []
    for spec in args.models:
        layers, hidden = map(int, spec.lower().split("x"))
        model = build_model(layers, hidden, args.vocab)
        score_samples(model, tok, df.head(8), patterns=args.patterns)  # warm-up (and the head check)
        for energy in args.energies:
            if energy == "masked":
                copies = np.array([min(args.patterns, math.comb(int(t), n_masked(int(t), "ceil"))) for t in lengths])
                masked = np.array([n_masked(int(t), "ceil") for t in lengths])
            else:
                copies, masked = lengths.copy(), np.ones_like(lengths)
            flops = useful_flops(lengths, copies, masked, layers, hidden, args.vocab)
            for budget in args.token_budget:
                sec, out = timed(
                    lambda model=model, energy=energy, budget=budget: score_samples(
                        model,
                        tok,
                        df,
                        energy=energy,
                        patterns=args.patterns,
                        batch_size=args.batch_size,
                        token_budget=budget,
                    ),
                    args.repeats,
                )
                row = {
                    "model": spec,
                    "energy": energy,
                    "token_budget": budget,
                    "samples": len(df),
                    "seconds": round(sec, 3),
                    "samples_per_s": round(len(df) / sec, 1),
                    "tokens_per_s": round(float((copies * (lengths + 2)).sum()) / sec),
                    "gflop_per_s": round(flops / sec / 1e9, 1),
                }
                n_or = min(args.oracle_samples, len(df))
                if n_or:
                    osec, oout = timed(
                        lambda model=model, energy=energy, n_or=n_or: score_samples_oracle(
                            model, tok, df.head(n_or), energy=energy, patterns=args.patterns
                        ),
                        1,
                    )
                    row["oracle_samples_per_s"] = round(n_or / osec, 1)
                    row["speedup_vs_oracle"] = round(row["samples_per_s"] / row["oracle_samples_per_s"], 1)
                    row["max_abs_diff_vs_oracle"] = float(
                        np.abs(out.energy.to_numpy()[:n_or] - oout.energy.to_numpy()).max()
                    )
                results.append(row)
                print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": torch.get_num_threads(), "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
