"""Metrics: pure functions on arrays (AUC, TPR at low FPR, thresholds), the two protocols, the patient bootstrap, the interval methods."""
