"""config/README.md, written from the schemas: every key of a config and of a tables spec with its
type, default and meaning, the built-in attacks' parameters, and a worked config per study.

One source: the key's type and default come from `config/schema/*.schema.yaml` (the library's
`mlmia.terms.schemas`), its meaning from the key's `description` there, an attack's parameters
from its class (`mlmia.attacks`), and the worked examples (`EXAMPLES`) are overlays that
`tests/test_config_docs.py` validates against the schema and reads with `Study.from_config`. The
same test fails when config/README.md is not what this module writes now::

    python -m mlmia.study.config_docs > config/README.md      # or: make config-docs
"""

from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass, field

from mlmia.report.markdown import markdown_table
from mlmia.terms.schema import load_schema, schema_path

#: how to write the file again (in its header and in the test's failure)
REGENERATE = "python -m mlmia.study.config_docs > config/README.md  (or: make config-docs)"


@dataclass(frozen=True)
class Key:
    """One key a config (or a tables spec) may hold: `path` as the docs print it
    (`models.<name>.dp.epsilon`, `datasets.<name>.files[].path`), its schema `node`, whether its
    parent requires it, where it lies in the schema file (`where`, the YAML keys down to it), and,
    for a key of an `if`/`then` branch, the branch (`branch`)."""

    path: str
    node: dict
    required: bool
    where: tuple[str, ...]
    branch: str | None = None
    condition: str = ""


def keys(schema: dict) -> list[Key]:
    """Every key of `schema`, in the schema's order: each property, each entry of a mapping of
    named entries (`additionalProperties`, printed `<name>`), through list items (`[]`), the
    alternatives of `oneOf`/`anyOf`/`allOf` and the `if`/`then`/`else` branches, then each shared
    definition (`$defs.<name>`) and its keys. A `$ref` is not followed: its target is listed once."""
    out: list[Key] = []
    _walk(schema, "", (), out, None)
    for name, node in (schema.get("$defs") or {}).items():
        path = f"$defs.{name}"
        out.append(Key(path, node, False, ("$defs", name)))
        _walk(node, path, ("$defs", name), out, None)
    return out


def _walk(
    node: dict, path: str, where: tuple[str, ...], out: list[Key], branch: str | None, condition: str = ""
) -> None:
    if not isinstance(node, dict):
        return
    required = set(node.get("required") or ())
    for name, sub in (node.get("properties") or {}).items():
        sub_path = f"{path}.{name}" if path else name
        sub_where = (*where, "properties", name)
        out.append(Key(sub_path, sub, name in required, sub_where, branch, condition))
        _walk(sub, sub_path, sub_where, out, branch, condition)
    entry = node.get("additionalProperties")
    if isinstance(entry, dict):
        sub_path = f"{path}.<name>" if path else "<name>"
        out.append(Key(sub_path, entry, False, (*where, "additionalProperties"), branch, condition))
        _walk(entry, sub_path, (*where, "additionalProperties"), out, branch, condition)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], f"{path}[]", (*where, "items"), out, branch, condition)
    for combinator in ("oneOf", "anyOf", "allOf"):
        for i, alternative in enumerate(node.get(combinator) or ()):
            _walk(alternative, path, (*where, combinator, str(i)), out, branch, condition)
    when = _condition(node.get("if"))
    for part in ("if", "then", "else"):
        if isinstance(node.get(part), dict):
            text = {"then": f"when {when}", "else": f"unless {when}"}.get(part, "")
            _walk(node[part], path, (*where, part), out, part, text)


def _condition(node) -> str:
    """An `if` schema's constant properties in words ("kind is exposure")."""
    if not isinstance(node, dict):
        return ""
    consts = [f"{name} is {sub['const']}" for name, sub in (node.get("properties") or {}).items() if "const" in sub]
    return " and ".join(consts)


def undescribed(schema: dict) -> list[str]:
    """The keys of `schema` without a `description` (`keys`)."""
    return [
        key.path + (f" ({key.branch})" if key.branch else "") for key in keys(schema) if "description" not in key.node
    ]


