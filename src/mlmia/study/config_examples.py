"""The worked configs of config/README.md, one per study (`EXAMPLES`): overlays on a shipped
config that `tests/test_config_docs.py` validates and reads with `Study.from_config`, and that
`mlmia.study.config_docs` renders."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Example:
    """A worked config: `overlay` (YAML text, as config/README.md prints it) over the config file
    `base` (None: the overlay is the whole config), run with `command`; `about` says what it does."""

    study: str
    title: str
    about: str
    overlay: str
    command: str
    base: str | None = "config/config.yaml"
    notes: tuple[str, ...] = field(default_factory=tuple)


EXAMPLES: tuple[Example, ...] = (
    Example(
        "paper",
        "The paper's tables on the embedded world, the authors' scoring",
        "Tables 2-11 as `make run` builds them, but with the masking of the authors' code (K = 20 "
        "patterns of floor(0.15 T) tokens), the corrected protocol only and more bootstrap replicates; "
        "`snakemake table2` builds one table.",
        """\
run: authors_masks                 # results/authors_masks/
scoring:
  patterns: 20                     # K: the authors' code (the paper's text: 10)
  mask_count: floor                # floor(0.15 T): the authors' code (the text: ceil)
metrics:
  protocols: [corrected]
  bootstrap: 1000
""",
        "snakemake --cores 2 --configfile config/config.yaml authors_masks.yaml",
    ),
    Example(
        "zoo",
        "The attack zoo with a smaller reference pool and RMIA's a fixed",
        "LiRA and RMIA read a pool of reference models the workflow trains: four references instead "
        "of eight halve the pool's cost (and cost online LiRA power: docs/reference_pools.md); 10 "
        "neighbours per sample cut the neighbourhood attack's; an attack's parameters are set by its name.",
        """\
run: small_pool
references:
  count: 4                         # M references, each on a random half of the pool's patients
neighbours: {count: 10}            # N neighbour texts per sample
attacks:
  rmia: {a: 0.3}                   # fixed, instead of tuned on the references (auto)
  min_k: {fraction: 0.1}           # Min-K%: the lowest 10% of the token log-probabilities
""",
        "snakemake --cores 2 zoo --configfile config/config.yaml small_pool.yaml",
    ),
    Example(
        "shadow",
        "Hisamoto et al.'s shadow models with one pair",
        "Bob trains one pair of shadow models (k+, k-) on half of Alice's shared documents.",
        """\
run: one_pair
shadow:
  shadows: 2                       # one pair (k+, k-)
  bob_share: 0.5                   # Bob holds half of Alice's shared documents
  slice_share: 0.2                 # each held-out slice: 20% of Bob's documents
""",
        "snakemake --cores 2 shadow --configfile config/config.yaml one_pair.yaml",
    ),
    Example(
        "shadow_mt",
        "The shadow protocol on the translation target, Bob guessing a narrower model",
        "A larger parallel corpus, Alice's encoder-decoder trained longer, and Bob's shadows built "
        "narrower than hers (`shadow_model`: the keys that differ from Alice's).",
        """\
run: narrow_shadows
shadow_mt:
  corpus:
    documents: {discharge: 400, progress: 400}
  model: {epochs: 40}
  shadow_model: {d_model: 64, ffn_dim: 256}
""",
        "snakemake --cores 2 shadow_mt --configfile config/config.yaml narrow_shadows.yaml",
    ),
    Example(
        "world",
        "A smaller embedded world",
        "The world's patients and samples at a third of the default's, for a quick look at every "
        "table (its findings need not hold at this size); each count is a key of `corpus:` or `samples:`.",
        """\
run: small_world
corpus:
  mimic: {member_patients: 80, heldin_patients: 20, nonmember_patients: 50, population_patients: 30}
  i2b2: {nonmember_patients: 50, population_patients: 30}
samples:
  counts:
    member: {mimic: {short: 40, long: 160}}
    member_heldin: {mimic: {short: 10, long: 50}}
    nonmember: {mimic: {short: 20, long: 120}, i2b2: {short: 30, long: 120}}
    population: {i2b2: {short: 10, long: 70}, mimic: {short: 10, long: 70}}
""",
        "snakemake --cores 2 --configfile config/config.yaml small_world.yaml",
    ),
    Example(
        "canaries",
        "Canary exposure with more canaries per count",
        "Eight 6-digit canaries per insertion count, three counts, the canary target saved at two checkpoints.",
        """\
run: more_canaries
canaries:
  repetitions: [1, 8, 64]
  per_repetition: 8
  epochs: [20, 60]                 # checkpoints; the target trains to the last
