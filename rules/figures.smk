rule render_figure:
    input:
        unpack(figure_inputs),
    output:
        png=report(
            "results/figures/{figure}.png",
            category="Figures",
            caption="../report/figure.rst",
        ),
        pdf="results/figures/{figure}.pdf",
    log:
        "logs/render_figure/{figure}.log",
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: FIGURES[wildcards.figure],
        style=config.get("figure_style", {}),
        code=module_digest("mlmia.figures"),
    script:
        "../workflow/scripts/render_figure.py"


# Named targets: `snakemake fig5` draws results/figures/fig5.{png,pdf}.
for figure_name in FIGURES:

    rule:
        name:
            figure_name
        input:
            figure_outputs(figure_name),
