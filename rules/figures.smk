rule render_figure:
    input:
        unpack(figure_inputs),
    output:
        png="results/figures/{figure}.png",
        pdf="results/figures/{figure}.pdf",
    params:
        spec=lambda wildcards: FIGURES[wildcards.figure],
        style=config.get("figure_style", {}),
    log:
        "logs/render_figure/{figure}.log",
    conda:
        "../envs/mlmia.yaml"
    script:
        "../workflow/scripts/render_figure.py"


# Named targets: `snakemake fig5` draws results/figures/fig5.{png,pdf}.
for figure_name in FIGURES:

    rule:
        name:
            figure_name
        input:
            figure_outputs(figure_name),
