"""The overfitting experiment of Helali et al. (TSD 2020, Figure 2): its design from the config,
the trend test after the validation minimum, the distance from the maximum there, and the
finding, on constructed curves whose answers are computed by hand
(mlmia.memorization.overfitting)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO

from mlmia.memorization import dexposure as dx
from mlmia.memorization import overfitting as of
from mlmia.terms.schema import defaults as schema_defaults
from mlmia.terms.schema import schema_path, validate

T_975_2DF = 4.302652729911275  # the 97.5% quantile of Student's t with 2 degrees of freedom
EPOCHS = [2, 4, 6, 8, 10]


def _runs(curves: list[dict], ceiling: dict[str, float]) -> pd.DataFrame:
    """Overfitting runs: curves[seed] = {"valid": [loss per epoch of EPOCHS], class: [d-exposure
    per epoch]}; each class's ceiling log2 |C_i| from `ceiling`."""
    rows = []
    for seed, curve in enumerate(curves):
        for i, epoch in enumerate(EPOCHS):
            for cls in ceiling:
                rows.append(dict(setting="overfit", seed=seed, repetitions=16, epoch=epoch, **{"class": cls},
                                 d_exposure=curve[cls][i], max_d_exposure=ceiling[cls], train_loss=0.01,
                                 valid_loss=curve["valid"][i], f1=0.9))  # fmt: skip
    return pd.DataFrame(rows)


# the validation loss is least at epoch 4 (seeds 0 and 2) and at epoch 6 (seed 1)
VALID = {0: [0.5, 0.3, 0.35, 0.4, 0.45], 1: [0.5, 0.4, 0.3, 0.35, 0.4], 2: [0.5, 0.3, 0.35, 0.4, 0.45]}
BEST = {0: 4, 1: 6, 2: 4}
GROWTH = {0: 0.10, 1: 0.20, 2: 0.15}  # GROW's bits per epoch after the minimum


def _grow_and_flat() -> pd.DataFrame:
    """GROW: 0 at epoch 2, 1.0 at e*, then 1.0 + GROWTH * (epoch - e*); FLAT: 0 at epoch 2, 3.0
    from e* on (1.0 in between). Both rise before e*, so a slope over every epoch would be > 0."""
    curves = []
    for seed in range(3):
        best = BEST[seed]
        grow = [0.0 if e < best else 1.0 + GROWTH[seed] * (e - best) for e in EPOCHS]
        flat = [0.0 if e == 2 else 1.0 if e < best else 3.0 for e in EPOCHS]
        curves.append({"valid": VALID[seed], "GROW": grow, "FLAT": flat})
    return _runs(curves, {"GROW": 6.0, "FLAT": 3.0})


def test_ols_slope_by_hand():
    # x mean 8, y mean 5/3: sum dx*dy = (-4)(-2/3) + 0 + 4(1/3) = 4, sum dx^2 = 32
    assert of.ols_slope([4, 8, 12], [1, 2, 2]) == pytest.approx(0.125)
    assert of.ols_slope([1, 2], [5, 3]) == pytest.approx(-2.0)
    assert math.isnan(of.ols_slope([3], [1.0])) and math.isnan(of.ols_slope([2, 2], [1.0, 3.0]))
    assert (of.p_text(0.0004), of.p_text(0.0126), of.p_text(float("nan"))) == ("< 0.001", "0.013", "")


def test_a_curve_that_keeps_growing_after_its_minimum_is_found_growing():
    trends = of.seed_trends(_grow_and_flat())
    assert set(trends["class"]) == {"GROW", "FLAT", "mean"}
    by = trends.set_index(["class", "seed"])
    for seed in range(3):
        assert by.loc[("GROW", seed), "best_epoch"] == BEST[seed] and by.loc[("GROW", seed), "passed"]
        # per 100 epochs; the points before e* are left out (with them FLAT's slope would be > 0)
        assert by.loc[("GROW", seed), "slope"] == pytest.approx(100 * GROWTH[seed])
        assert by.loc[("FLAT", seed), "slope"] == pytest.approx(0.0, abs=1e-12)
        assert by.loc[("mean", seed), "slope"] == pytest.approx(50 * GROWTH[seed])
        assert by.loc[("GROW", seed), "n_after"] == len([e for e in EPOCHS if e >= BEST[seed]])
        # the distance from the maximum at e*: GROW reaches its run maximum at epoch 10
        assert by.loc[("GROW", seed), "below_run_max"] == pytest.approx(GROWTH[seed] * (10 - BEST[seed]))
        assert by.loc[("GROW", seed), "below_ceiling"] == pytest.approx(6.0 - 1.0)
        assert by.loc[("FLAT", seed), "below_run_max"] == 0 and by.loc[("FLAT", seed), "below_ceiling"] == 0
    summary = of.trend_summary(trends).set_index("class")
    grow = summary.loc["GROW"]
    # slopes 10, 20, 15: mean 15, standard deviation 5
    half = T_975_2DF * 5 / math.sqrt(3)
    assert (grow["slope"], grow["slope_ci_low"], grow["slope_ci_high"]) == pytest.approx((15, 15 - half, 15 + half))
    t = 15 / (5 / math.sqrt(3))
    # two-sided p of Student's t with 2 df, in closed form: 1 - t / sqrt(2 + t^2)
    assert (grow["t"], grow["p"]) == pytest.approx((t, 1 - t / math.sqrt(2 + t * t)))
    distances = [GROWTH[s] * (10 - BEST[s]) for s in range(3)]  # 0.6, 0.8, 0.9
    sd = float(np.std(distances, ddof=1))
    assert (grow["below_run_max"], grow["below_run_max_ci_high"]) == pytest.approx(
        (np.mean(distances), np.mean(distances) + T_975_2DF * sd / math.sqrt(3))
    )
    assert grow["best_epochs"] == "4, 6, 4" and (grow["n_seeds"], grow["n_passed"]) == (3, 3)
    # the finding: the model first, then each class
    found = {f.scope.split(", ")[1]: f for f in of.findings(_grow_and_flat())}
    assert list(found) == ["the model (mean over the classes)", "GROW", "FLAT"]
    assert (found["GROW"].verdict, found["GROW"].holds, found["GROW"].n) == ("separated", False, 3)
    model = found["the model (mean over the classes)"]
    assert (model.verdict, model.holds) == ("separated", False)
    assert model.difference == pytest.approx(7.5) and model.difference_ci_low == pytest.approx(7.5 - half / 2)
    # a curve flat after its minimum is not found growing; it stood at its maximum and ceiling there
    flat = found["FLAT"]
    assert (flat.verdict, flat.holds) == ("not separated", True)
    assert "0.00 [0.00, 0.00] bits below the run's maximum" in flat.note and "below the ceiling 3.00" in flat.note


