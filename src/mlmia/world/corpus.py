"""The embedded default world: seeded synthetic clinical corpora built from real vocabulary.

Nothing here is downloaded. The material comes from installed packages:

- surrogate patient and physician names: faker's frequency-weighted US first names and surnames;
- diagnoses: ICD-10-CM descriptions (`simple-icd-10-cm`): a short list of common inpatient
  diagnoses (Zipf-weighted) plus a large pool of rare, patient-specific ones;
- drugs: generic names from `drug-named-entity-recognition` (common inpatient drugs plus a pool
  of rarer prescription drugs), with doses, routes and frequencies;
- general English prose: the Lee news corpus shipped in gensim's test data.

Sources (each a "register" of the same clinical world, so the same vocabulary in other words):

- `mimic`: discharge-summary style (MIMIC-III habits: `Sig: One (1) Tablet PO BID`, lab strings
  such as `WBC-11.2`, `# diagnosis:` problem lines, terse exam lines). Its patients are the
  target's members (`member`, `member_heldin`), the held-out non-members and a `population`
  of its own (drawn after everything else, so that adding it changes no other row).
- `i2b2`: a shifted source (Partners habits: upper-case section headers, `p.o. b.i.d.`,
  MM/DD/YYYY dates, spelled-out vitals): a second non-member set and the `population`.
- `domain`: the stand-in for PubMed: disjoint patients written up in case-report / abstract style,
  mixed with a share of clinical-note sentences (same vocabulary, different style).
- `general`: real news prose, with a share of encyclopedic medical prose (the general reference;
  bert-base-uncased read Wikipedia, whose medical articles use the clinical vocabulary but not
  the note registers).

Sentences vary widely in intrinsic difficulty (formulaic exam lines next to rare-diagnosis
narrative and number-dense lab lines): that is what makes the loss attack weak and the
likelihood ratio strong. Every patient has a fixed set of facts (diagnoses, drugs and doses,
physician) that recur across their sentences; rare facts are the sample-specific content a
model can memorise.
"""

from __future__ import annotations

import bz2
import functools
import importlib.util
import pickle
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.world.patient_phi import DATE_JITTER, LAST_DAY, patient_phi, render_date

log = get_logger(__name__)

SOURCES = ("mimic", "i2b2")


#: corpus settings with their defaults (the `corpus:` section of the config)
CORPUS_DEFAULTS: dict = {
    "seed": 0,
    "sentences_per_patient": 4,
    "mimic": {"member_patients": 220, "heldin_patients": 60, "nonmember_patients": 130, "population_patients": 90},
    "i2b2": {"nonmember_patients": 130, "population_patients": 70, "shift": 0.15},
    "domain": {"patients": 300, "abstract_sentences": 100, "note_share": 0.95},
    "general": {"sentences": 1200, "medical_share": 0.6, "note_share": 0.4},
}


def corpus_settings(config: dict | None) -> dict:
    """Defaults filled in (one level deep); unknown keys are an error."""
    config = dict(config or {})
    out: dict = {}
    for key, default in CORPUS_DEFAULTS.items():
        if isinstance(default, dict):
            sub = dict(config.get(key) or {})
            unknown = [k for k in sub if k not in default]
            if unknown:
                raise UserError(
                    f"corpus.{key}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(default)})"
                )
            out[key] = {**default, **sub}
        else:
            out[key] = config.get(key, default)
    unknown = [k for k in config if k not in CORPUS_DEFAULTS]
    if unknown:
        raise UserError(f"corpus: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(CORPUS_DEFAULTS)})")
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


# --------------------------------------------------------------------------------------------
# the lexicon (real vocabulary from packages)

COMMON_ICD = [
    "I10",
    "E119",
    "I4891",
    "J449",
    "E785",
    "I5022",
    "N179",
    "J189",
    "A419",
    "K219",
    "I2510",
    "D649",
    "N390",
    "E039",
    "F329",
    "J9601",
    "E871",
    "G4733",
    "N184",
    "F419",
    "I214",
    "E1122",
    "K922",
    "D696",
    "I269",
    "J90",
    "R0789",
    "G9341",
    "E1165",
    "K5900",
    "I110",
    "M199",
    "R4182",
    "F17210",
    "K7469",
    "I639",
    "E872",
    "I959",
    "J45909",
    "C3490",
]