# -------------------------------------------------------------------------------- the worked examples


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


# -------------------------------------------------------------------------------- rendering


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")


def _ref_name(node: dict) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _value(value) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def type_of(node: dict) -> str:
    """A key's type and limits, in words: `integer >= 1`, `one of a, b`, `list of string`, ..."""
    if not isinstance(node, dict):
        return ""
    ref = _ref_name(node)
    if ref:
        return f"[{ref}](#{slug(f'$defs.{ref}')})"
    if "const" in node:
        return f"`{_value(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{_value(v)}`" for v in node["enum"])
    for combinator in ("oneOf", "anyOf"):
        if combinator in node:
            return " or ".join(type_of(alternative) for alternative in node[combinator])
    types = node.get("type")
    names = types if isinstance(types, list) else [types] if types else []
    words = []
    for name in names:
        if name == "array":
            items = node.get("items")
            inner = type_of(items) if isinstance(items, dict) else ""
            word = f"list of ({inner})" if "," in inner or " or " in inner else f"list of {inner}" if inner else "list"
        elif name == "object":
            entry = node.get("additionalProperties")
            if isinstance(entry, dict) and not node.get("properties"):
                word = f"mapping of name to {type_of(entry) or 'value'}"
            else:
                word = "mapping"
        else:
            word = {"null": "null", "boolean": "true or false"}.get(name, name)
        words.append(word)
    text = " or ".join(words)
    limits = []
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in node:
            limits.append(f"{sign} {_value(node[key])}")
    if "multipleOf" in node:
        limits.append(f"a multiple of {_value(node['multipleOf'])}")
    if node.get("minItems") and node.get("minItems") == node.get("maxItems"):
        limits.append(f"exactly {node['minItems']} items")
    else:
        if node.get("minItems"):
            limits.append(f"at least {node['minItems']} item{'s' if node['minItems'] > 1 else ''}")
        if node.get("maxItems"):
            limits.append(f"at most {node['maxItems']} items")
    if node.get("uniqueItems"):
        limits.append("no repeats")
    if node.get("minProperties"):
        limits.append(f"at least {node['minProperties']} entr{'ies' if node['minProperties'] > 1 else 'y'}")
    if "pattern" in node:
        limits.append(f"matching `{node['pattern']}`")
    names_pattern = (node.get("propertyNames") or {}).get("pattern")
    if names_pattern:
        limits.append(f"names matching `{names_pattern}`")
    names_enum = (node.get("propertyNames") or {}).get("enum")
    if names_enum:
        limits.append("names: " + ", ".join(f"`{n}`" for n in names_enum))
    return ", ".join([text, *limits]) if text else ", ".join(limits)


def default_of(key: Key) -> str:
    if "default" in key.node:
        return _code(_value(key.node["default"]))
    return "required" if key.required else ""


def _cell(text: str) -> str:
    """Text for a Markdown table cell or paragraph: one line, `|` escaped, and a `<` that would open
    an HTML tag outside code spans written as `&lt;` (GitHub would read `<run>` as a tag and drop it)."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else re.sub(r"<(?=[A-Za-z/!?])", "&lt;", part) for i, part in enumerate(parts))


def _code(text: str) -> str:
    """`text` as a code span, fenced with two backticks where it holds one."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def key_table(rows: list[Key]) -> list[str]:
    body = [
        [f"`{key.path}`" + (f" ({key.condition})" if key.condition else ""), _cell(type_of(key.node)),
         _cell(default_of(key)), _cell(key.node.get("description", ""))]
        for key in rows
    ]  # fmt: skip
    return markdown_table(["key", "type", "default", "meaning"], body).split("\n")


def _is_section(node: dict) -> bool:
    """A key with keys of its own (a mapping, or a list of mappings)."""
    if not isinstance(node, dict):
        return False
    items = node.get("items")
    return (
        "properties" in node
        or isinstance(node.get("additionalProperties"), dict)
        or (isinstance(items, dict) and "properties" in items)
    )


