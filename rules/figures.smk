rule render_figure:
    input:
        unpack(lambda wildcards: STUDY.figure_inputs(wildcards.figure)),
    output:
        png=report(
            result("figures/{figure}.png"),
            category="Figures",
            caption="../report/figure.rst",
        ),
        pdf=result("figures/{figure}.pdf"),
    log:
        result("logs/render_figure/{figure}.log"),
    # only the spec's figures: another study's figure in figures/ (extraction's) has its own rule
    wildcard_constraints:
        figure=name_pattern(STUDY.figures),
    conda:
        "../envs/mlmia.yaml"
    params:
        spec=lambda wildcards: STUDY.figures[wildcards.figure],
        style=STUDY.figure_style,
        code=library_code("render_figure.py"),
    script:
        "../workflow/scripts/render_figure.py"


# Named targets: `snakemake fig5` draws results/<run>/figures/fig5.{png,pdf}.
for figure_name in STUDY.figures:

    rule:
        name:
            figure_name
        input:
            STUDY.figure_outputs(figure_name),
