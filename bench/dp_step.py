"""The cost of a DP-SGD step against a plain step of the same model and batch (issue 27, item 3).

For one batch of training lines and one model, the median wall time (and CPU time) of:

- ``plain``: the plain step (`mlmia.models.training.masked_lm_loss`, backward, AdamW),
  the batch's lines in the length chunks the ghost path uses, their gradients accumulated (the
  plain step's length-grouped batches carry as little padding);
- ``per_sample``: a DP-SGD step with Opacus' per-sample gradients (hooks), every parameter trained
  (the word embeddings too: the only path while they are tied and trained), the whole batch
  padded to its longest line as DP-SGD's step runs it;
- ``plain, frozen``: the plain step with the word embeddings frozen (`freeze: [word_embeddings]`);
- ``ghost, frozen``: a DP-SGD step with ghost clipping on that model, in length chunks
  (`mlmia.defences.clipping.ghost_clipped_sum`: the DP targets' path);

each DP step as `mlmia.defences.dp_sgd.DpSgdStep` takes it (the rows' losses of
`per_unit_loss`, clipping, noise, AdamW), on the same masks. The ratio that matters is a DP step
against the plain step of the same model: ``ghost, frozen`` / ``plain, frozen``.

    .venv/bin/python bench/dp_step.py --model results/default/models/ref_general \\
        --text results/default/corpus/dp_private_text.parquet --batch 1024 --threads 1 --out docs/dp_step.md
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import pandas as pd
import torch
from torch.utils.data import DataLoader, TensorDataset

from mlmia.defences.clipping import ghost_clipped_sum, length_chunks, per_unit_loss, unregister_head_bias
from mlmia.defences.dp_sgd import quiet_opacus_warnings
from mlmia.models.batching import pad_rows
from mlmia.models.loading import load_tokenizer
from mlmia.models.objectives import make_objective
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.settings import TrainingSettings
from mlmia.models.training import initial_model, masked_lm_loss
from mlmia.report.markdown import markdown_table
from mlmia.study.resolve import resolved_settings

PATHS = ("plain", "per_sample", "plain, frozen", "ghost, frozen")


def settings(given: dict) -> dict:
    """A model's training settings: the config's defaults with `given` over them."""
    return TrainingSettings.from_entry(resolved_settings(given, "fp32")).as_dict()


def batch_of(text: Path, tokenizer, size: int, seed: int):
    """`size` lines drawn from the table, padded, with BERT's masks (the objective's)."""
    lines = pd.read_parquet(text, columns=["text"])["text"].sample(size, random_state=seed, replace=size > 0)
    ids = tokenizer(lines.tolist(), truncation=True, max_length=72)["input_ids"]
    input_ids = pad_rows(ids, tokenizer.pad_token_id)
    special = torch.isin(input_ids, torch.tensor(sorted(set(tokenizer.all_special_ids))))
    objective = make_objective(settings({}), tokenizer)
    batch = objective.mask(input_ids, special, torch.Generator().manual_seed(seed))
    attn = (input_ids != tokenizer.pad_token_id).long()
    pos = torch.arange(input_ids.shape[1]).unsqueeze(0).repeat(len(input_ids), 1)
    return objective, batch, attn, pos


def step_function(path: str, model_dir: Path, tokenizer, objective, batch, attn, pos):
    """One training step of `path` as a closure (the model and optimizer built once)."""
    from opacus import PrivacyEngine

    cfg = settings({"freeze": ["word_embeddings"] if "frozen" in path else []})
    model = initial_model(cfg, tokenizer, model_dir)
    model.train()
    optim, _ = adamw_with_schedule(model, lr=1e-4, weight_decay=0.01, warmup_ratio=0.0, total_steps=100)
    lengths = attn.sum(dim=1)
    chunks = [(torch.as_tensor(rows), int(lengths[rows].max())) for rows in length_chunks(lengths.numpy())]
    if path.startswith("plain"):

        def plain() -> None:
            optim.zero_grad(set_to_none=True)
            for rows, width in chunks:  # each chunk's loss weighted by its rows (the step's cost is what counts)
                part = batch.rows(rows, width)
                loss = masked_lm_loss(model, objective, part, attn[rows, :width], pos[rows, :width])
                (loss * len(rows) / len(attn)).backward()
            optim.step()

        return plain
    unregister_head_bias(model)
    loader = DataLoader(TensorDataset(torch.arange(len(attn))), batch_size=len(attn))
    common = {"module": model, "optimizer": optim, "data_loader": loader, "noise_multiplier": 1.0,
              "max_grad_norm": 1.0, "poisson_sampling": False}  # fmt: skip
    if path.startswith("ghost"):
        gsm, dp_optim, _, _ = PrivacyEngine().make_private(**common, grad_sample_mode="ghost",
                                                           criterion=torch.nn.CrossEntropyLoss())  # fmt: skip
    else:
        gsm, dp_optim, _ = PrivacyEngine().make_private(**common)

    trained = [p for p in gsm._module.parameters() if p.requires_grad]

    def private() -> None:
        dp_optim.zero_grad(set_to_none=True)
        if path.startswith("ghost"):
            ghost_clipped_sum(gsm, dp_optim, trained, objective, batch, attn, pos, "cpu")
        else:
            per_unit_loss(gsm._module, objective, batch, attn, pos).mean().backward()
        dp_optim.step()

    return private


def time_steps(step, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `repeats` steps after one warm-up step."""
    step()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved BertForMaskedLM (the public model)")
    parser.add_argument("--text", type=Path, required=True, help="a training-text table (column text)")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    quiet_opacus_warnings()
    tokenizer = load_tokenizer(args.model)
    objective, batch, attn, pos = batch_of(args.text, tokenizer, args.batch, args.seed)
    times = {}
    for path in PATHS:
        times[path] = time_steps(step_function(path, args.model, tokenizer, objective, batch, attn, pos), args.repeats)
    rows = []
    for path in PATHS:
        same_model = "plain, frozen" if "frozen" in path else "plain"
        wall, cpu = times[path]
        rows.append([path, f"{wall:.3f}", f"{cpu:.3f}", f"{wall / times[same_model][0]:.2f}x"])
    text = "\n".join([
        f"Batch of {args.batch} lines, {args.threads} thread(s), median of {args.repeats} steps; model {args.model.name}.",
        "",
        markdown_table(["step", "wall (s)", "CPU (s)", "against the plain step of the same model"], rows),
    ])  # fmt: skip
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