COMMON_DRUGS = [
    "metoprolol",
    "lisinopril",
    "furosemide",
    "heparin",
    "insulin",
    "aspirin",
    "atorvastatin",
    "vancomycin",
    "amlodipine",
    "pantoprazole",
    "acetaminophen",
    "warfarin",
    "simvastatin",
    "docusate",
    "senna",
    "ondansetron",
    "oxycodone",
    "morphine",
    "levothyroxine",
    "gabapentin",
    "prednisone",
    "ceftriaxone",
    "piperacillin",
    "azithromycin",
    "albuterol",
    "enoxaparin",
    "clopidogrel",
    "carvedilol",
    "hydralazine",
    "spironolactone",
    "tamsulosin",
    "omeprazole",
    "lorazepam",
    "haloperidol",
    "quetiapine",
    "metformin",
    "lactulose",
    "famotidine",
    "sertraline",
    "trazodone",
    "diltiazem",
    "amiodarone",
    "labetalol",
    "citalopram",
]

COMPLAINTS = [
    "shortness of breath",
    "chest pain",
    "fever and chills",
    "abdominal pain",
    "altered mental status",
    "nausea and vomiting",
    "productive cough",
    "lower extremity edema",
    "syncope",
    "melena",
    "hematemesis",
    "generalized weakness",
    "dysuria",
    "headache",
    "palpitations",
    "back pain",
    "confusion",
    "dizziness",
    "fatigue",
    "hypotension",
    "a fall at home",
    "diarrhea",
    "worsening dyspnea on exertion",
    "left sided weakness",
    "slurred speech",
    "jaundice",
]

SERVICES = [
    "cardiology",
    "nephrology",
    "gastroenterology",
    "infectious disease",
    "pulmonary",
    "neurology",
    "hepatology",
    "endocrinology",
    "hematology",
    "oncology",
    "surgery",
    "urology",
    "psychiatry",
    "rheumatology",
    "dermatology",
    "vascular surgery",
    "physical therapy",
    "social work",
]

FINDINGS = [
    "a small left pleural effusion",
    "bibasilar atelectasis",
    "no acute intracranial process",
    "a right lower lobe consolidation",
    "mild cardiomegaly",
    "a hypodense lesion in the liver",
    "diffuse ground glass opacities",
    "a nonobstructing renal calculus",
    "moderate ascites",
    "pulmonary vascular congestion",
    "a spiculated nodule in the right upper lobe",
    "no evidence of pulmonary embolism",
    "a dilated common bile duct",
    "an old lacunar infarct",
    "a small pericardial effusion",
    "multilevel degenerative changes",
    "free air under the diaphragm",
    "a left lower lobe infiltrate",
    "an enlarged spleen",
    "diverticulosis without diverticulitis",
]

OUTCOMES = [
    "improved steadily",
    "resolved by discharge",
    "remained stable",
    "was slow to improve",
    "worsened briefly before improving",
    "was monitored closely",
    "required an ICU transfer",
    "returned to baseline",
    "was managed conservatively",
    "responded well",
]

RELATIONS = [
    "with his wife",
    "with her husband",
    "with his daughter",
    "with her son",
    "with a roommate",
    "with her sister",
    "with his brother",
    "alone",
    "with family",
]

FREQS = [
    ("daily", "once a day", "q.d.", "once daily"),
    ("BID", "2 times a day", "b.i.d.", "twice daily"),
    ("TID", "3 times a day", "t.i.d.", "three times daily"),
    ("QID", "4 times a day", "q.i.d.", "four times daily"),
    ("Q8H", "every 8 hours", "q.8h.", "every eight hours"),
    ("Q6H", "every 6 hours", "q.6h.", "every six hours"),
    ("QHS", "at bedtime", "q.h.s.", "at bedtime"),
    ("PRN", "as needed", "p.r.n.", "as needed"),
]
ROUTES = [
    ("PO", "p.o.", "orally"),
    ("IV", "intravenously", "intravenously"),
    ("SC", "subcutaneously", "subcutaneously"),
]
DOSES = [
    "0.5",
    "1",
    "2",
    "2.5",
    "5",
    "10",
    "12.5",
    "20",
    "25",
    "40",
    "50",
    "75",
    "80",
    "100",
    "125",
    "150",
    "200",
    "250",
    "300",
    "400",
    "500",
    "600",
    "750",
    "1000",
]
NUMBER_WORDS = {1: "One", 2: "Two", 3: "Three", 4: "Four"}


