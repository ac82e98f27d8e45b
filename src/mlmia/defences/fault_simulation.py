"""Faulty DP-SGD trainers simulated without training, and each check of the DP audit as a rule that
flags a white-box record or not: what `bench/dp_power.py` runs to measure the audit's power and
false-positive rate (docs/dp_power.md).

The model: a real DP-SGD trainer (`mlmia.defences.dp_sgd`) of n units with m gradient canaries
and e sentinels (`mlmia.defences.gradient_canaries`). At each of T steps it draws each data unit,
and each included canary, with probability q', clips every unit's gradient to L2 norm C', adds
N(0, s^2) to every coordinate and divides the sum by D'. A canary's gradient has norm `norm` x C
(10 C), so it is clipped to min(10 C, C'). The auxiliary parameter's privatised gradient is then

    x_t = (min(10 C, C') b_t + s N(0, 1)) / D'    on a canary's coordinate (b_t = 1: it joined step t),
    x_t = s N(0, 1) / D'                          on a sentinel (and on a canary not included),

and each step's data batch is Binomial(n, q'). The trainer's train_info.json records its claim:
sigma, q, n, T, the divisor D (the planned batch) and C, with the accountant's epsilon for (sigma,
q, T, delta). The auditor reads z = x D / C. A correct trainer has C' = C, s = sigma C, D' = D,
q' = q, so z = b + sigma N. A faulty trainer (`Trainer`) departs from it while its accountant
reports the claim:

- noise multiplier x k: s = k sigma C on every coordinate, sentinels and canaries alike:
  z = b + k sigma N;
- clipping norm x k, not accounted: units clipped to k C (k <= 10: the canary too), the noise
  still sigma C: z = k b + sigma N (one unit moves the sum by k C against noise sigma C: noise
  multiplier sigma / k); the sentinels see what a correct trainer's see;
- sampling rate x k, not accounted: data units and canaries drawn at k q, D unchanged;
- Opacus' divisor: D' = floor(n q) (Opacus' `expected_batch_size`, 242 at n = 1,210, q = 1/5)
  where the trainer plans D (256). Recording D while dividing by D' (what a trainer that writes
  its plan and leaves Opacus' divisor in place does): z = (D / D') (b + sigma N), the noise and
  the canary's amplitude both scaled, the noise multiplier unchanged. Recording D' itself:
  z = b + sigma N, the correct trainer's observations. Either way each unit's mechanism at a
  given n is the claimed one; what the divisor breaks is the data set's size: floor(n q)
  changes between neighbouring data sets where n q crosses an integer (at n = 1,210, q = 1/5:
  242, and 241 with any one unit removed), and the noise's scale over millions of coordinates
  then tells them apart, which no canary can show (a canary never changes n);
- the step's batch as divisor (the planted fault `sampled_batch_size`): D'_t = max(B_t, 1).

The checks (`CHECKS`): each is one function (record, claim) -> flagged, applying the rule that
`audit.target_failures` applies, at the claim's levels (`Claim.level`, the mechanism checks' and
the mechanism fit's; `Claim.beta`, the white-box family's share of 1 - confidence):
`mechanism_checks`' three rows (Poisson batch, noise, noise by batch) below `level`; the f-DP
lower bound of the one-run audit (`one_run_canary_audit` with the configured guess share)
above the accountant's epsilon; the Gaussian analysis' `gauss_fails`; the mechanism fit's
parameter check, its p-value below `level` (`mechanism_fit_flags`). Swapping a rule is swapping
its entry in `CHECKS`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
import zlib
from collections.abc import Callable

import numpy as np

from mlmia.defences.audit import TOLERANCE, gaussian_false_alarms
from mlmia.defences.dp_sgd import accountant_epsilon
from mlmia.defences.gradient_canaries import (
    canary_scores,
    mechanism_checks,
    simulated_record,
)
from mlmia.defences.mechanism_fit import fit_mechanism
from mlmia.metrics.gaussian_audit import gaussian_one_run
from mlmia.metrics.privacy_bounds import fdp_one_run_epsilon, one_run_correct


@dataclasses.dataclass(frozen=True)
class Claim:
    """What a DP target's train_info.json claims (sigma, q, T, delta, n, the divisor D, the
    clipping norm C and the accountant's epsilon for them) and how its audit reads it (the
    canaries' count, sentinels, norm, guess share and score; the checks' level; the white-box
    family's beta)."""

    epsilon: float
    sigma: float
    rate: float
    steps: int
    delta: float
    units: int
    divisor: float
    clip: float = 1.0
    accountant: str = "rdp"
    count: int = 1000
    sentinels: int = 64
    norm: float = 10.0
    guess_share: float = 0.2
    score: str = "likelihood_ratio"
    level: float = 1e-6
    beta: float = 0.05 / 3

    def at(self, alpha: float) -> Claim:
        """The same claim audited at a looser (or stricter) nominal level: `alpha` for the
        mechanism checks and the fit, 1 - `alpha` confidence for the bounds."""
        return dataclasses.replace(self, level=alpha, beta=alpha)


