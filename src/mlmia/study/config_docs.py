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

import json
import re
import sys
from dataclasses import dataclass

from mlmia.report.markdown import markdown_table
from mlmia.study.config_examples import EXAMPLES, Example, merged  # noqa: F401 (the examples, rendered here)
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
    "   table's metrics and rendering. The torch devices (`training.device`, `scoring.device`,",
    "   `exposure.device`, `dexposure.device`) and the scoring batch size (`scoring.batch_size`) are the",
    "   rules' resources, not params: changing them reruns nothing. A run moved from the CPU to a GPU",
    "   keeps the models and scores it has; what it computes next agrees with the CPU's but for the",
    "   GPU's arithmetic (`scoring.precision: auto` is bf16 there) and, in a training, its random",
    "   draws (dropout). To train and score again on the GPU: `--forcerun train_model score_shard`.",
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
