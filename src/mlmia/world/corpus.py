"""The embedded default world: seeded synthetic clinical corpora built from real vocabulary
(`mlmia.world.lexicon`), one patient's facts (`mlmia.world.patients`) written in several
registers (`mlmia.world.registers`).

Sources (each a "register" of the same clinical world, so the same vocabulary in other words):

- `mimic`: discharge-summary style (`mlmia.world.registers.mimic`). Its patients are the
  target's members (`member`, `member_heldin`), the held-out non-members and a `population`
  of its own (drawn after everything else, so that adding it changes no other row).
- `i2b2`: a shifted source (`mlmia.world.registers.i2b2`): a second non-member set and the
  `population`.
- `domain`: the stand-in for PubMed: disjoint patients written up in case-report / abstract style
  (`mlmia.world.registers.case_report`), mixed with a share of clinical-note sentences (same
  vocabulary, different style).
- `general`: real news prose, with a share of encyclopedic medical prose (the general reference;
  bert-base-uncased read Wikipedia, whose medical articles use the clinical vocabulary but not
  the note registers).

Sentences vary widely in intrinsic difficulty (formulaic exam lines next to rare-diagnosis
narrative and number-dense lab lines): that is what makes the loss attack weak and the
likelihood ratio strong.
"""

from __future__ import annotations

import random
import re

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.world.lexicon import general_sentences, lexicon
from mlmia.world.patient_phi import patient_phi
from mlmia.world.patients import Patient, make_patient, pick, sentence_count
from mlmia.world.registers import case_report, i2b2, mimic

log = get_logger(__name__)

#: the registers a patient's sentences are written in, by the name `patient_sentences` takes
REGISTERS = {"mimic": mimic.REGISTER, "i2b2": i2b2.REGISTER, "domain": case_report.REGISTER}


#: the keys of the `corpus:` section, in the schema's order: its sub-sections' keys by name
#: (`mlmia.terms.schemas`; validation writes every default, so a key is never missing)
SECTION_KEYS = {
    "mimic": ("member_patients", "heldin_patients", "nonmember_patients", "population_patients"),
    "i2b2": ("nonmember_patients", "population_patients", "shift"),
    "domain": ("patients", "abstract_sentences", "note_share"),
    "general": ("sentences", "medical_share", "note_share"),
}
CORPUS_KEYS = ("seed", "sentences_per_patient", *SECTION_KEYS)


def corpus_settings(config: dict) -> dict:
    """The `corpus:` config section as validation resolved it (every key given; a missing one is
    a KeyError), checked: an unknown key or a value out of range is a UserError naming the key."""
    config = dict(config)
    unknown = [k for k in config if k not in CORPUS_KEYS]
    if unknown:
        raise UserError(f"corpus: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(CORPUS_KEYS)})")
    out: dict = {}
    for key in CORPUS_KEYS:
        if key not in SECTION_KEYS:
            out[key] = config[key]
            continue
        sub, known = dict(config[key]), SECTION_KEYS[key]
        unknown = [k for k in sub if k not in known]
        if unknown:
            raise UserError(f"corpus.{key}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(known)})")
        out[key] = {k: sub[k] for k in known}
    for key, sub in out.items():
        if isinstance(sub, dict):
            for k, v in sub.items():
                if k in ("note_share", "shift", "medical_share"):
                    if not 0 <= float(v) <= 1:
                        raise UserError(f"corpus.{key}.{k}: must be between 0 and 1, got {v!r}")
                elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise UserError(f"corpus.{key}.{k}: must be a non-negative integer, got {v!r}")
    if int(out["sentences_per_patient"]) < 1:
        raise UserError("corpus.sentences_per_patient: must be at least 1")
    if out["mimic"]["member_patients"] < 1 or out["mimic"]["nonmember_patients"] < 1:
        raise UserError("corpus.mimic: needs at least one member and one non-member patient")
    return out


def medical_sentences(cfg: dict) -> int:
    """How many sentences of the general corpus are medical prose (`corpus_settings`' `cfg`)."""
    return round(int(cfg["general"]["sentences"]) * float(cfg["general"]["medical_share"]))


def news_picks(cfg: dict, available: int) -> list[int]:
    """The news sentences of the general corpus: their indices among the `available` sentences
    of the news corpus (`general_sentences`), drawn from the corpus seed (`corpus_settings`' `cfg`)."""
    k = min(int(cfg["general"]["sentences"]) - medical_sentences(cfg), available)
    return sorted(random.Random(f"general:{int(cfg['seed'])}").sample(range(available), k))


def world_patients(cfg: dict) -> dict[tuple[str, str], int]:
    """{(role, source): patients} of the world's scored sources, from its settings
    (`corpus_settings`' `cfg`; `build_world` makes these patients)."""
    mimic, i2b2 = cfg["mimic"], cfg["i2b2"]
    return {("member", "mimic"): mimic["member_patients"], ("member_heldin", "mimic"): mimic["heldin_patients"],
            ("nonmember", "mimic"): mimic["nonmember_patients"], ("population", "mimic"): mimic["population_patients"],
            ("nonmember", "i2b2"): i2b2["nonmember_patients"], ("population", "i2b2"): i2b2["population_patients"]}  # fmt: skip


