"""The embedded world's vocabulary: word lists shipped with the package and real vocabulary
read from installed packages. Nothing is downloaded.

The word lists are the text files of `mlmia/world/data` (`word_list`): one entry a line, the
fields of a multi-form entry (a dosing frequency as MIMIC, i2b2 and prose write it) separated by
" | ". Their order is part of the world: the random draws index into them.

From installed packages (`lexicon`):

- surrogate patient and physician names: faker's frequency-weighted US first names and surnames;
- diagnoses: ICD-10-CM descriptions (`simple-icd-10-cm`): a short list of common inpatient
  diagnoses (Zipf-weighted) plus a large pool of rare, patient-specific ones;
- drugs: generic names from `drug-named-entity-recognition` (common inpatient drugs plus a pool
  of rarer prescription drugs);
- general English prose (`general_sentences`): the Lee news corpus shipped in gensim's test data.
"""

from __future__ import annotations

import bz2
import functools
import importlib.resources
import importlib.util
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

from mlmia.core.errors import UserError

#: the word lists this module reads: they count as its code in the steps' digests (mlmia.core.provenance)
READS_FILES = "data/*.txt"
FIELD_SEPARATOR = " | "


def word_list(name: str) -> tuple:
    """The entries of `data/<name>.txt` in file order: strings, or tuples of a multi-form entry's fields."""
    text = importlib.resources.files("mlmia.world").joinpath("data", f"{name}.txt").read_text(encoding="utf-8")
    return tuple(tuple(line.split(FIELD_SEPARATOR)) if FIELD_SEPARATOR in line else line for line in text.splitlines())


COMMON_ICD = word_list("common_icd")
COMMON_DRUGS = word_list("common_drugs")
COMPLAINTS = word_list("complaints")
SERVICES = word_list("services")
FINDINGS = word_list("findings")
OUTCOMES = word_list("outcomes")
RELATIONS = word_list("relations")
DOSES = word_list("doses")
#: (MIMIC, MIMIC spelled out, i2b2, prose)
FREQUENCIES = word_list("frequencies")
#: (MIMIC, i2b2, prose)
ROUTES = word_list("routes")


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


def package_dir(name: str) -> Path:
    """The folder of the installed package `name` (its data files are read from there)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"package {name!r} is not installed (pip install {name.replace('_', '-')})")
    return Path(list(spec.submodule_search_locations)[0])


def zipf_weights(n: int) -> tuple:
    """Weights 1, 1/2, ..., 1/n: the i-th of n ranked items drawn in proportion to 1/i (Zipf)."""
    return tuple(1.0 / (i + 1) for i in range(n))


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

    common_dx = [_clean_icd(cm.get_description(c)) for c in COMMON_ICD]
    rare = []
    for code in cm.get_all_codes(False):
        if code[0] in "STVWXYZOP" or not cm.is_leaf(code) or code in COMMON_ICD:
            continue
        desc = _clean_icd(cm.get_description(code))
        if 3 <= len(desc.split()) <= 14 and "unspecified" not in desc.lower()[:12]:
            rare.append(desc)
    rare = sorted(set(rare))

    pkl = package_dir("drug_named_entity_recognition") / "drug_ner_dictionary.pkl.bz2"
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
        w_common_dx=zipf_weights(len(common_dx)),
        rare_dx=tuple(rare),
        common_drugs=tuple(COMMON_DRUGS),
        w_common_drugs=zipf_weights(len(COMMON_DRUGS)),
        rare_drugs=tuple(rare_drugs),
        states=tuple(Address.states),
    )


def general_sentences() -> list[str]:
    """Sentences of the Lee news corpus (gensim test data): real general-English prose."""
    path = package_dir("gensim") / "test" / "test_data" / "lee_background.cor"
    if not path.exists():
        raise UserError(f"{path}: not found (the general-English corpus comes with gensim's test data)")
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        for s in re.split(r'(?<=[.!?])\s+(?=[A-Z"])', line.strip()):
            s = s.strip()
            if len(s.split()) >= 4:
                out.append(s)
    return out
