"""Canary exposure (Carlini et al., "The Secret Sharer", USENIX Security 2019) on the embedded
world (`snakemake canaries`, config `canaries`, rules/canaries.smk): the secrets, the canary
target's exposure per checkpoint, the canaries' membership test, the exposure table and figure."""

from __future__ import annotations

from mlmia.study.plans.base import Caption, Plan, Registration, shown

RULES = "rules/canaries.smk"
#: the config keys of canaries that draw the secrets (mlmia.memorization.canaries.draw_canaries, draw_candidates)
CANARY_SECRET_KEYS = ("template", "digits", "repetitions", "per_repetition", "never_inserted", "population",
                      "candidates", "seed")  # fmt: skip


def canaries_plan(study) -> Plan:
    """Canary exposure (`snakemake canaries`): the secrets, the canary target's exposure per
    checkpoint, the canaries' membership test and the exposure table and figure; with the one-run
    audit's token canaries (`settings["one_run"]`), which the same rules draw for the DP targets."""
    from mlmia.memorization.canary_membership import membership_settings

    config = study.config["canaries"]
    path = lambda file: study.path("canaries", file)  # noqa: E731
    outputs = {
        "secrets": {"canaries": path("canaries.parquet"), "candidates": path("candidates.parquet")},
        "exposure": {"exposure": path("exposure.parquet")},
        "membership": {"attack": path("membership_attack.parquet"), "csv": path("membership.csv"),
                       "markdown": path("membership.md")},
        "report": {"csv": path("exposure_table.csv"), "markdown": path("exposure_table.md"),
                   "png": path("exposure.png"), "pdf": path("exposure.pdf")},
    }  # fmt: skip
    report = shown(outputs["report"], {"markdown": "exposure table", "png": "exposure figure"}, "Canary exposure")
    report |= shown(outputs["membership"], {"markdown": "membership test"}, "Canary exposure")
    epochs = sorted(set(config["epochs"]))
    reference = config["reference"]
    return Plan(
        target="canaries",
        targets=[p for step in outputs.values() for p in step.values()],
        outputs=outputs,
        files={"target": path("target"), "membership_scores": path("membership_scores.parquet")},
        settings={
            "secrets": {key: config[key] for key in CANARY_SECRET_KEYS},
            "epochs": epochs,
            "last_epoch": max(epochs),
            "template": config["template"],
            "digits": config["digits"],
            # the canary target: the shape of the model `canaries.shape` names
            "shape": config["shape"],
            "model": study.models.get(config["shape"]),
            "seed": study.config["scoring"]["seed"],
            # the membership test: the canaries' energy under the target and the reference
            "reference": reference,
            "reference_tokenizer": study.model_tokenizer(reference),
            "energy": config["energy"],
            "scoring": study.scoring(config["energy"]),
            "metrics": membership_settings(config["alpha"], study.config["metrics"], study.config["attacks"]),
            "style": study.figure_style,
            # the one-run DP audit's token canaries (rules/canaries.smk: one_run_canaries)
            "one_run": study.config["dp_audit"]["canaries"] if "dp_audit" in study.config else {},
        },
        resources={"target": study.resources("training"), "scoring": study.resources("scoring")},
        rules=(RULES,),
        report=report,
        caption=Caption(
            f"Canary exposure (Carlini et al., The Secret Sharer, USENIX Security 2019): secrets of ``{config['digits']}`` "
            f"digits in the template ``{config['template']}``, inserted 0-64 times into the canary target's training "
            "text; their exposure per repetition count and checkpoint (table and figure), and the canaries' sentences "
            "as a membership test against the reference."
        ),
    )


#: the embedded world's: the canary target trains on its target corpus
REGISTRATION = Registration("canaries", lambda study: "corpus" in study.config, canaries_plan)