def patient_sentences(
    rng: random.Random, p: Patient, n: int, style: str, mix: dict | None = None
) -> list[tuple[str, str]]:
    """`n` sentences (kind, text) about patient `p`: the opening line, then templates drawn by
    weight. `mix` maps style -> probability, for a corpus that mixes registers."""

    def draw(st: str, opening: bool) -> tuple[str, str]:
        if st == "i2b2-habits":  # a MIMIC template written with i2b2 habits
            kind, text = draw("mimic", opening)
            return kind, i2b2.i2b2_habits(text)
        register = REGISTERS[st]
        template = (
            register.opening if opening else pick(rng, register.templates, [t.weight for t in register.templates])
        )
        return template.name, re.sub(r"\s+", " ", template.render(rng, p)).strip()

    mix = mix or {style: 1.0}
    out = []
    while len(out) < n:
        st = rng.choices(list(mix), weights=list(mix.values()), k=1)[0]
        out.append(draw(st, opening=not out))
    return out


def register_mix(note_share: float) -> dict[str, float]:
    """Register weights of a case-report corpus with `note_share` of its sentences in the note
    registers (MIMIC style, MIMIC with i2b2 habits, i2b2 style)."""
    return {
        "domain": 1.0 - note_share,
        "mimic": note_share * 0.6,
        "i2b2-habits": note_share * 0.25,
        "i2b2": note_share * 0.15,
    }