def audit_settings(claim: dict, audit: dict, families: int = 3) -> dict:
    """`Claim`'s audit fields from the config's `dp_audit` (schema defaults filled): the white-box
    family's beta is (1 - confidence) / families (a shipped DP target has three: white-box,
    black-box canaries, attacks; `audit.joint_confidence`)."""
    canaries = audit["gradient_canaries"]
    return {**claim, "count": int(canaries["count"]), "sentinels": int(canaries["sentinels"]),
            "norm": float(canaries["norm"]), "guess_share": float(canaries["guess_share"]),
            "score": canaries["score"], "level": float(audit["check_level"]),
            "beta": (1.0 - float(audit["confidence"])) / families}  # fmt: skip


def recipe_claim(epsilon: float, units: int, batch_size: int, epochs: int, audit: dict, accountant: str = "rdp",
                 clip: float = 1.0, delta: float | None = None, families: int = 3) -> Claim:  # fmt: skip
    """The claim `dp_sgd.DpSgdStep` makes for a recipe (a `models:` entry with a dp setting) on n =
    `units` training units: q = 1 / ceil(n / batch_size) (its Poisson loader's batches per epoch),
    T = epochs / q steps, delta = 1 / n unless given, sigma as Opacus finds it for `epsilon` over
    T steps, the accountant's epsilon for them, the divisor `batch_size` and C = `clip`."""
    from opacus.accountants.utils import get_noise_multiplier

    rate = 1.0 / math.ceil(units / batch_size)
    steps, delta = int(epochs / rate), 1.0 / units if delta is None else float(delta)
    sigma = get_noise_multiplier(target_epsilon=float(epsilon), target_delta=delta, sample_rate=rate, steps=steps,
                                 accountant=accountant)  # fmt: skip
    found = {"epsilon": accountant_epsilon(accountant, sigma, rate, steps, delta), "sigma": float(sigma),
             "rate": rate, "steps": steps, "delta": delta, "units": int(units), "divisor": float(batch_size),
             "clip": float(clip), "accountant": accountant}  # fmt: skip
    return Claim(**audit_settings(found, audit, families))


def train_info_claim(dp: dict, audit: dict, families: int = 3) -> Claim:
    """The claim of a trained DP target's train_info.json `dp` record."""
    found = {"epsilon": float(dp["epsilon"]), "sigma": float(dp["noise_multiplier"]),
             "rate": float(dp["sample_rate"]), "steps": int(dp["steps"]), "delta": float(dp["delta"]),
             "units": int(dp["units"]), "divisor": float(dp["gradient_divisor"]),
             "clip": float(dp["max_grad_norm"]), "accountant": dp["accountant"]}  # fmt: skip
    return Claim(**audit_settings(found, audit, families))