def test_a_flat_noisy_curve_is_not_found_growing():
    # after e* = 4: values 3.0, 3.1, 2.9, 3.0 at epochs 4, 6, 8, 10: dx -3, -1, 1, 3, dy 0, .1, -.1, 0,
    # slope -0.2 / 20 = -0.01 per epoch (-1 per 100); mirrored (+1) in seed 1
    down, up = [0.0, 3.0, 3.1, 2.9, 3.0], [0.0, 3.0, 2.9, 3.1, 3.0]
    curves = [{"valid": VALID[0], "NOISY": c} for c in (down, up, down)]
    runs = _runs(curves, {"NOISY": 5.0})
    trends = of.seed_trends(runs)
    noisy = trends[trends["class"] == "NOISY"]
    assert list(noisy["slope"]) == pytest.approx([-1.0, 1.0, -1.0])
    (found, *_) = [f for f in of.findings(runs) if f.scope.endswith("NOISY")]
    sd = math.sqrt(((2 / 3) ** 2 * 2 + (4 / 3) ** 2) / 2)  # of -1, 1, -1 around -1/3
    assert found.difference == pytest.approx(-1 / 3)
    assert found.difference_ci_high == pytest.approx(-1 / 3 + T_975_2DF * sd / math.sqrt(3))
    assert (found.verdict, found.holds) == ("not separated", True)
    assert f"growth faster than {found.difference_ci_high:.2f} bits per 100 epochs is excluded" in found.note


def test_a_minimum_at_the_last_checkpoint_is_not_resolvable():
    falling = [0.5, 0.4, 0.3, 0.2, 0.1]  # seed 1's validation loss never turns
    curves = [{"valid": VALID[0] if s != 1 else falling, "A": [0.0, 1.0, 2.0, 3.0, 4.0]} for s in range(3)]
    runs = _runs(curves, {"A": 5.0})
    trends = of.seed_trends(runs).set_index(["class", "seed"])
    assert not trends.loc[("A", 1), "passed"] and math.isnan(trends.loc[("A", 1), "slope"])
    found = of.findings(runs)[0]
    assert (found.verdict, found.holds, found.n) == ("not resolvable", False, 2)
    assert found.note.startswith("not reached: the validation loss passed its minimum in 2 of 3 seeds")
    one = of.findings(_runs(curves[:1], {"A": 5.0}))[0]  # one seed: no interval
    assert one.verdict == "not resolvable" and "1 seed: no interval" in one.note


def test_designs_from_the_schema_defaults():
    defaults = schema_defaults("dexposure")  # what an empty dexposure: section resolves to
    # the paper's Figure 2: 16 insertions into 10% of the data; weight decay none; at least 8 seeds
    assert {k: defaults["overfit"][k] for k in ("fraction", "repetitions", "weight_decay")} == {
        "fraction": 0.1, "repetitions": 16, "weight_decay": 0.0}  # fmt: skip
    assert defaults["overfit"]["seeds"] >= 8
    design = of.overfit_design(defaults)
    assert design["checkpoints"] == list(range(5, 151, 5))
    assert (design["lr_decay"], design["dropout"], design["fraction"]) == (False, 0.0, 0.1)
    assert design["training"] == {"batch_size": 16, "lr": 0.001, "warmup_ratio": 0.06, "weight_decay": 0.0}
    assert design["model"] == {"hidden_size": 128, "num_layers": 2, "num_heads": 2, "intermediate_size": 512,
                               "max_length": 64, "dropout": 0.1}  # fmt: skip
    assert of.overfit_runs(defaults) == [(seed, 16) for seed in range(8)]
    # the main experiment keeps its design (the taggers' params of earlier runs)
    assert dx.main_design(defaults) == {"model": defaults["model"], "training": defaults["training"],
                                        "checkpoints": [2, 4, 8], "lr_decay": True, "dropout": None,
                                        "fraction": 1.0}  # fmt: skip
    assert dx.main_runs(defaults) == [(s, r) for s in range(3) for r in (0, 4, 16, 64, 128, 256)]
    # the CI world: two overfitting seeds, few epochs
    ci = validate(yaml.safe_load((REPO / "config" / "ci.yaml").read_text()), schema_path("config"))["dexposure"]
    assert len(of.overfit_runs(ci)) == 2
    assert of.overfit_checkpoints(ci["overfit"]) == [3, 6, 9, 12]
    assert of.overfit_checkpoints({"epochs": 7, "every": 3}) == [3, 6, 7]
