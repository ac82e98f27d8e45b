"""The embedded world: seeded synthetic clinical corpora and the scored sample sets drawn from them."""
