"""The shadow-model membership-inference protocol of Hisamoto, Post and Duh, "Membership Inference
Attacks on Sequence-to-Sequence Models: Is My Data In Your Machine Translation System?" (TACL 2020),
carried over to masked language models: Carol splits the corpus by document into Alice's training
data, in-, out- and out-of-domain probes and Bob's share (`split`); Bob trains shadow models on
halves of his share and labels each (sentence, shadow model) pair in or out (`split`); the
black-box features of a fill-in query, sentence BLEU of the reconstruction, top-1 accuracy of the
masked tokens and their mean cross-entropy as the model score, replace those of a translation query
(`features`); the paper's five classifiers are trained on Bob's pairs and evaluated on Alice's probes
with a document bootstrap (`classify`); groups of sentences are classified from their BLEU histogram
and corpus BLEU (`groups`); and the paper's Tables 2-6, Figure 7 and findings are produced as tidy
tables, Markdown and a plot (`report`). Where the paper leaves a detail open, each module's docstring
says what was chosen.
"""
