"""Report: the one table renderer, the figures, the findings and the comparison with the paper."""
