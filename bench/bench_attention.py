"""Which attention kernel the scorer should run (issue 14, item 3: the fastest that gives the
same energies).

Scores the same synthetic samples with the same random BERT under each attention
implementation transformers offers on CPU for BERT (`eager`: matmul, softmax, matmul;
`sdpa`: torch's scaled_dot_product_attention, what a model loads with by default),
interleaved per repeat so that a machine's changing load stays out of the ratio, and reports
the median seconds and the largest energy difference from `eager`.

    .venv/bin/python bench/bench_attention.py                       # 2x128 and 4x256, 3k vocabulary
    .venv/bin/python bench/bench_attention.py --threads 2 --json attention.json
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
import torch
from bench_scoring import build_model, build_tokenizer, interleaved_arguments, synthetic_samples

from mlmia.scoring.energy import score_samples

KERNELS = ("eager", "sdpa")


def main(argv=None) -> None:
    args = interleaved_arguments(__doc__).parse_args(argv)
    torch.set_num_threads(args.threads)
    tok, words = build_tokenizer(args.vocab)
    df = synthetic_samples(words, args.samples, 10, 60)
    rows = []
    for spec in args.models:
        layers, hidden = map(int, spec.lower().split("x"))
        model = build_model(layers, hidden, args.vocab)
        loaded_with = model.config._attn_implementation
        for energy in ("masked", "normalized"):
            times = {kernel: [] for kernel in KERNELS}
            energies = {}
            for _ in range(args.repeats):
                for kernel in KERNELS:
                    model.set_attn_implementation(kernel)
                    if model.bert.encoder.layer[0].attention.self.config._attn_implementation != kernel:
                        raise RuntimeError(f"the model did not switch to the {kernel} kernel")
                    start = time.perf_counter()
                    out = score_samples(model, tok, df, energy=energy, patterns=args.patterns)
                    times[kernel].append(time.perf_counter() - start)
                    energies[kernel] = out.set_index("sample_id")["energy"].sort_index().to_numpy()
            model.set_attn_implementation(loaded_with)
            medians = {kernel: statistics.median(times[kernel]) for kernel in KERNELS}
            row = {
                "model": spec,
                "vocab": args.vocab,
                "energy": energy,
                "samples": args.samples,
                "threads": args.threads,
                "default_kernel": loaded_with,
                **{f"seconds_{kernel}": round(medians[kernel], 3) for kernel in KERNELS},
                "sdpa_speedup": round(medians["eager"] / medians["sdpa"], 3),
                "max_abs_energy_diff": float(np.max(np.abs(energies["sdpa"] - energies["eager"]))),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
