"""A parallel corpus of the embedded world: one clinical fact record rendered in two registers, the
translation task of the shadow protocol's translation target (Hisamoto, Post and Duh, TACL 2020, attack a
machine-translation system; `snakemake shadow_mt`, `mlmia.shadow.translation`).

Each pair is one fact record of one synthetic patient (a vitals line, a discharge medication, a
hospital-course sentence, ...; the patients and lexicon of `mlmia.world.patients` and `.lexicon`):

- the source (`text`) renders it in the MIMIC register (`VS: T 98.6 BP 120/80 HR 72 ...`,
  `Sig: One (1) Tablet PO BID`, ISO dates), or for the case-report probes in the case-report register;
- the target (`target`) renders the same record in the i2b2 register (`VITAL SIGNS: temperature
  98.6, blood pressure 120/80, pulse 72 ...`, `p.o. b.i.d.`, US dates), choosing among equivalent
  renderings: template and word order, synonyms (`pulse` / `heart rate`, `revealed` / `showed`), the
  order of listed items (diagnoses, drugs, lab values). The choices are drawn from
  `random.Random(stable_key(f"{seed}/variant/{sample_id}"))`, the pair's own key, never from the
  source: a model that trained on the pair can reproduce its variant, one that did not can only guess
  (`variant` records the choices, e.g. "t1.o4.s0", for analysis; every fact of the target is in the source).

Documents are patients (`group_id`), `sentences_per_document` sentences each (uniform within a third
around it, `mlmia.world.patients.sentence_count`), the first a fixed opener of the subcorpus. Subcorpora
(`subcorpus`, each a mix of fact kinds): `discharge`, `progress` and `consult` notes (MIMIC sources),
`case_reports` (the same facts written as a case report: a source register the clinical subcorpora never
use, for the out-of-domain probes) and `news` (sentences of the Lee news corpus, in documents of
consecutive sentences, 4 to `NEWS_MAX_WORDS` words; their target is the sentence itself: news holds no
clinical habit to rewrite, so the reference of a register-to-register translation is the identity).

Every draw comes from streams of its own (`parallel:<subcorpus>:<seed>`, `parallel-news:<seed>` and the
variant keys), so building this corpus changes no table of the world. A source text that occurs twice
is dropped (all its copies), as the world never scores a sentence twice; no text is logged.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key
from mlmia.core.logs import get_logger
from mlmia.world.lexicon import OUTCOMES, RELATIONS, general_sentences, lexicon
from mlmia.world.patients import (
    Patient,
    make_patient,
    most_sentences,
    note_date,
    pick,
    pronouns,
    render_date,
    sentence_count,
)
from mlmia.world.registers.mimic import NUMBER_WORDS
from mlmia.world.registers.template import labs, vitals
from mlmia.world.subcorpora import Documents

log = get_logger(__name__)

#: the columns of the parallel corpus
PARALLEL_COLUMNS = ["sample_id", "group_id", "text", "target", "subcorpus", "kind", "variant"]
#: longest news sentence kept (words): the models' positions hold a few clinical lines' worth
NEWS_MAX_WORDS = 40
SOURCE_REGISTER = {"discharge": "mimic", "progress": "mimic", "consult": "mimic", "case_reports": "case"}
#: the fact kinds of each clinical subcorpus: the opener, then kinds drawn by weight
MIXES = {
    "discharge": ("hpi", {"med": 1.2, "dcmed": 1.6, "course": 1.2, "followup": 0.6, "problem": 1.0, "pmh": 0.6,
                          "labs": 0.4, "imaging": 0.4}),
    "progress": ("vitals", {"vitals": 0.6, "labs": 1.2, "imaging": 1.0, "problem": 1.4, "med": 1.0, "course": 0.4}),
    "consult": ("hpi", {"pmh": 1.0, "social": 0.8, "imaging": 0.8, "problem": 1.2, "med": 0.8, "followup": 0.6,
                        "vitals": 0.4}),
    "case_reports": ("hpi", {"pmh": 1.0, "med": 1.4, "vitals": 0.8, "labs": 0.8, "imaging": 0.8, "course": 1.2}),
}  # fmt: skip
#: the subcorpora of `shadow_mt.corpus.documents`, in the schema's order: the corpus is built in it
SUBCORPORA = (*MIXES, "news")

DEVICES = [("RA", "room air"), ("2L NC", "2 liters nasal cannula"), ("4L NC", "4 liters nasal cannula"),
           ("NRB", "a nonrebreather mask"), ("40% FM", "a 40% face mask")]  # fmt: skip
#: imaging: (MIMIC, i2b2, case report)
MODALITIES = [
    ("CXR", "chest x-ray", "Chest radiography"),
    ("CT chest", "CT scan of the chest", "Computed tomography of the chest"),
    ("CT abd/pelvis", "CT scan of the abdomen and pelvis", "Computed tomography of the abdomen and pelvis"),
    ("CT head", "head CT", "Computed tomography of the head"),
    ("RUQ US", "right upper quadrant ultrasound", "Ultrasonography of the right upper quadrant"),
    ("MRI", "MRI scan", "Magnetic resonance imaging"),
]
#: problem lines: (MIMIC action, its i2b2 synonyms)
ACTIONS = [("started", ("started", "initiated")), ("continued", ("continued", "maintained")),
           ("held", ("held", "withheld")), ("uptitrated", ("uptitrated", "increased"))]  # fmt: skip
TOBACCO = [("quit tobacco 10 years ago", "quit smoking 10 years ago"), ("smokes 1 ppd", "smokes one pack per day"),
           ("denies tobacco", "denies tobacco use"), ("former smoker", "is a former smoker")]  # fmt: skip
ALCOHOL = [("occasional etoh", "drinks alcohol occasionally"), ("denies etoh", "denies alcohol use"),
           ("heavy etoh", "reports heavy alcohol use"), ("no illicits", "denies illicit drug use")]  # fmt: skip
#: lab values: (record key, MIMIC label, i2b2 names); the i2b2 groups: chemistry, blood count
LAB_MIMIC = [("wbc", "WBC"), ("hgb", "Hgb"), ("hct", "Hct"), ("plt", "Plt Ct"), ("glu", "Glucose"),
             ("bun", "UreaN"), ("cr", "Creat"), ("na", "Na"), ("k", "K")]  # fmt: skip
LAB_I2B2 = {"na": ("sodium",), "k": ("potassium",), "bun": ("BUN",), "cr": ("creatinine",), "glu": ("glucose",),
            "wbc": ("white count", "WBC"), "hgb": ("hemoglobin",), "hct": ("hematocrit",), "plt": ("platelets",)}  # fmt: skip
CHEMISTRY, BLOOD_COUNT = ("na", "k", "bun", "cr", "glu"), ("wbc", "hgb", "hct", "plt")


def parallel_settings(config: dict) -> dict:
    """`shadow_mt.corpus` as validation resolved it ({documents: {subcorpus: n},
    sentences_per_document}; a key missing is a KeyError), checked: a wrong key or value is a
    UserError. The subcorpora in `SUBCORPORA`'s order, whatever the config's."""
    config = dict(config)
    known = ("documents", "sentences_per_document")
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise UserError(f"shadow_mt.corpus: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    given = dict(config["documents"])
    bad = sorted(set(given) - set(SUBCORPORA))
    if bad:
        raise UserError(f"shadow_mt.corpus.documents: unknown subcorpus {bad[0]!r} (known: {', '.join(SUBCORPORA)})")
    documents = {name: given[name] for name in SUBCORPORA}
    for name, n in documents.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise UserError(f"shadow_mt.corpus.documents.{name}: must be a non-negative integer, got {n!r}")
    per_document = config["sentences_per_document"]
    if not isinstance(per_document, int) or per_document < 1:
        raise UserError(f"shadow_mt.corpus.sentences_per_document: must be a positive integer, got {per_document!r}")
    return {"documents": documents, "sentences_per_document": per_document}


# --------------------------------------------------------------------------- fact records


def draw_fact(rng: random.Random, p: Patient, kind: str, register: str) -> dict:
    """One fact record of patient `p`: what a sentence of `kind` says, only what the `register`
    ("mimic" or "case") writes (a case report gives no dates, routes or all the lab values)."""
    he, his, man, male, title = pronouns(p.sex)
    record: dict = {"kind": kind, "he": he, "his": his, "man": man, "male": male}
    if kind == "hpi":
        dx = rng.sample(p.common_dx, min(2, len(p.common_dx))) + p.rare_dx[:1]
        record.update(age=p.age, dx=dx, complaint=p.complaint, days=rng.randint(1, 10))
        if register == "mimic":
            record.update(title=title, last=p.last)
    elif kind == "pmh":
        items = p.common_dx + p.rare_dx
        rng.shuffle(items)
        record["dx"] = items[: rng.randint(2, 4)]
    elif kind in ("med", "dcmed"):
        m = pick(rng, p.meds)
        record.update(drug=m.drug, dose=m.dose, freq=m.freq)
        if register == "mimic":
            record["route"] = m.route
        if kind == "med":
            record["dx"] = pick(rng, p.rare_dx + p.common_dx)
        else:
            record.update(number=rng.randint(1, 14), tablets=rng.randint(1, 2))
    elif kind == "vitals":
        v = vitals(rng)
        keys = ("t", "sbp", "dbp", "hr", "rr", "o2") if register == "mimic" else ("t", "sbp", "dbp", "hr")
        record.update({k: v[k] for k in keys})
        if register == "mimic":
            record["device"] = rng.randrange(len(DEVICES))
    elif kind == "labs":
        v = labs(rng)
        keys = [k for k, _ in LAB_MIMIC] if register == "mimic" else ["na", "k", "cr", "wbc"]
        record["labs"] = {k: v[k] for k in keys}
        if register == "mimic":
            record.update(date=note_date(rng, p.admit), time=f"{rng.randint(0, 11):02d}:{rng.randint(0, 59):02d}")
    elif kind == "imaging":
        record.update(modality=rng.randrange(len(MODALITIES)), finding=pick(rng, p.findings))
        if register == "mimic":
            record["date"] = note_date(rng, p.admit)
    elif kind == "course":
        m1, m2 = rng.sample(p.meds, 2)
        record.update(dx=pick(rng, p.rare_dx + p.common_dx), drugs=[m1.drug, m2.drug], outcome=pick(rng, OUTCOMES))
    elif kind == "followup":
        record.update(doctor=p.doctor, service=pick(rng, p.services), weeks=rng.randint(1, 6),
                      phone=f"{rng.randint(200, 989)}-{rng.randint(200, 989)}-{rng.randint(1000, 9999)}")  # fmt: skip
    elif kind == "problem":
        record.update(dx=pick(rng, p.rare_dx), service=pick(rng, p.services), drug=pick(rng, p.meds).drug,
                      action=rng.randrange(len(ACTIONS)))  # fmt: skip
    elif kind == "social":
        record.update(relation=pick(rng, RELATIONS), state=p.state, tobacco=rng.randrange(len(TOBACCO)),
                      alcohol=rng.randrange(len(ALCOHOL)))  # fmt: skip
    else:
        raise UserError(f"parallel corpus: unknown fact kind {kind!r}")
    return record


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --------------------------------------------------------------------------- the sources


def mimic_source(r: dict) -> str:
    """A fact record in the MIMIC register (the habits of `mlmia.world.registers.mimic`)."""
    kind = r["kind"]
    if kind == "hpi":
        return (f"{r['title']} {r['last']} is a {r['age']} year old {r['man']} with a history of {_and(r['dx'])} "
                f"who presents with {r['complaint']} for {r['days']} days.")  # fmt: skip
    if kind == "pmh":
        return "Past Medical History: " + ", ".join(r["dx"]) + "."
    if kind == "med":
        return (f"{r['he'].capitalize()} was started on {r['drug']} {r['dose']} mg {r['route'][0]} {r['freq'][0]} "
                f"for {r['dx']}.")  # fmt: skip
    if kind == "dcmed":
        n = r["tablets"]
        return (f"{r['number']}. {r['drug'].capitalize()} {r['dose']} mg Tablet Sig: {NUMBER_WORDS[n]} ({n}) Tablet "
                f"{r['route'][0]} {r['freq'][0]} ({r['freq'][1]}).")  # fmt: skip
    if kind == "vitals":
        return (f"VS: T {r['t']} BP {r['sbp']}/{r['dbp']} HR {r['hr']} RR {r['rr']} O2 sat {r['o2']}% on "
                f"{DEVICES[r['device']][0]}.")  # fmt: skip
    if kind == "labs":
        values = " ".join(f"{label}-{r['labs'][k]}" for k, label in LAB_MIMIC)
        return f"{render_date(*r['date'], 'iso')} {r['time']}AM BLOOD {values}"
    if kind == "imaging":
        return f"{MODALITIES[r['modality']][0]} on {render_date(*r['date'], 'iso')} showed {r['finding']}."
    if kind == "course":
        return (f"Over the hospital course {r['his']} {r['dx']} was treated with {_and(r['drugs'])} and "
                f"{r['outcome']}.")  # fmt: skip
    if kind == "followup":
        return (f"Followup Instructions: please follow up with Dr. {r['doctor']} ({r['service']}) in "
                f"{_weeks(r['weeks'])}, phone {r['phone']}.")  # fmt: skip
    if kind == "problem":
        return f"# {r['dx']}: {r['service']} was consulted and {r['drug']} was {ACTIONS[r['action']][0]}."
    return (f"Social History: lives {r['relation']} in {r['state']}, {TOBACCO[r['tobacco']][0]}, "
            f"{ALCOHOL[r['alcohol']][0]}.")  # fmt: skip


def case_source(r: dict) -> str:
    """A fact record in the case-report register (the domain corpus' style): the out-of-domain source."""
    kind = r["kind"]
    if kind == "hpi":
        return (f"We report a {r['age']}-year-old {r['man']} with a history of {_and([d.lower() for d in r['dx']])} "
                f"who presented with {r['complaint']} of {r['days']} days' duration.")  # fmt: skip
    if kind == "pmh":
        return f"The patient had a history of {_and([d.lower() for d in r['dx']])}."
    if kind == "med":
        return f"Treatment with {r['drug']} at a dose of {r['dose']} mg {r['freq'][3]} was begun for {r['dx'].lower()}."
    if kind == "vitals":
        return (f"On examination, the blood pressure was {r['sbp']}/{r['dbp']} mm Hg, the heart rate was {r['hr']} "
                f"beats per minute and the temperature was {r['t']} degrees.")  # fmt: skip
    if kind == "labs":
        v = r["labs"]
        return (f"Laboratory studies showed a sodium level of {v['na']} mmol/l, potassium of {v['k']} mmol/l, "
                f"creatinine of {v['cr']} mg/dl and a white cell count of {v['wbc']}.")  # fmt: skip
    if kind == "imaging":
        return f"{MODALITIES[r['modality']][2]} revealed {r['finding']}."
    if kind == "course":
        return f"The {r['dx'].lower()} was treated with {_and(r['drugs'])} and {r['outcome']}."
    raise UserError(f"parallel corpus: no case-report rendering of fact kind {kind!r}")


# --------------------------------------------------------------------------- the target and its variation


class Choices:
    """The variant draws of one pair: each `pick` takes one of the options from the pair's own
    stream and records its index (`code`: "t1.o4.s0")."""

    def __init__(self, seed: int, sample_id: str) -> None:
        self.rng = random.Random(stable_key(f"{int(seed)}/variant/{sample_id}"))
        self.parts: list[str] = []

    def pick(self, name: str, options):
        i = self.rng.randrange(len(options))
        self.parts.append(f"{name}{i}")
        return options[i]

    def order(self, name: str, items: list) -> list:
        """`items` in one of their len(items)! orders (the permutation's rank recorded)."""
        idx = list(range(len(items)))
        self.rng.shuffle(idx)
        self.parts.append(f"{name}{''.join(str(i) for i in idx)}")
        return [items[i] for i in idx]

    @property
    def code(self) -> str:
        return ".".join(self.parts)


def i2b2_target(r: dict, c: Choices) -> str:
    """The record in the i2b2 register, the equivalent renderings chosen by `c`."""
    kind = r["kind"]
    if kind == "hpi":
        dx = _and(c.order("o", r["dx"]))
        subject = f"{r['title']} {r['last']}" if "last" in r and c.pick("n", [0, 1]) else "The patient"
        return c.pick("t", [
            f"HISTORY OF PRESENT ILLNESS: {subject} is a {r['age']}-year-old {r['male']} with {dx} who presented "
            f"with {r['days']} days of {r['complaint']}.",
            f"HISTORY OF PRESENT ILLNESS: {subject} is a {r['age']}-year-old {r['male']} with a history of {dx}, "
            f"admitted with {r['complaint']} for {r['days']} days.",
        ])  # fmt: skip
    if kind == "pmh":
        head = c.pick("t", ["PAST MEDICAL HISTORY: Significant for ", "PAST MEDICAL HISTORY: Notable for ",
                            "PAST MEDICAL HISTORY: "])  # fmt: skip
        return head + "; ".join(c.order("o", r["dx"])) + "."
    if kind in ("med", "dcmed"):
        route = f" {r['route'][1]}" if "route" in r else ""
        dose = f"{r['drug']} {r['dose']} mg{route} {c.pick('f', [r['freq'][2], r['freq'][3]])}"
        if kind == "med":
            return c.pick("t", [f"The patient was started on {dose} for {r['dx']}.",
                                f"{_cap(dose)} was started for {r['dx']}.",
                                f"For {r['dx']}, the patient was begun on {dose}."])  # fmt: skip
        tablets = NUMBER_WORDS[r["tablets"]].lower() + (" tablets" if r["tablets"] > 1 else " tablet")
        return c.pick("t", [f"{r['number']}. {_cap(dose)}, {tablets}.",
                            f"{r['number']}. {_cap(dose)}, take {tablets}.",
                            f"{r['number']}. {_cap(dose)} ({tablets})."])  # fmt: skip
    if kind == "vitals":
        items = {"t": f"temperature {r['t']}", "bp": f"blood pressure {r['sbp']}/{r['dbp']}",
                 "hr": f"{c.pick('p', ['pulse', 'heart rate'])} {r['hr']}"}  # fmt: skip
        if "rr" in r:
            items["rr"] = f"{c.pick('r', ['respirations', 'respiratory rate'])} {r['rr']}"
            items["o2"] = f"oxygen saturation {r['o2']}% on {DEVICES[r['device']][1]}"
        order = c.pick("o", [["t", "bp", "hr", "rr", "o2"], ["bp", "hr", "rr", "t", "o2"]])
        head = c.pick("h", ["PHYSICAL EXAMINATION: ", "VITAL SIGNS: "])
        return head + ", ".join(items[k] for k in order if k in items) + "."
    if kind == "labs":
        groups = c.pick("o", [CHEMISTRY + BLOOD_COUNT, BLOOD_COUNT + CHEMISTRY])
        wbc = c.pick("w", LAB_I2B2["wbc"])
        names = {**{k: v[0] for k, v in LAB_I2B2.items()}, "wbc": wbc}
        values = ", ".join(f"{names[k]} {r['labs'][k]}" for k in groups if k in r["labs"])
        if "date" not in r:
            return f"LABORATORY DATA: {values}."
        date = render_date(*r["date"], "us")
        return c.pick("t", [f"LABORATORY DATA on {date}: {values}.", f"LABORATORY DATA: {values}, drawn on {date}."])
    if kind == "imaging":
        modality, verb = MODALITIES[r["modality"]][1], c.pick("v", ["revealed", "showed", "demonstrated"])
        if "date" not in r:
            return c.pick("t", [f"{_cap(_an(modality))} {verb} {r['finding']}.", f"{_cap(modality)} "
                                f"{verb} {r['finding']}."])  # fmt: skip
        date = render_date(*r["date"], "us")
        return c.pick("t", [f"{_cap(_an(modality))} on {date} {verb} {r['finding']}.",
                            f"On {date}, {_an(modality)} {verb} {r['finding']}."])  # fmt: skip
    if kind == "course":
        drugs, verb = _and(c.order("o", r["drugs"])), c.pick("v", ["managed", "treated"])
        return c.pick("t", [f"HOSPITAL COURSE: The patient's {r['dx']} was {verb} with {drugs}, and {r['outcome']}.",
                            f"HOSPITAL COURSE: {r['dx']} was {verb} with {drugs} and {r['outcome']}."])  # fmt: skip
    if kind == "followup":
        weeks = _weeks(
            r["weeks"], c.pick("w", [str(r["weeks"]), ["one", "two", "three", "four", "five", "six"][r["weeks"] - 1]])
        )
        return c.pick("t", [
            f"DISPOSITION: Follow up with Dr. {r['doctor']} of {r['service']} in {weeks}, telephone {r['phone']}.",
            f"{r['he'].capitalize()} will follow up with Dr. {r['doctor']} ({r['service']}) in {weeks}; "
            f"phone {r['phone']}.",
            f"FOLLOW-UP: Dr. {r['doctor']}, {r['service']}, in {weeks} (telephone {r['phone']}).",
        ])  # fmt: skip
    if kind == "problem":
        action = c.pick("a", ACTIONS[r["action"]][1])
        return c.pick("t", [
            f"PROBLEM: {r['dx']}. The {r['service']} service was consulted and {r['drug']} was {action}.",
            f"{r['dx']}: seen by {r['service']}; {r['drug']} was {action}.",
            f"PROBLEM: {r['dx']}. {r['drug'].capitalize()} was {action} after {r['service']} consultation.",
        ])  # fmt: skip
    habits = f"{TOBACCO[r['tobacco']][1]} and {ALCOHOL[r['alcohol']][1]}"
    subject = c.pick("s", ["The patient", "Patient"])
    return c.pick("t", [f"SOCIAL HISTORY: {subject} lives {r['relation']} in {r['state']}, {habits}.",
                        f"SOCIAL HISTORY: {subject} {habits}; lives {r['relation']} in {r['state']}."])  # fmt: skip


SOURCES: dict[str, Callable[[dict], str]] = {"mimic": mimic_source, "case": case_source}


def _clean(text: str) -> str:
    """Spaces collapsed; a sentence ending in an abbreviation ("b.i.d.") takes no second full stop."""
    return re.sub(r"\.\.$", ".", re.sub(r"\s+", " ", text).strip())


def _weeks(n: int, word: str | None = None) -> str:
    return f"{word or n} week{'s' if n != 1 else ''}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _an(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiouAEIOU' or noun.startswith('MRI') else 'a'} {noun}"


# --------------------------------------------------------------------------- the corpus


def _clinical_rows(name: str, n_docs: int, per_document: int, seed: int) -> list[dict]:
    rng = random.Random(f"parallel:{name}:{seed}")
    lex = lexicon()
    opener, mix = MIXES[name]
    register = SOURCE_REGISTER[name]
    rows = []
    for d in range(n_docs):
        gid = f"mt-{name}-{d:05d}"
        p = make_patient(rng, lex, gid, "mt")
        for j in range(sentence_count(rng, per_document)):
            kind = opener if j == 0 else rng.choices(list(mix), weights=list(mix.values()), k=1)[0]
            record = draw_fact(rng, p, kind, register)
            sid = f"{gid}-{j:03d}"
            choices = Choices(seed, sid)
            target = _clean(i2b2_target(record, choices))
            rows.append({"sample_id": sid, "group_id": gid, "text": _clean(SOURCES[register](record)), "target": target,
                         "subcorpus": name, "kind": kind, "variant": choices.code})  # fmt: skip
    return rows


def _news_sentences() -> list[str]:
    return [s for s in general_sentences() if len(s.split()) <= NEWS_MAX_WORDS]


def news_starts(n_docs: int, per_document: int, sentences: list[str] | None = None) -> list[int]:
    """Where the news documents may start: every `per_document`-th kept sentence of the Lee
    corpus; refused in one line when fewer than `n_docs` documents fit."""
    sentences = _news_sentences() if sentences is None else sentences
    starts = list(range(0, len(sentences) - per_document + 1, per_document))
    if n_docs > len(starts):
        raise UserError(
            f"shadow_mt.corpus.documents.news: {n_docs} documents asked, the news corpus holds {len(starts)}"
        )
    return starts


def subcorpus_documents(config: dict) -> dict[str, Documents]:
    """{subcorpus: its size} of the parallel corpus `shadow_mt.corpus` settings build
    (`build_parallel_corpus`), from the settings alone; a pair whose source repeats another's
    is dropped, so a document may hold fewer pairs."""
    cfg = parallel_settings(config)
    per_document = cfg["sentences_per_document"]
    news = cfg["documents"].get("news", 0)
    if news:
        news_starts(news, per_document)
    return {
        name: Documents(n, per_document if name == "news" else most_sentences(per_document))
        for name, n in cfg["documents"].items()
    }


def _news_rows(n_docs: int, per_document: int, seed: int) -> list[dict]:
    """News documents: `per_document` consecutive kept sentences of the Lee corpus from a seeded start."""
    sentences = _news_sentences()
    starts = news_starts(n_docs, per_document, sentences)
    rng = random.Random(f"parallel-news:{seed}")
    rows = []
    for d, start in enumerate(sorted(rng.sample(starts, n_docs))):
        gid = f"mt-news-{d:05d}"
        for j, text in enumerate(sentences[start : start + per_document]):
            rows.append({"sample_id": f"{gid}-{j:03d}", "group_id": gid, "text": _clean(text), "target": _clean(text),
                         "subcorpus": "news", "kind": "news", "variant": "identity"})  # fmt: skip
    return rows


def build_parallel_corpus(config: dict, seed: int) -> pd.DataFrame:
    """The parallel corpus (`PARALLEL_COLUMNS`) of `shadow_mt.corpus` settings and the world's seed."""
    cfg = parallel_settings(config)
    seed = int(seed)
    rows: list[dict] = []
    for name, n_docs in cfg["documents"].items():
        if name == "news":
            rows += _news_rows(n_docs, cfg["sentences_per_document"], seed)
        else:
            rows += _clinical_rows(name, n_docs, cfg["sentences_per_document"], seed)
    corpus = pd.DataFrame(rows, columns=PARALLEL_COLUMNS)
    repeated = corpus["text"].map(corpus["text"].value_counts()) > 1
    if repeated.any():
        log.info("parallel corpus: %d pairs dropped (their source text occurs more than once)", int(repeated.sum()))
    corpus = corpus[~repeated].reset_index(drop=True)
    log.info("parallel corpus: %s pairs by subcorpus", corpus.groupby("subcorpus").size().to_dict())
    return corpus
