"""The shared terms, the floor just above `mlmia.core`: the config and tables-spec schemas
and their defaults (`schema`), the tables spec's cells and groups (`spec`), an experiment
(`experiment`), where a run's results lie (`layout`), the sample table's columns and roles
(`manifest`) and the score table's (`scores`). Every stage reads these; they import nothing of
the library but `mlmia.core`."""