def reference(schema: dict, level: str = "###") -> list[str]:
    """The schema's keys: one table of its top-level scalars, then one part per section, then the
    shared definitions."""
    all_keys = [key for key in keys(schema) if key.branch != "if"]
    top = [key for key in all_keys if "." not in key.path and "[" not in key.path and not key.path.startswith("$defs")]
    scalars = [key for key in top if not _is_section(key.node)]
    lines = []
    if scalars:
        lines += [f"{level} Top-level keys", "", *key_table(scalars), ""]
    for section in [key for key in top if _is_section(key.node)] + [
        key for key in all_keys if key.path.startswith("$defs.") and key.path.count(".") == 1
    ]:
        inside = [
            key for key in all_keys
            if key.path != section.path and re.match(re.escape(section.path) + r"(\.|\[)", key.path)
        ]  # fmt: skip
        lines += [f"{level} `{section.path}`", ""]
        facts = [f"Type: {type_of(section.node)}."]
        if section.required:
            facts.append("Required.")
        elif "default" in section.node:
            facts.append(f"Default: {default_of(section)}.")
        lines += [_cell(section.node.get("description", "")), "", " ".join(facts), ""]
        if inside:
            lines += [*key_table(inside), ""]
        if section.path == "attacks":
            lines += attack_parameters()
    return lines


def attack_parameters() -> list[str]:
    """The built-in attacks' parameters and defaults (`attacks.<name>.<parameter>`), from their classes."""
    from mlmia.attacks.base import _registry, attack_names

    rows = []
    for name in attack_names():
        cls = _registry[name]
        if not cls.__module__.startswith("mlmia.attacks."):
            continue  # a plug-in's: not part of the library's docs
        params = ", ".join(f"`{p}: {_value(v)}`" for p, v in cls.parameters.items()) or "none"
        doc = (cls.__doc__ or "").strip().split("\n\n")[0]
        rows.append([f"`{name}`", params, f"{_cell(doc)} (`{cls.__module__.replace('.', '/')}.py`)"])
    return [
        "#### Attack parameters",
        "",
        "Each built-in attack's parameters (`attacks.<name>.<parameter>`) and their defaults, from its class; "
        "an unknown parameter is refused. What each means: the attack's module.",
        "",
        *markdown_table(["attack", "parameters (defaults)", "what it computes"], rows).split("\n"),
        "",
    ]


def examples() -> list[str]:
    lines = []
    for example in EXAMPLES:
        lines += [f"### {example.title}", "", example.about, ""]
        where = f"Save as `{example.command.split()[-1]}`" + (
            f" (an overlay on `{example.base}`)" if example.base else ""
        )
        where += " and run"
        lines += ["```yaml", example.overlay.rstrip("\n"), "```", "", f"{where}:", "", "```bash",
                  f".venv/bin/{example.command}", "```", ""]  # fmt: skip
        lines += [*example.notes, ""] if example.notes else []
    return lines


