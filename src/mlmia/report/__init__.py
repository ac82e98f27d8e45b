"""Report: the one table renderer, the one Markdown table writer, the figures, the findings record and its one layout, the paper's findings, and the comparison with the paper."""