@dataclasses.dataclass(frozen=True)
class Trainer:
    """How a trainer departs from its claim (module docstring): the noise's sd over sigma C, the
    clipping norm over C, the sampling rate over q, the divisor it uses ("planned": D; "opacus":
    floor(n q'); "sampled": each step's data batch, at least 1) and whether its record names the
    divisor used (`records_used`) or the planned D."""

    kind: str = "correct trainer"
    size: str = ""
    noise: float = 1.0
    clip: float = 1.0
    rate: float = 1.0
    divisor: str = "planned"
    records_used: bool = False

    @property
    def label(self) -> str:
        return f"{self.kind} {self.size}".strip()


CORRECT = Trainer()
#: the faults measured, mildest first within each kind
FAULTS = (
    *(Trainer("noise multiplier", f"× {k:g}", noise=k) for k in (0.95, 0.9, 0.75, 0.5, 0.25)),
    *(Trainer("clipping norm", f"× {k:g}", clip=k) for k in (1.5, 2.0, 4.0)),
    *(Trainer("sampling rate", f"× {k:g}", rate=k) for k in (1.05, 1.5, 2.0)),
    Trainer("divisor", "floor(n q), records D", divisor="opacus"),
    Trainer("divisor", "floor(n q), records floor(n q)", divisor="opacus", records_used=True),
    Trainer("divisor", "the step's batch", divisor="sampled"),
)


def used_divisor(claim: Claim, trainer: Trainer) -> float | str:
    """What the trainer divides the noised sum by."""
    if trainer.divisor == "planned":
        return claim.divisor
    if trainer.divisor == "opacus":
        return float(int(claim.units * claim.rate * trainer.rate))  # Opacus: int(len(dataset) * sample_rate)
    return "sampled"


def trainer_record(claim: Claim, trainer: Trainer, rng: np.random.Generator) -> dict:
    """One simulated white-box record (`gradient_canaries.read_record`'s keys) of `trainer`
    training under `claim` (module docstring)."""
    used = used_divisor(claim, trainer)
    recorded = used if trainer.records_used and not isinstance(used, str) else claim.divisor
    return simulated_record(claim.sigma, claim.rate, claim.steps, claim.count, rng, sentinels=claim.sentinels,
                            noise_scale=trainer.noise, amplitude=min(trainer.clip, claim.norm),
                            join_rate=min(1.0, claim.rate * trainer.rate), units=claim.units, divisor=recorded,
                            unit=claim.clip, used_divisor=used)  # fmt: skip


def unit_epsilon(claim: Claim, trainer: Trainer) -> float:
    """The accountant's epsilon of the mechanism one unit goes through under `trainer` (noise
    multiplier k_noise sigma / k_clip, rate k_rate q; the claim's accountant, steps and delta);
    NaN where it is no subsampled Gaussian of one scale (the step's batch as divisor)."""
    if trainer.divisor == "sampled":
        return math.nan
    return _epsilon(claim, claim.sigma * trainer.noise / trainer.clip, min(1.0, claim.rate * trainer.rate))


def _epsilon(claim: Claim, sigma: float, rate: float) -> float:
    with warnings.catch_warnings():  # Opacus' note that the best order is at an end of its list
        warnings.filterwarnings("ignore", message="Optimal order is the (largest|smallest) alpha")
        return accountant_epsilon(claim.accountant, sigma, rate, claim.steps, claim.delta)


# ----------------------------------------------------------------------------------- the checks' rules


def _mechanism_check(name: str) -> Callable[[dict, Claim], bool]:
    def flags(record: dict, claim: Claim) -> bool:
        rows = mechanism_checks(record, level=claim.level)
        return not next(row["passed"] for row in rows if row["check"] == name)

    flags.__doc__ = f"The {name} check of `mechanism_checks` fails (its p-value below the claim's level)."
    return flags


