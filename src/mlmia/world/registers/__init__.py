"""The registers of the embedded world: the clinical ones its corpora are written in (`mimic`,
`i2b2`, `case_report`: sentence templates over a patient's facts, `template`) and one outside it
(`wikipedia`, real encyclopedic prose for the shadow study's out-of-domain probes)."""
