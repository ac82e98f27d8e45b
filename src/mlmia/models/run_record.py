"""The record of a training run, one for every model the library trains (`train_mlm`, DP-SGD and
the d-exposure tagger): the loss log, `train_log.csv` (epoch, step, loss, lr, seconds) and its
`train_curve.png`, and the summary, `train_info.json`: name, config, init_from, n_texts,
n_tokens, steps, epochs_run, final_loss, train_seconds, total_seconds, tokens_per_second,
threads, device, n_parameters, n_trainable_parameters (those not frozen), then what the run adds (DP-SGD its `dp` facts, a run that saved
checkpoints their directories)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

LOG_COLUMNS = ["epoch", "step", "loss", "lr", "seconds"]


class RunRecord:
    """A training run's record while it runs: create it when the job starts, `start` it when the
    training loop does, `add_loss` for each step's loss, `end_step` after each optimiser step,
    `finish` after the loop, `write` once the model is saved.

    The log has a row every `log_every` steps and at the last one: the mean of the losses added
    since the previous row (a step that adds none, as an empty DP-SGD batch, counts in no row;
    no row without a loss), the learning rate after the step and the seconds since `start`."""

    def __init__(self, name: str, log_every: int = 20) -> None:
        self.name = name
        self.log_every = int(log_every)
        self.rows: list[dict] = []
        self.total_steps = 0
        self.train_seconds = float("nan")
        self._job_start = time.time()
        self._loop_start = self._job_start
        self._loss_sum, self._loss_n = 0.0, 0

    def start(self, total_steps: int) -> None:
        self.total_steps = int(total_steps)
        self._loop_start = time.time()

    def add_loss(self, loss: float) -> None:
        self._loss_sum += loss
        self._loss_n += 1

    def end_step(self, epoch: int, step: int, lr: float) -> None:
        if step % self.log_every == 0 or step == self.total_steps:
            self._log(epoch, step, lr)

    def finish(self, epoch: int, step: int, lr: float) -> None:
        """The losses since the last row, as a last row; the training time ends here."""
        self._log(epoch, step, lr)
        self.train_seconds = time.time() - self._loop_start

    def _log(self, epoch: int, step: int, lr: float) -> None:
        if self._loss_n:
            self.rows.append({"epoch": epoch, "step": step, "loss": self._loss_sum / self._loss_n, "lr": lr,
                              "seconds": round(time.time() - self._loop_start, 3)})  # fmt: skip
        self._loss_sum, self._loss_n = 0.0, 0

    def write(
        self,
        out_dir: str | Path,
        *,
        config: dict,
        init_from,
        n_texts: int,
        n_tokens: int,
        steps: int,
        epochs_run: int,
        steps_per_epoch: int,
        threads: int,
        device,
        model,
        extra: dict | None = None,
        loss_label: str = "MLM loss (masked positions)",
    ) -> dict:
        """Write the log (`write_training_log`) and `train_info.json` into `out_dir`; returns the
        summary. tokens_per_second: `n_tokens` (one epoch's) x epochs' worth of steps / training time."""
        out_dir = Path(out_dir)
        log_df = write_training_log(self.rows, out_dir, self.name, loss_label)
        info = {
            "name": self.name,
            "config": config,
            "init_from": str(init_from) if init_from else None,
            "n_texts": n_texts,
            "n_tokens": n_tokens,
            "steps": steps,
            "epochs_run": epochs_run,
            "final_loss": float(log_df["loss"].iloc[-1]) if len(log_df) else float("nan"),
            "train_seconds": round(self.train_seconds, 2),
            "total_seconds": round(time.time() - self._job_start, 2),
            "tokens_per_second": round(n_tokens * steps / max(1, steps_per_epoch) / max(self.train_seconds, 1e-9), 1),
            "threads": int(threads),
            "device": str(device),
            "n_parameters": int(sum(p.numel() for p in model.parameters())),
            "n_trainable_parameters": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            **(extra or {}),
        }
        (out_dir / "train_info.json").write_text(json.dumps(info, indent=2, default=_json_number))
        return info


def write_training_log(
    rows: list[dict], out_dir: Path, title: str, loss_label: str = "MLM loss (masked positions)"
) -> pd.DataFrame:
    """The training log (epoch, step, loss, lr, seconds per logged step) as `train_log.csv` and
    `train_curve.png` in `out_dir` (made if missing); returns it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log_df = pd.DataFrame(rows, columns=LOG_COLUMNS)
    log_df.to_csv(out_dir / "train_log.csv", index=False)
    _plot_curve(log_df, out_dir / "train_curve.png", title, loss_label)
    return log_df


def _plot_curve(log_df: pd.DataFrame, path: Path, title: str, loss_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if len(log_df):
        ax.plot(log_df["step"], log_df["loss"], lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel(loss_label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _json_number(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