def build_world(config: dict) -> dict[str, pd.DataFrame]:
    """Build every corpus of the default world from the `corpus:` config section, resolved
    (`corpus_settings`).

    Returns a dict of DataFrames:

    - `samples`: sample_id, group_id, text, source (mimic|i2b2), role (member|member_heldin|
      nonmember|population), variant (plain|named), name, kind (the template). The `named`
      rows are the Base-b member texts (the patient's name prepended, as trained); an
      experiment on Base-b takes its members from them and its non-members from the plain rows.
      The MIMIC population's rows come last, drawn after every other draw and kept only where
      their text is new to the world: every other row of every table is what it is without
      them (`mimic.population_patients: 0`).
    - `target`: the target's training text (all sentences of member and member_heldin patients).
    - `target_named`: the same, each sentence prefixed with the patient's surrogate name (Base-b).
    - `domain`: the domain reference's training text (disjoint patients, other register).
    - `general`: the general reference's training text (news prose plus `medical_share` of
      case-report and abstract sentences about disjoint patients, no note register).
    - `phi`: the PHI values of every patient with samples (`mlmia.world.patient_phi`).
    """
    cfg = corpus_settings(config)
    lex = lexicon()
    seed = int(cfg["seed"])
    n_sent = int(cfg["sentences_per_patient"])
    rows = []
    patients: dict[str, Patient] = {}

    shift = float(cfg["i2b2"]["shift"])
    mixes = {"mimic": None, "i2b2": {"i2b2": shift, "i2b2-habits": 1.0 - shift}}

    def add_patients(source: str, role: str, count: int, rng: random.Random, start: int, rows: list = rows) -> int:
        for i in range(count):
            pid = f"{source}-{start + i:05d}"
            p = make_patient(rng, lex, pid, source)
            patients[pid] = p
            for j, (kind, text) in enumerate(
                patient_sentences(rng, p, sentence_count(rng, n_sent), source, mixes[source])
            ):
                rows.append(
                    {
                        "sample_id": f"{pid}-{j:03d}",
                        "group_id": pid,
                        "text": text,
                        "source": source,
                        "role": role,
                        "variant": "plain",
                        "name": p.name,
                        "kind": kind,
                    }
                )
        return start + count

    rng_m = random.Random(f"mimic:{seed}")
    nxt = add_patients("mimic", "member", cfg["mimic"]["member_patients"], rng_m, 0)
    nxt = add_patients("mimic", "member_heldin", cfg["mimic"]["heldin_patients"], rng_m, nxt)
    next_mimic = add_patients("mimic", "nonmember", cfg["mimic"]["nonmember_patients"], rng_m, nxt)
    rng_i = random.Random(f"i2b2:{seed}")
    nxt = add_patients("i2b2", "nonmember", cfg["i2b2"]["nonmember_patients"], rng_i, 0)
    add_patients("i2b2", "population", cfg["i2b2"]["population_patients"], rng_i, nxt)
    samples = pd.DataFrame(rows, columns=["sample_id", "group_id", "text", "source", "role", "variant", "name", "kind"])

    # a sample must be unique in the world: a sentence that occurs twice (a formulaic line, or a
    # non-member line that equals a training line) stays training material but is never scored,
    # so no non-member is in the training text and members are not padded with repeated lines
    trained = samples["role"].isin(["member", "member_heldin"])
    target = samples.loc[trained, ["sample_id", "group_id", "text"]].reset_index(drop=True)
    named_all = samples.loc[trained].copy()
    named_all["text"] = named_all["name"] + " " + named_all["text"]
    target_named = named_all[["sample_id", "group_id", "text"]].reset_index(drop=True)
    all_texts = samples["text"].tolist()
    counts = samples["text"].map(samples["text"].value_counts())
    unique = (counts == 1) & ~samples["text"].isin(set(target_named["text"]))
    log.info("%d of %d sentences are unique in the world and become samples", int(unique.sum()), len(samples))
    samples = samples.loc[unique]
    named = named_all.loc[named_all["sample_id"].isin(set(samples["sample_id"]))].copy()
    named["sample_id"] = named["sample_id"] + "-named"
    named["variant"] = "named"
    samples = pd.concat([samples, named], ignore_index=True)

    # domain reference corpus: disjoint patients in the domain register, a share in note registers
    rng_d = random.Random(f"domain:{seed}")
    share = float(cfg["domain"]["note_share"])
    mix = register_mix(share)
    drows = []
    for i in range(cfg["domain"]["patients"]):
        pid = f"domain-{i:05d}"
        p = make_patient(rng_d, lex, pid, "domain")
        for j, (_, text) in enumerate(patient_sentences(rng_d, p, sentence_count(rng_d, n_sent), "domain", mix)):
            drows.append({"sample_id": f"{pid}-{j:03d}", "group_id": pid, "text": text})
    for j in range(cfg["domain"]["abstract_sentences"]):
        drows.append(
            {
                "sample_id": f"abstract-{j:05d}",
                "group_id": f"abstract-{j // 10:05d}",
                "text": case_report.abstract_sentence(rng_d, lex),
            }
        )
    domain = pd.DataFrame(drows, columns=["sample_id", "group_id", "text"])

    # general reference corpus: real news prose, a seeded sample of sentences, plus a share of
    # encyclopedic medical prose (case-report / abstract register, disjoint patients)
    gen = general_sentences()
    n_medical = medical_sentences(cfg)
    picked = news_picks(cfg, len(gen))
    grows = [{"sample_id": f"general-{i:05d}", "group_id": f"general-{i // 10:05d}", "text": gen[i]} for i in picked]
    rng_gm = random.Random(f"general-medical:{seed}")
    # case descriptions, a share of them in clinical-note registers (`note_share`)
    gen_mix = register_mix(float(cfg["general"]["note_share"]))
    i = 0
    while i < n_medical:
        if rng_gm.random() < 0.5:
            grows.append(
                {
                    "sample_id": f"encyclopedic-{i:05d}",
                    "group_id": f"encyclopedic-{i // 10:05d}",
                    "text": case_report.abstract_sentence(rng_gm, lex),
                }
            )
            i += 1
            continue
        pid = f"encyclopedic-patient-{i:05d}"
        p = make_patient(rng_gm, lex, pid, "domain")
        for j, (_, text) in enumerate(patient_sentences(rng_gm, p, min(n_sent, n_medical - i), "domain", gen_mix)):
            grows.append({"sample_id": f"{pid}-{j:03d}", "group_id": pid, "text": text})
        i += min(n_sent, n_medical - i)
    general = pd.DataFrame(grows, columns=["sample_id", "group_id", "text"])

    # the references never see a scored sample
    leak = set(samples["text"]) & (set(domain["text"]) | set(general["text"]))
    if leak:
        domain = domain.loc[~domain["text"].isin(leak)].reset_index(drop=True)
        general = general.loc[~general["text"].isin(leak)].reset_index(drop=True)

    # the MIMIC population: its stream continues where the MIMIC non-members ended (no other
    # draw reads it), its rows come after every other row, and a sentence that any table
    # already holds (or that repeats) is dropped here rather than removing the other one
    population_rows: list[dict] = []
    add_patients("mimic", "population", cfg["mimic"]["population_patients"], rng_m, next_mimic, population_rows)
    extra = pd.DataFrame(population_rows, columns=samples.columns)
    known = set(all_texts) | set(target_named["text"]) | set(domain["text"]) | set(general["text"])
    extra = extra[(extra["text"].map(extra["text"].value_counts()) == 1) & ~extra["text"].isin(known)]
    if len(extra):
        samples = pd.concat([samples, extra], ignore_index=True)

    log.info(
        "world: %d samples (%s), target %d sentences, domain %d, general %d",
        len(samples),
        samples.groupby(["source", "role", "variant"]).size().to_dict(),
        len(target),
        len(domain),
        len(general),
    )
    scored = set(samples["group_id"])
    return {
        "samples": samples.reset_index(drop=True),
        "target": target,
        "target_named": target_named,
        "domain": domain,
        "general": general,
        "phi": patient_phi(p for pid, p in patients.items() if pid in scored),
    }


def write_world(config: dict, outputs: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Build the world and write each table named in `outputs` (key -> Parquet path) atomically."""
    from mlmia.core.io import write_parquet

    world = build_world(config)
    unknown = [k for k in outputs if k not in world]
    if unknown:
        raise UserError(f"write_world: unknown output(s) {', '.join(unknown)} (known: {', '.join(world)})")
    for key, path in outputs.items():
        write_parquet(world[key], path)
    return world