""",
        "snakemake --cores 2 canaries --configfile config/config.yaml more_canaries.yaml",
    ),
    Example(
        "dexposure",
        "d-exposure with more seeds and the paper's 250 overfitting epochs",
        "Three insertion counts, five seeds each, and Figure 2's overfitting run as long as the paper's.",
        """\
run: dexposure_250
dexposure:
  repetitions: [0, 16, 256]
  seeds: 5
  training: {checkpoints: [4, 8, 16]}
  overfit: {epochs: 250}           # the paper's (default 150)
""",
        "snakemake --cores 2 dexposure --configfile config/config.yaml dexposure_250.yaml",
    ),
    Example(
        "extraction",
        "PHI extraction from the larger target, top-20",
        "Each patient's PHI values read back by Large instead of Base, against the general "
        "reference, counting a value as extracted when it is among the 20 most likely spans.",
        """\
run: extraction_large
extraction:
  target: large
  reference: ref_general           # never saw the patients: the rate without memorisation
  top_k: 20
  token_kinds: []                  # the zoo's per-slot experiments audit Base, not Large
""",
        "snakemake --cores 2 extraction --configfile config/config.yaml extraction_large.yaml",
    ),
    Example(
        "audit_cards",
        "Audit cards for two models, at the FPRs a release board asked for",
        "One card each for Base and Large (every audited model without `models`), Base's read from the "
        "zoo's experiment on long MIMIC samples, TPR at 5% and 1% FPR.",
        """\
run: release_cards
audit_cards:
  models: [base, large]
  experiments: {base: zoo_long_mimic}
  fprs: [0.05, 0.01]
""",
        "snakemake --cores 2 audit_cards --configfile config/config.yaml release_cards.yaml",
    ),
    Example(
        "dp",
        "A DP-SGD target at epsilon 2 beside the default ones",
        "One more target fine-tuned with DP-SGD, audited like the others; every model with a `dp` "
        "setting is audited by `snakemake dp` (the `dp_audit` section of config/config.yaml).",
        """\
run: dp_eps2
models:
  dp_eps2:
    corpus: dp_private             # Base's training text plus dp_corpus.patients more patients
    init: ref_general              # fine-tuned from the world's public model
    freeze: [word_embeddings]      # lets ghost clipping run
    epochs: 5
    batch_size: 1024               # the expected Poisson batch
    lr: 0.003
    dp: {epsilon: 2, max_grad_norm: 1.0}
""",
        "snakemake --cores 2 dp --configfile config/config.yaml dp_eps2.yaml",
    ),
    Example(
        "byo",
        "Bring your own: CSV files with your own role labels, two energies, a hub reference",
        "A whole config (no base): your notes in two CSV files, each row's role in a column of your "
        "own labels; "
        "your fine-tuned model against bert-base-uncased from the local hub cache; every sample "
        "whatever its length, under the masked and the normalized energy, at sample and patient "
        "level. The files and the model directory are yours to supply.",
        """\
run: clinic_audit
datasets:
  notes:
    root: data/clinic              # the files' folder
    format: csv
    columns: {text: note_text, group: patient_id, role: split, id: note_id}
    role_names: {train: member, heldout: nonmember, public: population}   # the split column's labels
    files:
    - {path: notes_2019.csv, source: clinic}
    - {path: notes_2020.csv, source: clinic}
models:
  my_model: {path: models/clinical-mlm}   # a save_pretrained directory
  my_reference: {path: bert-base-uncased}   # a hub id in the local cache
audit:
  dataset: notes
  targets: [my_model]
  references: [my_reference]
  nonmembers: [clinic]
  population: clinic
  lengths: [all]
  energies: [masked, normalized]
  levels: [sample, patient]
""",
        "snakemake --cores 2 --configfile clinic_audit.yaml",
        base=None,
        notes=("`config/byo_example.yaml` is the README's worked example with every setting spelled out.",),
    ),
    Example(
        "imported",
        "Imported scores: your own score files in the published layout",
        "The metrics stage on per-sample scores computed elsewhere, one file per model and set "
        "(one float per line, or a table with sample_id and energy), laid out as the authors' "
        "published scores are (`config/paper_scores.yaml`).",
        """\
run: my_scores
imported:
  root: scores                     # {root}/long/{model}__{set}.txt, {root}/short_enorm/...
metrics:
  protocols: [corrected]           # with patient-bootstrap intervals (published: none)
""",
        "snakemake --cores 2 --configfile config/paper_scores.yaml my_scores.yaml",
        base="config/paper_scores.yaml",
    ),
)


def merged(base: dict, overlay: dict) -> dict:
    """`overlay` over `base` as Snakemake merges config files: mappings key by key, recursively;
    any other value (a list too) replaces the base's."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