def render() -> str:
    """config/README.md."""
    config, tables = load_schema(schema_path("config")), load_schema(schema_path("tables"))
    sections = [key.path for key in keys(config) if "." not in key.path and _is_section(key.node)]
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m mlmia.study.config_docs` from config/schema/*.schema.yaml: do not edit;",
        f"     tests/test_config_docs.py fails when this file is not current. Regenerate: {REGENERATE} -->",
        "",
        "Every key a config may hold, with its type, default and meaning, then the tables spec's keys,",
        "then a worked config per study. A config is YAML; the workflow reads `config/config.yaml`",
        "unless `--configfile` names others, which Snakemake merges in order (mappings key by key, a",
        "list replacing the one before). Validation against the schema (`config/schema/`, where every",
        "default lives) fills in each default and refuses an unknown key, a value out of range or a",
        "key given twice, in one line naming the key; the whole config is then checked before any job",
        "([docs/bad_inputs.md](../docs/bad_inputs.md)). A config needs `run` and either `tables_spec`",
        "(with the world or imported scores) or `audit` (bring your own).",
        "",
        "Ready configs: `config.yaml` (the embedded default, `make run`), `ci.yaml` (the same, small),",
        "`paper.yaml` and the overlay `paper_raw.yaml` (the paper's own data), `paper_scores.yaml` (the",
        "authors' published scores), `byo_example.yaml` (bring your own), `dp_faults.yaml` (faulty DP",
        "trainers, an overlay on `ci.yaml`), `large.yaml` (10,000 long non-members per source: TPR at",
        "0.1% FPR with intervals, [docs/large.md](../docs/large.md)).",
        "",
        "## Contents",
        "",
        "- [Change one setting, rebuild one table](#change-one-setting-rebuild-one-table)",
        "- [The config, key by key](#the-config-key-by-key): "
        + ", ".join(f"[`{name}`](#{slug(name)})" for name in sections),
        "- [The tables spec, key by key](#the-tables-spec-key-by-key)",
        "- [Worked examples](#worked-examples): "
        + ", ".join(f"[{example.study}](#{slug(example.title)})" for example in EXAMPLES),
        "",
        *RERUN_RECIPE,
        "## The config, key by key",
        "",
        "`<name>` stands for a name you choose (a model's, a dataset's); `[]` for each item of a list.",
        "",
        *reference(config),
        "## The tables spec, key by key",
        "",
        _cell(tables.get("description", "")),
        "Its file is the config's `tables_spec` (`config/tables.yaml`, `config/tables_paper_scores.yaml`);",
        "an `audit:` section generates one instead.",
        "",
        *reference(tables),
        "## Worked examples",
        "",
        "Most are overlays: saved beside a ready config and named after it with `--configfile`, they",
        "change only what they give (Snakemake merges the files in order, mappings key by key; a list",
        "replaces the one before). Each is checked by `tests/test_config_docs.py`: merged onto its base,",
        "it passes the schema and the whole config's checks (`mlmia.study.Study.from_config`).",
        "",
        *examples(),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


#: how to change one setting and rebuild one table (README.md points here)
RERUN_RECIPE = [
    "## Change one setting, rebuild one table",
    "",
    "1. **Where the setting lives.** What is computed (models, scoring, metrics, attacks, studies) is",
    "   in the config, key by key below; what a table shows (its columns' experiments and alpha, its",
    "   rows, caption) is in the tables spec (`config/tables.yaml`, the config's `tables_spec`).",
    "2. **An overlay with the change alone**, e.g. `my_change.yaml` holding `metrics: {bootstrap: 300}`.",
    "   Without `run:` it keeps the base's run name, so it rebuilds inside `results/default/` and reuses",
    "   everything the change does not touch; with its own `run: my_change` it is a new run in",
    "   `results/my_change/` that builds everything again (models included) and leaves the default run",
    "   as it was.",
    "3. **See first what will rerun**: `snakemake -n table2 --configfile config/config.yaml my_change.yaml`",
    "   lists the jobs with each one's `reason:` (a params change, a changed input, code); `--summary`",
    "   gives each output's status, and `snakemake --list-changes params --configfile ...` the outputs",
    "   whose settings changed. A rule reruns when its params (the settings it is passed), its inputs or",
    "   the library code its script runs change; a setting that only one table reads reruns that",
    "   table's metrics and rendering.",
    "4. **Build the table**: the same command without `-n`. Each table and figure is a named target",
    "   (`table2`, `fig4`, `table_zoo`, ...), and so is each file (`results/default/tables/table2.md`).",
    "",
    "Every default is written into the config when it is read (the validated config is the resolved",
    "one), and no job reads the schema: an upgrade of mlmia that rewords the schema or adds a study's",
    "section reruns nothing; one that changes a default reruns what that value reaches (a model's",
    "training and what follows it, one study's jobs), as the same change in your config would.",
    "",
]


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
