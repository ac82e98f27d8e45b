"""The two shadow protocols (`shadow` on the world's registers, `shadow_mt` on the parallel
corpus): their subcorpora, Carol's probes, Bob's slices and the groups against the sizes the
config gives the subcorpora (`mlmia.shadow.sizes`; the sizes from the settings, the corpora
unbuilt), and the translation models' settings."""

from __future__ import annotations

from mlmia.core.errors import UserError
from mlmia.study.checks.refusal import has_world, refused, rekeyed

#: the config key (and value) each register's size comes from, for the messages
REGISTER_SIZES = {"mimic": "corpus.mimic", "i2b2": "corpus.i2b2", "case_reports": "corpus.domain.patients",
                  "abstracts": "corpus.domain.abstract_sentences", "news": "corpus.general",
                  "encyclopedic": "corpus.general", "wikipedia": "gensim's Wikipedia dump"}  # fmt: skip


def check_shadow(config: dict) -> None:
    """The shadow protocol on the world's registers (`mlmia.world.subcorpora.register_documents`)."""
    if not (config.get("shadow") and has_world(config)):
        return
    from mlmia.shadow.sizes import check_names, check_sizes
    from mlmia.world.subcorpora import register_documents

    documents = register_documents(config["corpus"])
    settings = config["shadow"]
    check_names(settings, documents, "shadow", "a register of the world", "registers")
    check_sizes(settings, documents, "shadow", "register", REGISTER_SIZES)


def check_shadow_mt(config: dict) -> None:
    """The shadow protocol on the translation target: its corpus (`mlmia.world.parallel`), its
    encoder-decoders (`mlmia.models.settings.seq2seq_settings`, Alice's and Bob's), its subcorpora."""
    if not (config.get("shadow_mt") and has_world(config)):
        return
    from mlmia.models.settings import seq2seq_settings
    from mlmia.shadow.sizes import check_names, check_sizes
    from mlmia.world.parallel import subcorpus_documents

    settings = config["shadow_mt"]
    bob = {**settings["model"], **settings["shadow_model"]}  # the shape Bob guesses
    for key, model in (("model", settings["model"]), ("shadow_model", bob)):
        try:
            seq2seq_settings(model)
        except UserError as exc:
            setting, _, rest = str(exc).removeprefix("translation model config: ").partition(" ")
            raise (
                refused(f"shadow_mt.{key}.{setting}", rest)
                if setting in model
                else rekeyed(exc, f"shadow_mt.{key}", "translation model config: ")
            ) from None
    try:
        documents = subcorpus_documents(settings["corpus"])
    except UserError as exc:  # the library names the key: "shadow_mt.corpus...: <what>"
        key, _, rest = str(exc).partition(": ")
        raise refused(key, rest) from None
    sizes = {name: f"shadow_mt.corpus.documents.{name}: {size.count}" for name, size in documents.items()}
    check_names(settings, documents, "shadow_mt", "a subcorpus of shadow_mt.corpus.documents", "subcorpora")
    check_sizes(settings, documents, "shadow_mt", "subcorpus", sizes)
