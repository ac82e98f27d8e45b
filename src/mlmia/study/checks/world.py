"""What the embedded world settles: the sections that need it (they would be dropped without a
word where there is none), the scored samples it can give (by role and source, no more than its
patients' sentences), and the sources a study names."""

from __future__ import annotations

from mlmia.study.checks.refusal import has_world, refused
from mlmia.terms.layout import CORPORA, WORLD_SETS

#: config sections that only the embedded world reads
WORLD_SECTIONS = ("samples", "dp_corpus", "shadow", "shadow_mt")


def check_world_sections(config: dict) -> None:
    """Without a corpus: section, no section that only the world reads."""
    if has_world(config):
        if "samples" not in config:
            raise refused("samples", "missing: the embedded world (a corpus: section) scores the samples it names")
        return
    for section in WORLD_SECTIONS:
        if section in config:
            raise refused(section, "needs the embedded world (a corpus: section); without one it would be left out")


def check_references(config: dict) -> None:
    """Without the embedded world, a reference pool trains on a table file and continues a model
    (`references.init`): the world's corpora and its tokenizer, which a pool trained from scratch
    takes, are not there."""
    references = config.get("references")
    if not references or has_world(config):
        return
    if references["pool"] in CORPORA:
        raise refused(
            "references.pool",
            f"{references['pool']!r} is a corpus of the embedded world (a corpus: section), which this config lacks; "
            "give a table with sample_id, group_id, text",
        )
    if not references.get("init"):
        raise refused(
            "references.init",
            "needed without the embedded world (a corpus: section): each reference continues this model, with its "
            "tokenizer (a pool from scratch takes the world's tokenizer)",
        )


def check_samples(config: dict) -> None:
    """Each `samples.counts` entry names a (role, source) the world has patients of, and asks no
    more samples than their sentences (`mlmia.world.corpus.world_patients`, at most
    `mlmia.world.patients.most_sentences` each; the world is not built)."""
    if not has_world(config):
        return
    from mlmia.world.corpus import corpus_settings, world_patients
    from mlmia.world.patients import most_sentences
    from mlmia.world.samples import count_for

    cfg = corpus_settings(config["corpus"])
    patients = world_patients(cfg)
    most = most_sentences(int(cfg["sentences_per_patient"]))
    samples = config["samples"]
    for role, by_source in samples["counts"].items():
        for source, count in by_source.items():
            key = f"samples.counts.{role}.{source}"
            have = patients.get((role, source), 0)
            if not have:
                sources = sorted(s for r, s in patients if r == role and patients[(r, s)])
                raise refused(
                    key,
                    f"the world has no {role} patients of source {source!r} (it has: {', '.join(sources) or 'none'})",
                )
            asked = sum(count_for(count, length) for length in samples["lengths"])
            if asked > have * most:
                raise refused(
                    key,
                    f"{asked} samples asked for ({', '.join(samples['lengths'])}), the world's {have} {role} patients "
                    f"of {source} hold at most {have * most} sentences (corpus.sentences_per_patient "
                    f"{cfg['sentences_per_patient']}); raise the corpus' patient counts or lower this",
                )


def check_neighbour_subsample(config: dict) -> None:
    """`neighbours.subsample` names audited roles only (`NEIGHBOUR_ROLES`) and, on the embedded
    world, (role, source) pairs of `samples.counts`, asking no more than they hold in any length
    bucket. A dataset's own counts are checked by the job that draws the subsample."""
    from mlmia.terms.manifest import NEIGHBOUR_ROLES

    subsample = (config.get("neighbours") or {}).get("subsample") or {}
    for role, by_source in subsample.items():
        if role not in NEIGHBOUR_ROLES:
            raise refused(
                f"neighbours.subsample.{role}",
                f"not an audited role (use {', '.join(NEIGHBOUR_ROLES)}; population samples get no neighbour texts)",
            )
        if not has_world(config):
            continue
        from mlmia.world.samples import count_for

        samples = config["samples"]
        for source, n in by_source.items():
            key = f"neighbours.subsample.{role}.{source}"
            have = samples["counts"].get(role, {}).get(source)
            if have is None:
                raise refused(key, f"samples.counts.{role} has no source {source!r}")
            for length in samples["lengths"]:
                if count_for(n, length) > count_for(have, length):
                    raise refused(
                        key,
                        f"{count_for(n, length)} {length} samples asked for, samples.counts.{role}.{source} gives "
                        f"{count_for(have, length)}",
                    )


def nonmember_sources(config: dict, dataset: str) -> set[str] | None:
    """The sources of a sample table's non-members, as far as the config tells (None: only its
    files would)."""
    if dataset in WORLD_SETS and has_world(config):
        from mlmia.world.samples import sources_with

        samples = config["samples"]
        return sources_with(samples["counts"], "nonmember", None, samples["lengths"])
    if dataset in (config.get("datasets") or {}):
        from mlmia.data.datasets import declared_sources

        return declared_sources(config["datasets"][dataset], "nonmember", None)
    return None


def check_extraction_sources(config: dict) -> None:
    """Each `extraction.sources` entry is a non-member source of the extraction's sample table."""
    extraction = config["extraction"]
    if not (has_world(config) or extraction.get("phi")):
        return
    known = nonmember_sources(config, extraction["dataset"])
    for i, source in enumerate(extraction["sources"]):
        if known is not None and source not in known:
            raise refused(
                f"extraction.sources[{i}]",
                f"{source!r} is not a non-member source of sample table {extraction['dataset']!r} "
                f"(sources: {', '.join(sorted(known)) or 'none'})",
            )
