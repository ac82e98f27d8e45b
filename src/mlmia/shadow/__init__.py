"""The shadow-model membership-inference protocol of Hisamoto, Post and Duh, "Membership Inference
Attacks on Sequence-to-Sequence Models: Is My Data In Your Machine Translation System?" (TACL 2020),
carried over to masked language models: Carol splits the corpus by document into Alice's training
data, in-, out- and out-of-domain probes and Bob's share (`split`); Bob trains pairs of shadow
models on all of his share but one small held-out slice each, the slice the other of the pair
trains on, and labels each (sentence of a slice, shadow model) pair in or out (`split`); the
black-box features of a fill-in query, sentence BLEU of the reconstruction, its n-gram precisions
and the model's score of its own output, replace those of a translation query (`features`); the
paper's five classifiers are trained on Bob's pairs and evaluated on Alice's probes with accuracy
and AUC and a document bootstrap (`classify`); random groups of sentences, one per document, are
classified from their BLEU histogram and corpus BLEU, ranked for Figure 7 (`groups`,
`group_eval`); and the paper's Tables 2-6, Figure 7 (`report`) and findings (`findings`) are
produced as tidy tables, Markdown and a plot. `workflow.tables` is the entry point any target (an
MLM, a translation model) runs the protocol through. Where the paper leaves a detail open, each
module's docstring says what was chosen.
"""
