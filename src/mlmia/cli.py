"""The `mlmia` command line."""

from __future__ import annotations

import argparse
import sys

from mlmia.core.errors import UserError
from mlmia.core.logs import setup_logging
from mlmia.terms.schema import defaults

#: options renamed (one word per concept, as the config's keys: `mlmia.terms.schema.RENAMED`),
#: refused naming the new one: old option -> new option
RENAMED_OPTIONS = {"--masks": "--patterns"}


def _score(args: argparse.Namespace) -> None:
    from mlmia.core.io import check_output_path
    from mlmia.scoring.energy import score_file

    # before any work: the output must not be an input, a directory or unwritable
    check_output_path(args.out, [args.samples, args.model, args.tokenizer])

    score_file(
        model=args.model,
        samples=args.samples,
        out=args.out,
        energy=args.energy,
        patterns=args.patterns,
        seed=args.seed,
        reduction=args.reduction,
        batch_size=args.batch_size,
        device=args.device,
        model_name=args.model_name,
        tokenizer=args.tokenizer,
        mask_count=args.mask_count,
        precision=args.precision,
        truncate=args.truncate,
    )


def _convert(args: argparse.Namespace) -> None:
    from mlmia.models.loading import convert_checkpoint

    print(convert_checkpoint(args.src, args.dst, tokenizer=args.tokenizer))


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line form of every other error."""

    def error(self, message: str):
        self.exit(2, f"mlmia: error: {self.prog}: {message}\n")


class _Renamed(argparse.Action):
    """A renamed option (`RENAMED_OPTIONS`): refused, naming the new one, before any work."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise argparse.ArgumentError(self, f"renamed to {RENAMED_OPTIONS[option_string]}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mlmia", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    # the defaults are the config's (`scoring`) and a tables spec experiment's (the energy kind)
    scoring = defaults("scoring")
    score = sub.add_parser("score", help="energy of every sample under a masked language model")
    score.add_argument("--model", required=True, help="local model directory or hub id")
    score.add_argument("--samples", required=True, help="Parquet, CSV or JSONL with sample_id and text")
    score.add_argument("--out", required=True, help="output Parquet")
    score.add_argument(
        "--energy", choices=["masked", "normalized"], default=defaults("experiments", "*", schema="tables")["energy"]
    )
    score.add_argument(
        "--patterns",
        type=int,
        default=scoring["patterns"],
        help="K, the number of masking patterns (masked energy; config scoring.patterns)",
    )
    for old in RENAMED_OPTIONS:
        score.add_argument(old, action=_Renamed)
    score.add_argument("--seed", type=int, default=scoring["seed"])
    score.add_argument(
        "--reduction",
        choices=["mean", "sum"],
        default=scoring["reduction"],
        help="over the masked positions of a pattern",
    )
    score.add_argument(
        "--batch-size", type=int, default=scoring["batch_size"], help="masked copies per forward pass (default: chosen)"
    )
    score.add_argument("--device", choices=["auto", "cpu", "cuda"], default=scoring["device"])
    score.add_argument(
        "--model-name", default=None, help="label written in the `model` column (default: the path's name)"
    )
    score.add_argument(
        "--tokenizer", default=None, help="scoring tokenizer when not the model's own (directory or hub id)"
    )
    score.add_argument(
        "--mask-count",
        choices=["ceil", "floor"],
        default=scoring["mask_count"],
        help="masked tokens per pattern: ceil(0.15 T) (the paper's text) or floor (the authors' code)",
    )
    score.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16", "fp16"],
        default=scoring["precision"],
        help="compute dtype: auto = fp32 on CPU, bf16 (else fp16) on CUDA; bf16 also on CPU; fp16 CUDA only",
    )
    score.add_argument(
        "--truncate",
        action="store_true",
        help="cut samples longer than the model's maximum length (default: refuse them; a cut sample's score is its prefix's)",
    )
    score.set_defaults(func=_score)

    convert = sub.add_parser("convert", help="convert an old pytorch_pretrained_bert checkpoint to save_pretrained")
    convert.add_argument("src", help="directory with bert_config.json, pytorch_model.bin and vocab.txt")
    convert.add_argument("dst", help="new directory (must not exist or be empty)")
    convert.add_argument("--tokenizer", default=None, help="tokenizer when the checkpoint ships no vocab.txt")
    convert.set_defaults(func=_convert)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    try:
        args.func(args)
    except UserError as exc:
        print(f"mlmia: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run() -> None:
    """The `mlmia` console script: `main`, then the process ends without the interpreter's
    teardown of torch (about a second; `mlmia.core.runner.exit_without_teardown`)."""
    from mlmia.core.runner import exit_without_teardown

    exit_without_teardown(main())


if __name__ == "__main__":
    run()
