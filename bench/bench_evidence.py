"""What the per-token evidence costs the scorer (issue: the attack zoo, item 1).

Scores the same synthetic samples with the same random BERT twice per repeat, interleaved: as
shipped (log p of the true token, E_p[log p], Var_p[log p] and top-1 at every scored
position), and with the evidence reduced to what the energy alone needs (log p of the true
token; the other three filled with zeros). The ratio of the medians is the evidence's share of
the scoring time. Interleaving keeps a machine's changing load out of the ratio.

    .venv/bin/python bench/bench_evidence.py                        # 2x128 and 4x256, 3k vocabulary
    .venv/bin/python bench/bench_evidence.py --models 12x768 --vocab 30522 --samples 100
"""

from __future__ import annotations

import json
import statistics
import time

import torch
from bench_scoring import build_model, build_tokenizer, interleaved_arguments, synthetic_samples

import mlmia.scoring.energy as energy_module
import mlmia.scoring.fast_path as fast_path


def energy_only(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The energy's own need: log p of the true token (as `token_evidence` computes it), nothing more."""
    true = torch.log_softmax(logits.float(), dim=-1).gather(1, target[:, None]).squeeze(1)
    zeros = torch.zeros_like(true)
    return true, zeros, zeros, torch.zeros_like(true, dtype=torch.bool)


def main(argv=None) -> None:
    args = interleaved_arguments(__doc__).parse_args(argv)
    torch.set_num_threads(args.threads)
    tok, words = build_tokenizer(args.vocab)
    df = synthetic_samples(words, args.samples, 10, 60)
    shipped = fast_path.token_evidence
    rows = []
    for spec in args.models:
        layers, hidden = map(int, spec.lower().split("x"))
        model = build_model(layers, hidden, args.vocab)
        for energy in ("masked", "normalized"):
            times = {"with": [], "without": []}
            for _ in range(args.repeats):
                for variant, function in (("with", shipped), ("without", energy_only)):
                    fast_path.token_evidence = function
                    try:
                        start = time.perf_counter()
                        energy_module.score_samples(model, tok, df, energy=energy, patterns=args.patterns)
                        times[variant].append(time.perf_counter() - start)
                    finally:
                        fast_path.token_evidence = shipped
            with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
            row = {
                "model": spec,
                "vocab": args.vocab,
                "energy": energy,
                "samples": args.samples,
                "threads": args.threads,
                "seconds_with_evidence": round(with_s, 3),
                "seconds_energy_only": round(without_s, 3),
                "overhead_percent": round(100 * (with_s / without_s - 1), 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
