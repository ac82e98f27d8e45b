"""The black-box canaries' design (issue 43, item 2): how many copies of a canary's new token its
line holds (`dp_audit.canaries.repeat`), measured on a DP recipe of the default world.

For each `--repeat` R, `--count` canaries of the config's template (`mlmia.defences.token_canaries`,
one new token each, R copies, inclusion bits from `--seed`) join the DP private text
(`mlmia.world.dp_corpus`, `--patients` extra patients) and the canaries' tokenizer, a model is
trained from the recipe (`models:` keys, as in bench/dp_recipes.py), and the library's score
(`token_scores`: each copy masked in turn, the others visible) feeds the library's one-run audit
(`one_run_canary_audit`, guess share `--guess-share`, at the training's δ, confidence 0.95): the
AUC of the score (included against not, scikit-learn's `roc_auc_score`), the guesses right and
the f-DP lower bound on ε. The run's audit then uses another seed than the one the design was
chosen on (config/config.yaml: seed 1; this bench's default: 0).

    PYTHONPATH=src .venv/bin/python bench/token_canary_design.py --run results/default --patients 0 \\
        --recipe 'init: ref_general, epochs: 20, batch_size: 256, lr: 0.003, crop_prob: 0, dp: {epsilon: 8}' \\
        --repeat 1 --repeat 8 --work token_canaries --out docs/token_canary_design.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import yaml
from sklearn.metrics import roc_auc_score

from mlmia.defences.audit import one_run_canary_audit
from mlmia.defences.token_canaries import canary_tokenizer, draw_token_canaries, token_scores, with_included_canaries
from mlmia.models.loading import load_mlm, load_tokenizer
from mlmia.report.markdown import markdown_table
from mlmia.study.resolve import resolved_settings
from mlmia.training_job import train_model
from mlmia.world.dp_corpus import dp_private_text

TEMPLATE = "Patient MRN is {secret} ."  # config/config.yaml's canaries.template


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a default run's results folder")
    parser.add_argument("--patients", type=int, default=0, help="extra patients of the DP private text")
    parser.add_argument("--recipe", required=True, help="YAML mapping of model settings (with dp)")
    parser.add_argument("--repeat", type=int, action="append", required=True, help="copies per canary (repeatable)")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--guess-share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0, help="the canaries' inclusion bits")
    parser.add_argument("--work", type=Path, default=Path("token_canaries"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)
    private = dp_private_text(pd.read_parquet(args.run / "corpus" / "train_target.parquet"),
                              pd.read_parquet(args.run / "corpus" / "world.parquet"), {}, {"patients": args.patients})  # fmt: skip
    rows = []
    for repeat in args.repeat:
        recipe = yaml.safe_load("{" + args.recipe + "}")
        init = args.run / "models" / recipe.pop("init")
        canaries = draw_token_canaries(TEMPLATE, args.count, 1, args.seed, repeat)
        tokenizer_dir = args.work / f"tokenizer_{args.count}"
        canary_tokenizer(load_tokenizer(args.run / "models" / "tokenizer"), canaries).save_pretrained(
            str(tokenizer_dir)
        )
        text = with_included_canaries(private, canaries)
        out = args.work / f"repeat{repeat}_seed{args.seed}"
        cpu = time.process_time()
        info = train_model(text["text"].tolist(), tokenizer_dir, out, config=resolved_settings(recipe, "fp32"), init_dir=init,
                           threads=args.threads,
                           device="cpu", groups=text["group_id"].tolist(), name=f"repeat{repeat}")  # fmt: skip
        cpu = time.process_time() - cpu
        model, tokenizer = load_mlm(out, device="cpu")
        scores = token_scores(model, tokenizer, canaries)
        included = canaries["included"].to_numpy().astype(bool)
        dp = info.get("dp") or {}
        audit = one_run_canary_audit(scores, included, args.guess_share, delta=dp.get("delta", 0.0), beta=0.05)
        rows.append({"repeat": repeat, "lines": len(text), "inserted": int(included.sum()), "epsilon": dp.get("epsilon"),
                     "auc": roc_auc_score(included, scores), "right": audit["correct"], "guesses": audit["guesses"],
                     "bound": audit["epsilon_lb"], "cpu_s": cpu})  # fmt: skip
        print(rows[-1], flush=True)
    table = markdown_table(
        ["copies", "training lines (canaries in)", "accountant ε", "score AUC", "guesses right", "f-DP bound (/ε)",
         "training CPU-s"],
        [[r["repeat"], f"{r['lines']} ({r['inserted']})", "no DP" if r["epsilon"] is None else f"{r['epsilon']:.2f}",
          f"{r['auc']:.3f}", f"{r['right']} / {r['guesses']}",
          f"{r['bound']:.3f}" + ("" if r["epsilon"] is None else f" ({r['bound'] / r['epsilon']:.2f})"),
          f"{r['cpu_s']:.0f}"] for r in rows],
    )  # fmt: skip
    if args.out:
        args.out.write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