def fdp_bound_flags(record: dict, claim: Claim) -> bool:
    """The one-run audit's f-DP lower bound (`one_run_canary_audit`: the configured guess share,
    confidence 1 - beta) is above the accountant's epsilon: its right guesses are at least
    `fdp_threshold`'s (the bound grows with them)."""
    guesses, fewest = fdp_threshold(claim)
    if fewest > 2 * guesses:
        return False
    scores = canary_scores(record, score=claim.score)
    return one_run_correct(scores, record["included"], guesses, guesses) >= fewest


@functools.lru_cache(maxsize=64)
def fdp_threshold(claim: Claim) -> tuple[int, int]:
    """The guesses on each side that `one_run_canary_audit` makes on the claim's m canaries (one
    run), and the fewest right guesses of 2 k whose f-DP bound (`fdp_one_run_epsilon`, the
    claim's delta and beta) is above the claim's epsilon: 2 k + 1 where even 2 k right are not."""
    m = claim.count
    guesses = min(m // 2, math.ceil(claim.guess_share * m / 2))

    def above(right: int) -> bool:
        return fdp_one_run_epsilon(m, 2 * guesses, right, claim.delta, claim.beta) > claim.epsilon + TOLERANCE

    low, high = 0, 2 * guesses + 1  # the answer lies in [low, high]; high: none
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if above(middle) else (middle + 1, high)
    return guesses, low


@functools.lru_cache(maxsize=64)
def claimed_trips(claim: Claim) -> int:
    """`audit.gaussian_false_alarms` of a record of this claim: it reads the claim alone (sigma,
    q, T, m) and draws its simulated runs from a fixed seed, so the count is the claim's."""
    stand_in = {"observed": np.zeros((claim.steps, 0)), "count": claim.count, "sigma": claim.sigma,
                "sample_rate": claim.rate}  # fmt: skip
    return gaussian_false_alarms(stand_in, claim.score, claim.epsilon, claim.delta, claim.beta)


def gaussian_flags(record: dict, claim: Claim) -> bool:
    """`audit.gaussian_audit`'s gauss_fails: the Gaussian lower limit (confidence 1 - beta) above
    the accountant's epsilon, and the simulated runs of the claimed mechanism never there (where
    one is, no record of the claim fails the rule)."""
    if claimed_trips(claim):
        return False
    scores = canary_scores(record, score=claim.score)
    bits = np.asarray(record["included"]).astype(bool)
    found = gaussian_one_run(scores[bits], scores[~bits], claim.delta, claim.beta)
    return found["gauss_lcl"] > claim.epsilon + TOLERANCE and claimed_trips(claim) == 0


def mechanism_fit_flags(record: dict, claim: Claim) -> bool:
    """The mechanism fit's rule (`audit.target_failures`): its parameter check failed
    (`fit_mechanism`'s own `mech_passed`: do the observations fit the claimed noise multiplier and
    rate at the checks' level?). A claim of no noise is not tested."""
    if claim.sigma == 0:
        return False
    return not fit_mechanism(record, claim.beta, claim.level)["mech_passed"]


#: each check of the audit as its failure rule: (record, claim) -> flagged
CHECKS: dict[str, Callable[[dict, Claim], bool]] = {
    "Poisson batch": _mechanism_check("Poisson batch"),
    "noise": _mechanism_check("noise"),
    "noise by batch": _mechanism_check("noise by batch"),
    "f-DP bound": fdp_bound_flags,
    "Gaussian analysis": gaussian_flags,
    "mechanism fit": mechanism_fit_flags,
}
ANY = "any check"


def flags(record: dict, claim: Claim) -> dict[str, bool]:
    """Which checks flag the record under the claim, and whether any does."""
    found = {name: bool(rule(record, claim)) for name, rule in CHECKS.items()}
    return found | {ANY: any(found.values())}


def flag_counts(claim: Claim, trainer: Trainer, runs: int, seed: int, alphas: tuple[float, ...] = ()) -> dict:
    """In how many of `runs` simulated records of `trainer` each check flags, at the claim's own
    levels (key None) and at each looser nominal level in `alphas` (`Claim.at`), on the same
    records: {level: {check: count}}."""
    rng = np.random.default_rng([seed, round(claim.epsilon * 1000), zlib.crc32(trainer.label.encode())])
    claims = {None: claim} | {alpha: claim.at(alpha) for alpha in alphas}
    counts = {level: dict.fromkeys([*CHECKS, ANY], 0) for level in claims}
    for _ in range(runs):
        record = trainer_record(claim, trainer, rng)
        for level, audited in claims.items():
            for name, flagged in flags(record, audited).items():
                counts[level][name] += flagged
    return counts


# ----------------------------------------------------------------------------------- power at a target's shape

#: the share of runs a check must flag to count as catching a fault
POWER = 0.8
#: the kinds of fault whose mildest caught size a target's audit record gives (the divisor's faults are no ladder)
LADDERS = ("noise multiplier", "clipping norm", "sampling rate")


def mildest_caught(counts: dict, runs: int, check: str, power: float = POWER) -> dict[str, Trainer]:
    """The mildest fault of each kind (`FAULTS`' order, mildest first) that `check` flags in at
    least `power` of `runs`: {kind: trainer}, kinds with none left out. `counts`: {trainer label:
    {check: count}}; a fault it lacks (not simulated) is skipped."""
    found: dict[str, Trainer] = {}
    for trainer in FAULTS:
        if trainer.kind not in found and trainer.label in counts and counts[trainer.label][check] / runs >= power:
            found[trainer.kind] = trainer
    return found


def target_power(claim: Claim, runs: int, seed: int = 0, power: float = POWER) -> dict:
    """How mild a fault the audit's checks catch at the claim's shape, by simulation (`flag_counts`
    at the claim's levels, one training run's record): for each kind of `LADDERS`, the mildest size
    that any check flags in at least `power` of `runs` runs, its power and the checks that reach
    `power` alone (None: no size of the ladder), and the share of `runs` runs of the correct trainer
    that any check flags. Each ladder stops at its first caught size: the sizes beyond it cannot be
    the mildest."""
    counts = {CORRECT.label: flag_counts(claim, CORRECT, runs, seed)[None]}
    for kind in LADDERS:
        for trainer in (t for t in FAULTS if t.kind == kind):
            counts[trainer.label] = flag_counts(claim, trainer, runs, seed)[None]
            if counts[trainer.label][ANY] / runs >= power:
                break
    caught = mildest_caught(counts, runs, ANY, power)
    mildest = {kind: None if kind not in caught else {
        "size": caught[kind].size, "power": counts[caught[kind].label][ANY] / runs,
        "checks": [name for name in CHECKS if counts[caught[kind].label][name] / runs >= power]}
        for kind in LADDERS}  # fmt: skip
    return {"runs": runs, "power": power, "level": claim.level, "mildest": mildest,
            "ladder": {kind: [t.size for t in FAULTS if t.kind == kind] for kind in LADDERS},
            "false_positive": counts[CORRECT.label][ANY] / runs}  # fmt: skip


def audit_power(info: dict | None, audit: dict, families: int) -> dict | None:
    """A DP target's `target_power` for its audit record (`dp_audit.power_runs` runs per fault; the
    claim from its train_info.json `dp` record and the config's `dp_audit`, `families` families of
    bounds sharing the confidence): None for a target that claims no DP (no dp record, sigma 0) or
    trains without gradient canaries; {"runs": 0} where power_runs is 0 (not measured)."""
    dp = (info or {}).get("dp")
    if not dp or not float(dp.get("noise_multiplier") or 0) or not int(audit["gradient_canaries"]["count"]):
        return None
    runs = int(audit["power_runs"])
    if not runs:
        return {"runs": 0}
    return target_power(train_info_claim(dp, audit, families), runs)
