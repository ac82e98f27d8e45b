"""The roles a sample plays in an experiment (kept apart so light modules need not import sklearn)."""

ROLES = ("member", "member_heldin", "nonmember", "population")
