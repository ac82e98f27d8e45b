# The audit cards: `snakemake audit_cards`. One page per audited model (a configured model that an
# experiment of the tables spec targets), a report over the attack table of one of its experiments
# and the outputs of the studies the config runs for it (mlmia.report.cards; docs/audit_cards.md).
# The plan (mlmia.study.plans.cards): the audited models, each card's experiment, sections and inputs.
from mlmia.study.plans.cards import CARD_ITEM, CATEGORY, ROC_ITEM, card_inputs

CARDS = STUDY.plan("audit_cards")


rule audit_card:
    input:
        unpack(lambda wildcards: card_inputs(STUDY, CARDS, wildcards.model)),
    output:
        card=report_flag(
            CARDS.files["card"],
            caption="../report/study.rst",
            category=CATEGORY,
            labels={"model": "{model}", "item": CARD_ITEM},
        ),
        numbers=CARDS.files["numbers"],
        roc=report_flag(
            CARDS.files["roc"],
            caption="../report/study.rst",
            category=CATEGORY,
            labels={"model": "{model}", "item": ROC_ITEM},
        ),
    log:
        result("logs/audit_cards/{model}.log"),
    benchmark:
        result("benchmarks/audit_cards/{model}.tsv")
    wildcard_constraints:
        model=name_pattern(CARDS.settings["models"]),
    conda:
        "../envs/mlmia.yaml"
    params:
        card=lambda wildcards: CARDS.settings["cards"][wildcards.model],
        config_digest=CARDS.settings["config_digest"],
        caption=CARDS.caption,
        code=library_code("audit_card.py"),
    script:
        "../workflow/scripts/audit_card.py"