@dataclass(frozen=True)
class Lexicon:
    first_female: tuple
    w_female: tuple
    first_male: tuple
    w_male: tuple
    last: tuple
    w_last: tuple
    common_dx: tuple
    w_common_dx: tuple
    rare_dx: tuple
    common_drugs: tuple
    w_common_drugs: tuple
    rare_drugs: tuple
    states: tuple


def _clean_icd(desc: str) -> str:
    desc = re.sub(r",? (initial|subsequent) encounter.*$|, sequela$", "", desc)
    return desc.strip()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"package {name!r} is not installed (pip install {name.replace('_', '-')})")
    return Path(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    """Load the real vocabulary from the installed packages (cached)."""
    import warnings

    from faker.providers.address.en_US import Provider as Address
    from faker.providers.person.en_US import Provider as Person

    with warnings.catch_warnings():  # simple_icd_10_cm reads its data with deprecated importlib calls
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm

        cm.get_all_codes(False)

    def zipf(n: int) -> tuple:
        return tuple(1.0 / (i + 1) for i in range(n))

    common_dx = [_clean_icd(cm.get_description(c)) for c in COMMON_ICD]
    rare = []
    for code in cm.get_all_codes(False):
        if code[0] in "STVWXYZOP" or not cm.is_leaf(code) or code in COMMON_ICD:
            continue
        desc = _clean_icd(cm.get_description(code))
        if 3 <= len(desc.split()) <= 14 and "unspecified" not in desc.lower()[:12]:
            rare.append(desc)
    rare = sorted(set(rare))

    pkl = _package_dir("drug_named_entity_recognition") / "drug_ner_dictionary.pkl.bz2"
    with bz2.open(pkl, "rb") as fh:
        canonical = pickle.load(fh)["drug_canonical_to_data"]
    missing = [d for d in COMMON_DRUGS if d not in canonical]
    if missing:
        raise UserError(f"drug dictionary lacks {', '.join(missing)}")
    rare_drugs = sorted(
        k
        for k, v in canonical.items()
        if "medline_plus_id" in v and re.fullmatch(r"[a-z]{5,}", k) and k not in COMMON_DRUGS
    )
    return Lexicon(
        first_female=tuple(Person.first_names_female),
        w_female=tuple(Person.first_names_female.values()),
        first_male=tuple(Person.first_names_male),
        w_male=tuple(Person.first_names_male.values()),
        last=tuple(Person.last_names),
        w_last=tuple(Person.last_names.values()),
        common_dx=tuple(common_dx),
        w_common_dx=zipf(len(common_dx)),
        rare_dx=tuple(rare),
        common_drugs=tuple(COMMON_DRUGS),
        w_common_drugs=zipf(len(COMMON_DRUGS)),
        rare_drugs=tuple(rare_drugs),
        states=tuple(Address.states),
    )


# --------------------------------------------------------------------------------------------
# patients


@dataclass
class Med:
    drug: str
    dose: str
    route: tuple
    freq: tuple
    rare: bool


@dataclass
class Patient:
    pid: str
    source: str
    first: str
    last: str
    sex: str
    age: int
    mrn: str
    admit: tuple  # (year, month, day)
    doctor: str
    complaint: str
    common_dx: list
    rare_dx: list
    meds: list
    services: list
    state: str
    findings: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


def _pick(rng: random.Random, items, weights=None):
    if weights is None:
        return items[rng.randrange(len(items))]
    return rng.choices(items, weights=weights, k=1)[0]


def make_patient(rng: random.Random, lex: Lexicon, pid: str, source: str) -> Patient:
    sex = "F" if rng.random() < 0.5 else "M"
    first = _pick(rng, lex.first_female, lex.w_female) if sex == "F" else _pick(rng, lex.first_male, lex.w_male)
    last = _pick(rng, lex.last, lex.w_last)
    n_common = rng.randint(2, 4)
    common = []
    while len(common) < n_common:
        d = _pick(rng, lex.common_dx, lex.w_common_dx)
        if d not in common:
            common.append(d)
    rare = rng.sample(lex.rare_dx, rng.randint(1, 3))
    meds = []
    n_meds = rng.randint(3, 6)
    while len(meds) < n_meds:
        is_rare = rng.random() < 0.35
        drug = _pick(rng, lex.rare_drugs) if is_rare else _pick(rng, lex.common_drugs, lex.w_common_drugs)
        if any(m.drug == drug for m in meds):
            continue
        route = ROUTES[0] if rng.random() < 0.7 else _pick(rng, ROUTES)
        meds.append(Med(drug, _pick(rng, DOSES), route, _pick(rng, FREQS), is_rare))
    return Patient(
        pid=pid,
        source=source,
        first=first,
        last=last,
        sex=sex,
        age=rng.randint(22, 94),
        mrn=str(rng.randint(1000000, 9999999)),
        admit=(rng.randint(2100, 2190), rng.randint(1, 12), rng.randint(1, 28)),
        doctor=_pick(rng, lex.last, lex.w_last),
        complaint=_pick(rng, COMPLAINTS),
        common_dx=common,
        rare_dx=rare,
        meds=meds,
        services=rng.sample(SERVICES, 3),
        state=_pick(rng, lex.states),
        findings=rng.sample(FINDINGS, 2),
    )


# --------------------------------------------------------------------------------------------
# sentence templates: one family per register


def _num(rng, lo, hi, nd=0):
    v = rng.uniform(lo, hi)
    return f"{v:.{nd}f}" if nd else str(int(round(v)))


def _vitals(rng):
    return dict(
        t=_num(rng, 96.5, 101.8, 1),
        sbp=_num(rng, 88, 182),
        dbp=_num(rng, 48, 104),
        hr=_num(rng, 52, 128),
        rr=_num(rng, 12, 28),
        o2=_num(rng, 88, 100),
    )


def _labs(rng):
    return dict(
        wbc=_num(rng, 2.5, 19.5, 1),
        hgb=_num(rng, 6.8, 15.9, 1),
        hct=_num(rng, 21, 47, 1),
        plt=_num(rng, 45, 480),
        na=_num(rng, 124, 148),
        k=_num(rng, 2.9, 5.9, 1),
        cl=_num(rng, 92, 112),
        hco3=_num(rng, 16, 32),
        bun=_num(rng, 6, 88),
        cr=_num(rng, 0.5, 4.8, 1),
        glu=_num(rng, 68, 390),
    )


def _he(p):
    return ("she", "her", "woman", "female", "Ms.") if p.sex == "F" else ("he", "his", "man", "male", "Mr.")


def _dx_any(rng, p):
    return _pick(rng, p.rare_dx + p.common_dx)


def _date(p, rng, fmt):
    y, m, d = p.admit
    return render_date(y, m, min(LAST_DAY, d + rng.randint(0, DATE_JITTER)), fmt)


# --- mimic: MIMIC-III discharge summary habits


def _m_hpi(rng, p):
    he, his, man, _, title = _he(p)
    dx = rng.sample(p.common_dx, min(2, len(p.common_dx))) + p.rare_dx[:1]
    return (
        f"{title} {p.last} is a {p.age} year old {man} with a history of {', '.join(dx[:-1])} and {dx[-1]} "
        f"who presents with {p.complaint} for {rng.randint(1, 10)} days."
    )


def _m_pmh(rng, p):
    items = p.common_dx + p.rare_dx
    rng.shuffle(items)
    return "Past Medical History: " + ", ".join(items[: rng.randint(2, 4)]) + "."


def _m_problem(rng, p):
    m = _pick(rng, p.meds)
    return (
        f"# {_pick(rng, p.rare_dx)}: {_pick(rng, p.services)} was consulted and {m.drug} was "
        f"{_pick(rng, ['started', 'continued', 'held', 'uptitrated'])}."
    )


def _m_med(rng, p):
    m = _pick(rng, p.meds)
    return (
        f"{_he(p)[0].capitalize()} was started on {m.drug} {m.dose} mg {m.route[0]} {m.freq[0]} for {_dx_any(rng, p)}."
    )


def _m_dcmed(rng, p):
    m = _pick(rng, p.meds)
    n = rng.randint(1, 2)
    return (
        f"{rng.randint(1, 14)}. {m.drug.capitalize()} {m.dose} mg Tablet Sig: {NUMBER_WORDS[n]} ({n}) Tablet "
        f"{m.route[0]} {m.freq[0]} ({m.freq[1]})."
    )


def _m_vitals(rng, p):
    v = _vitals(rng)
    return (
        f"VS: T {v['t']} BP {v['sbp']}/{v['dbp']} HR {v['hr']} RR {v['rr']} O2 sat {v['o2']}% on "
        f"{_pick(rng, ['RA', '2L NC', '4L NC', 'NRB', '40% FM'])}."
    )


def _m_labs(rng, p):
    v = _labs(rng)
    return (
        f"{_date(p, rng, 'iso')} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}AM BLOOD WBC-{v['wbc']} "
        f"Hgb-{v['hgb']} Hct-{v['hct']} Plt Ct-{v['plt']} Glucose-{v['glu']} UreaN-{v['bun']} "
        f"Creat-{v['cr']} Na-{v['na']} K-{v['k']}"
    )


EXAM_MIMIC = [
    "General: alert and oriented x3, no acute distress.",
    "HEENT: NC/AT, PERRLA, EOMI, sclera anicteric, MMM.",
    "Neck: supple, JVP not elevated, no LAD.",
    "Lungs: clear to auscultation bilaterally, no wheezes, rales, rhonchi.",
    "CV: regular rate and rhythm, normal S1 + S2, no murmurs, rubs, gallops.",
    "Abdomen: soft, non-tender, non-distended, bowel sounds present, no organomegaly.",
    "Ext: warm, well perfused, 2+ pulses, no clubbing, cyanosis or edema.",
    "Neuro: CNII-XII intact, 5/5 strength upper/lower extremities, gait deferred.",
    "Skin: no rashes or lesions noted.",
]


def _m_exam(rng, p):
    line = _pick(rng, EXAM_MIMIC)
    if rng.random() < 0.3:
        line = (
            line[:-1]
            + f", {_pick(rng, ['trace', '1+', '2+'])} edema to the {_pick(rng, ['ankles', 'shins', 'knees'])}."
        )
    return line


def _m_imaging(rng, p):
    return (
        f"{_pick(rng, ['CXR', 'CT chest', 'CT abd/pelvis', 'CT head', 'RUQ US', 'MRI'])} on "
        f"{_date(p, rng, 'iso')} showed {_pick(rng, p.findings)}."
    )


def _m_followup(rng, p):
    return (
        f"Followup Instructions: please follow up with Dr. {p.doctor} ({_pick(rng, p.services)}) in "
        f"{rng.randint(1, 6)} weeks, phone {rng.randint(200, 989)}-{rng.randint(200, 989)}-{rng.randint(1000, 9999)}."
    )


def _m_course(rng, p):
    he, his, *_ = _he(p)
    m1, m2 = rng.sample(p.meds, 2)
    return (
        f"Over the hospital course {his} {_dx_any(rng, p)} was treated with {m1.drug} and {m2.drug} and "
        f"{_pick(rng, OUTCOMES)}."
    )


def _m_social(rng, p):
    return (
        f"Social History: lives {_pick(rng, RELATIONS)} in {p.state}, "
        f"{_pick(rng, ['quit tobacco 10 years ago', 'smokes 1 ppd', 'denies tobacco', 'former smoker'])}, "
        f"{_pick(rng, ['occasional etoh', 'denies etoh', 'heavy etoh', 'no illicits'])}."
    )


def _m_allergy(rng, p):
    return f"Allergies: {_pick(rng, ['Penicillins', 'Sulfa (Sulfonamide Antibiotics)', 'Codeine', 'No Known Allergies to Drugs', 'Iodine', 'Latex'])}"


MIMIC_TEMPLATES = [
    (_m_pmh, 1.0),
    (_m_problem, 1.6),
    (_m_med, 1.4),
    (_m_dcmed, 1.6),
    (_m_vitals, 1.0),
    (_m_labs, 1.0),
    (_m_exam, 2.0),
    (_m_imaging, 0.7),
    (_m_followup, 0.5),
    (_m_course, 1.0),
    (_m_social, 0.5),
    (_m_allergy, 0.4),
]


# --- i2b2: Partners discharge summary habits (the shifted source)


def _i_hpi(rng, p):
    he, his, man, male, _ = _he(p)
    dx = rng.sample(p.common_dx, min(2, len(p.common_dx)))
    return (
        f"HISTORY OF PRESENT ILLNESS: The patient is a {p.age}-year-old {male} with {' and '.join(dx)} who was "
        f"admitted on {_date(p, rng, 'us')} with {p.complaint}."
    )


def _i_pmh(rng, p):
    items = p.common_dx + p.rare_dx
    rng.shuffle(items)
    return "PAST MEDICAL HISTORY: Significant for " + "; ".join(items[: rng.randint(2, 4)]) + "."


def _i_problem(rng, p):
    return (
        f"{rng.randint(1, 6)}. {_pick(rng, p.rare_dx)}. The patient was seen by the {_pick(rng, p.services)} "
        f"service, who recommended {_pick(rng, ['continued observation', 'outpatient follow-up', 'a repeat study', 'no further workup'])}."
    )


def _i_med(rng, p):
    ms = rng.sample(p.meds, 2)
    return (
        "MEDICATIONS ON ADMISSION: " + ", ".join(f"{m.drug} {m.dose} mg {m.route[1]} {m.freq[2]}" for m in ms)
    ).rstrip(".") + "."


def _i_dcmed(rng, p):
    m = _pick(rng, p.meds)
    return f"{m.drug.capitalize()} {m.dose} mg {m.route[1]} {m.freq[2]}".rstrip(".") + "."


def _i_vitals(rng, p):
    v = _vitals(rng)
    return (
        f"PHYSICAL EXAMINATION: Temperature {v['t']}, blood pressure {v['sbp']}/{v['dbp']}, pulse {v['hr']}, "
        f"respirations {v['rr']}, oxygen saturation {v['o2']}% on {_pick(rng, ['room air', '2 liters', 'nasal cannula'])}."
    )


def _i_labs(rng, p):
    v = _labs(rng)
    return (
        f"LABORATORY DATA: Sodium {v['na']}, potassium {v['k']}, chloride {v['cl']}, bicarbonate {v['hco3']}, "
        f"BUN {v['bun']}, creatinine {v['cr']}, glucose {v['glu']}, white count {v['wbc']}."
    )


EXAM_I2B2 = [
    "HEENT: Normocephalic, atraumatic.",
    "NECK: Supple without lymphadenopathy.",
    "CHEST: Clear to auscultation bilaterally.",
    "HEART: Regular rate and rhythm without murmurs.",
    "ABDOMEN: Soft, nontender, nondistended with positive bowel sounds.",
    "EXTREMITIES: Without clubbing, cyanosis, or edema.",
    "NEUROLOGIC: Nonfocal.",
    "GENERAL: The patient is a well-developed, well-nourished individual in no apparent distress.",
]


def _i_exam(rng, p):
    return _pick(rng, EXAM_I2B2)


def _i_imaging(rng, p):
    return (
        f"A {_pick(rng, ['chest x-ray', 'CT scan of the chest', 'CT scan of the abdomen', 'head CT', 'ultrasound'])} "
        f"on {_date(p, rng, 'us')} revealed {_pick(rng, p.findings)}."
    )


def _i_followup(rng, p):
    he, *_ = _he(p)
    return f"{he.capitalize()} will follow up with Dr. {p.doctor} in {rng.randint(1, 6)} weeks."


def _i_course(rng, p):
    m = _pick(rng, p.meds)
    return (
        f"HOSPITAL COURSE: The patient's {_dx_any(rng, p)} was managed with {m.drug}, and the patient "
        f"{_pick(rng, OUTCOMES)}."
    )


def _i_social(rng, p):
    return (
        f"SOCIAL HISTORY: The patient {_pick(rng, ['is a former smoker', 'denies tobacco use', 'smokes one pack per day'])} "
        f"and lives {_pick(rng, RELATIONS)}."
    )


I2B2_TEMPLATES = [
    (_i_pmh, 1.0),
    (_i_problem, 1.4),
    (_i_med, 1.2),
    (_i_dcmed, 1.4),
    (_i_vitals, 1.0),
    (_i_labs, 1.0),
    (_i_exam, 2.0),
    (_i_imaging, 0.7),
    (_i_followup, 0.5),
    (_i_course, 1.2),
    (_i_social, 0.5),
]


# --- domain: case-report / abstract register (the PubMed stand-in)


def _d_case(rng, p):
    he, his, man, *_ = _he(p)
    return (
        f"We report a {p.age}-year-old {man} who presented with {p.complaint} and was found to have "
        f"{_pick(rng, p.rare_dx).lower()}."
    )


def _d_history(rng, p):
    dx = rng.sample(p.common_dx + p.rare_dx, 2)
    return f"The patient had a history of {dx[0].lower()} and {dx[1].lower()}."


def _d_treat(rng, p):
    m = _pick(rng, p.meds)
    return (
        f"Treatment with {m.drug} at a dose of {m.dose} mg {m.freq[3]} was associated with "
        f"{_pick(rng, ['clinical improvement', 'partial remission', 'resolution of symptoms', 'no benefit'])}."
    )


def _d_vitals(rng, p):
    v = _vitals(rng)
    return (
        f"On examination, the blood pressure was {v['sbp']}/{v['dbp']} mm Hg, the heart rate was {v['hr']} "
        f"beats per minute and the temperature was {v['t']} degrees."
    )


def _d_labs(rng, p):
    v = _labs(rng)
    return (
        f"Laboratory studies showed a sodium level of {v['na']} mmol/l, potassium of {v['k']} mmol/l, "
        f"creatinine of {v['cr']} mg/dl and a white cell count of {v['wbc']}."
    )


def _d_imaging(rng, p):
    return (
        f"{_pick(rng, ['Computed tomography', 'Chest radiography', 'Magnetic resonance imaging', 'Ultrasonography'])} "
        f"revealed {_pick(rng, p.findings)}."
    )


def _d_course(rng, p):
    m = _pick(rng, p.meds)
    return f"After {rng.randint(2, 21)} days of {m.drug}, the {_dx_any(rng, p).lower()} {_pick(rng, OUTCOMES)}."


def _d_exam(rng, p):
    return _pick(
        rng,
        [
            "Physical examination was otherwise unremarkable.",
            "The lungs were clear on auscultation.",
            "Cardiac examination revealed a regular rhythm without murmurs.",
            "The abdomen was soft and nontender.",
            "Neurological examination was normal.",
            "There was no peripheral edema.",
        ],
    )


DOMAIN_TEMPLATES = [
    (_d_history, 1.0),
    (_d_treat, 1.6),
    (_d_vitals, 1.0),
    (_d_labs, 1.0),
    (_d_imaging, 0.8),
    (_d_course, 1.2),
    (_d_exam, 1.5),
]


def _abstract(rng: random.Random, lex: Lexicon) -> str:
    dx = _pick(rng, lex.rare_dx).lower() if rng.random() < 0.6 else _pick(rng, lex.common_dx, lex.w_common_dx).lower()
    dx2 = _pick(rng, lex.common_dx, lex.w_common_dx).lower()
    drug = _pick(rng, lex.rare_drugs) if rng.random() < 0.4 else _pick(rng, lex.common_drugs, lex.w_common_drugs)
    n = rng.randint(24, 2400)
    k = rng.randint(3, max(4, n // 3))
    forms = [
        f"Among {n} patients with {dx}, {k} ({100 * k / n:.1f}%) received {drug}.",
        f"{dx.capitalize()} is an uncommon condition that may present with {dx2}.",
        f"These findings suggest that {drug} may be beneficial in patients with {dx}.",
        f"We conducted a retrospective cohort study of {n} adults with {dx} treated with {drug}.",
        f"The incidence of {dx2} was higher in patients receiving {drug} (hazard ratio {rng.uniform(0.4, 3.2):.2f}).",
        f"In conclusion, {dx} should be considered in the differential diagnosis of {dx2}.",
        f"{drug.capitalize()} reduced the risk of {dx2} by {rng.randint(5, 60)}% compared with placebo.",
    ]
    return _pick(rng, forms)


STYLES = {"mimic": (_m_hpi, MIMIC_TEMPLATES), "i2b2": (_i_hpi, I2B2_TEMPLATES), "domain": (_d_case, DOMAIN_TEMPLATES)}

_I2B2_FREQ = {f[0]: f[2] for f in FREQS}
_HABITS = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m: f"{m.group(2)}/{m.group(3)}/{m.group(1)}"),
    (re.compile(r"Sig: (\w+) \(\d\) Tablet PO"), lambda m: f"take {m.group(1).lower()} tablet p.o."),
    (re.compile(r"\bPO\b"), lambda m: "p.o."),
    (re.compile(r"\b(daily|BID|TID|QID|Q8H|Q6H|QHS|PRN)\b( \([^)]*\))?"), lambda m: _I2B2_FREQ[m.group(1)]),
    (re.compile(r"^VS: "), lambda m: "VITAL SIGNS: "),
    (re.compile(r"\bO2 sat\b"), lambda m: "saturation"),
    (re.compile(r"^# "), lambda m: "PROBLEM: "),
    (re.compile(r"^Followup Instructions: please follow up"), lambda m: "DISPOSITION: follow up"),
    (re.compile(r"AM BLOOD\b"), lambda m: " LABS"),
    (re.compile(r"\.\.$"), lambda m: "."),
]


def i2b2_habits(text: str) -> str:
    """Rewrite a MIMIC-style line with i2b2 habits (dates, dosing abbreviations, headers)."""
    for pat, rep in _HABITS:
        text = pat.sub(rep, text)
    return text


def patient_sentences(
    rng: random.Random, p: Patient, n: int, style: str, mix: dict | None = None
) -> list[tuple[str, str]]:
    """`n` sentences (kind, text) about patient `p`: the opening line, then templates drawn by
    weight. `mix` maps style -> probability, for a corpus that mixes registers."""

    def draw(st: str, opening: bool) -> tuple[str, str]:
        if st == "i2b2-habits":  # a MIMIC template written with i2b2 habits
            kind, text = draw("mimic", opening)
            return kind, i2b2_habits(text)
        first, templates = STYLES[st]
        fn = first if opening else rng.choices([t for t, _ in templates], weights=[w for _, w in templates], k=1)[0]
        return fn.__name__.lstrip("_"), re.sub(r"\s+", " ", fn(rng, p)).strip()

    mix = mix or {style: 1.0}
    out = []
    while len(out) < n:
        st = rng.choices(list(mix), weights=list(mix.values()), k=1)[0]
        out.append(draw(st, opening=not out))
    return out


# --------------------------------------------------------------------------------------------
# general English prose


def general_sentences() -> list[str]:
    """Sentences of the Lee news corpus (gensim test data): real general-English prose."""
    path = _package_dir("gensim") / "test" / "test_data" / "lee_background.cor"
    if not path.exists():
        raise UserError(f"{path}: not found (the general-English corpus comes with gensim's test data)")
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        for s in re.split(r'(?<=[.!?])\s+(?=[A-Z"])', line.strip()):
            s = s.strip()
            if len(s.split()) >= 4:
                out.append(s)
    return out


# --------------------------------------------------------------------------------------------
# the world


def sentence_count(rng: random.Random, n: int) -> int:
    """How many sentences a patient gets: uniform within a third of `n` around it, at least 2."""
    spread = n // 3
    return max(2, rng.randint(n - spread, n + spread))


def register_mix(note_share: float) -> dict[str, float]:
    """Register weights of a case-report corpus with `note_share` of its sentences in the note
    registers (MIMIC style, MIMIC with i2b2 habits, i2b2 style)."""
    return {
        "domain": 1.0 - note_share,
        "mimic": note_share * 0.6,
        "i2b2-habits": note_share * 0.25,
        "i2b2": note_share * 0.15,
    }


def build_world(config: dict | None = None) -> dict[str, pd.DataFrame]:
    """Build every corpus of the default world from the `corpus:` config section.

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
            {"sample_id": f"abstract-{j:05d}", "group_id": f"abstract-{j // 10:05d}", "text": _abstract(rng_d, lex)}
        )
    domain = pd.DataFrame(drows, columns=["sample_id", "group_id", "text"])

    # general reference corpus: real news prose, a seeded sample of sentences, plus a share of
    # encyclopedic medical prose (case-report / abstract register, disjoint patients)
    gen = general_sentences()
    rng_g = random.Random(f"general:{seed}")
    total = int(cfg["general"]["sentences"])
    n_medical = round(total * float(cfg["general"]["medical_share"]))
    k = min(total - n_medical, len(gen))
    picked = sorted(rng_g.sample(range(len(gen)), k))
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
                    "text": _abstract(rng_gm, lex),
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


def write_world(config: dict | None, outputs: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Build the world and write each table named in `outputs` (key -> Parquet path) atomically."""
    from mlmia.core.io import write_parquet

    world = build_world(config)
    unknown = [k for k in outputs if k not in world]
    if unknown:
        raise UserError(f"write_world: unknown output(s) {', '.join(unknown)} (known: {', '.join(world)})")
    for key, path in outputs.items():
        write_parquet(world[key], path)
    return world
