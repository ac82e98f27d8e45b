"""The study: experiments, tables, figures and findings from config, and the config schemas."""
