"""Test oracle: Google's create_pretraining_data.py and run_pretraining.py input_fn, as a script.

Run as a script (`python -m tests.oracle.google_pretraining_data <command> ...`) so that the
~30 absl flags both Google modules define at import never meet kbert's tools or each other in
one process.

- `generate`: Google's `create_training_instances` + `write_instance_to_example_files`
  (bert-tensorflow 1.0.4, unmodified) on Google's text format, to `--output_file`. With
  `--wwm_output_file`, a second run (same seed) with whole-word masking: there
  `create_masked_lm_predictions` is the version of google-research/bert master
  (`_master_create_masked_lm_predictions` below, a copy: 1.0.4 predates whole-word masking).
  Prints each file's instance count. With `--parse_file`, then runs `parse` on it in the same
  process (create_pretraining_data's flags are removed before run_pretraining defines its own).
- `parse`: Google's run_pretraining.py `input_fn_builder(..., is_training=False)` reads
  TFRecords (kbert's) and the first `--num_records` parsed records go to an `.npz`.
"""

import argparse
import collections
import functools
import os
import random
import sys

import numpy as np

_MaskedLm = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def _master_create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                         vocab_words, rng, do_whole_word_mask):
    """google-research/bert master `create_masked_lm_predictions`, with FLAGS passed in."""
    cand_indexes = []
    for (i, token) in enumerate(tokens):
        if token == "[CLS]" or token == "[SEP]":
            continue
        # Whole Word Masking means that if we mask all of the wordpieces corresponding to an
        # original word. [...] So whenever we see the ## token, we append it to the previous
        # set of word indexes.
        if (do_whole_word_mask and len(cand_indexes) >= 1 and token.startswith("##")):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])

    rng.shuffle(cand_indexes)

    output_tokens = list(tokens)

    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))

    masked_lms = []
    covered_indexes = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        # If adding a whole-word mask would exceed the maximum number of
        # predictions, then just skip this candidate.
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        is_any_index_covered = False
        for index in index_set:
            if index in covered_indexes:
                is_any_index_covered = True
                break
        if is_any_index_covered:
            continue
        for index in index_set:
            covered_indexes.add(index)

            masked_token = None
            # 80% of the time, replace with [MASK]
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            else:
                # 10% of the time, keep original
                if rng.random() < 0.5:
                    masked_token = tokens[index]
                # 10% of the time, replace with random word
                else:
                    masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]

            output_tokens[index] = masked_token

            masked_lms.append(_MaskedLm(index=index, label=tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms = sorted(masked_lms, key=lambda x: x.index)

    masked_lm_positions = []
    masked_lm_labels = []
    for p in masked_lms:
        masked_lm_positions.append(p.index)
        masked_lm_labels.append(p.label)

    return (output_tokens, masked_lm_positions, masked_lm_labels)


def generate(args):
    import absl.flags

    absl.flags.FLAGS.mark_as_parsed()  # FullTokenizer reads a flag
    from bert import create_pretraining_data as cpd
    from bert import tokenization

    cpd.tf.logging.set_verbosity(cpd.tf.logging.WARN)
    tokenizer = tokenization.FullTokenizer(vocab_file=args.vocab_file, do_lower_case=True)
    runs = [(args.output_file, cpd.create_masked_lm_predictions)]
    if args.wwm_output_file:
        runs.append((args.wwm_output_file, functools.partial(
            _master_create_masked_lm_predictions, do_whole_word_mask=True)))
    for output_file, masking in runs:
        cpd.create_masked_lm_predictions = masking
        rng = random.Random(args.random_seed)
        instances = cpd.create_training_instances(
            [args.input_file], tokenizer, args.max_seq_length, args.dupe_factor,
            args.short_seq_prob, args.masked_lm_prob, args.max_predictions_per_seq, rng)
        cpd.write_instance_to_example_files(instances, tokenizer, args.max_seq_length,
                                            args.max_predictions_per_seq, [output_file])
        print(output_file, len(instances))
    if args.parse_file:
        # run_pretraining defines flags of the same names (input_file, max_seq_length, ...).
        for name in list(absl.flags.FLAGS):
            if absl.flags.FLAGS.find_module_defining_flag(name) == cpd.__name__:
                delattr(absl.flags.FLAGS, name)
        args.input_file = args.parse_file
        parse(args)


def parse(args):
    import tensorflow as tf

    from tests.oracle import google_bert

    google_bert._modeling()  # bert.modeling needs the contrib shim before run_pretraining
    from bert import run_pretraining

    input_fn = run_pretraining.input_fn_builder(
        [args.input_file], args.max_seq_length, args.max_predictions_per_seq, is_training=False)
    batch = next(iter(input_fn({"batch_size": args.num_records})))
    np.savez(args.output_npz, **{k: np.asarray(v) for k, v in batch.items()})
    print(sorted((k, str(v.dtype), tuple(v.shape)) for k, v in batch.items()))
    del tf


def main(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--input_file", required=True)
    gen.add_argument("--output_file", required=True)
    gen.add_argument("--vocab_file", required=True)
    gen.add_argument("--max_seq_length", type=int, default=128)
    gen.add_argument("--max_predictions_per_seq", type=int, default=20)
    gen.add_argument("--random_seed", type=int, default=12345)
    gen.add_argument("--dupe_factor", type=int, default=10)
    gen.add_argument("--masked_lm_prob", type=float, default=0.15)
    gen.add_argument("--short_seq_prob", type=float, default=0.1)
    gen.add_argument("--wwm_output_file", default=None,
                     help="Also write whole-word-masked records here (same seed).")
    gen.add_argument("--parse_file", default=None, help="Then run `parse` on this file.")
    gen.add_argument("--num_records", type=int, default=64)
    gen.add_argument("--output_npz", default=None)
    par = sub.add_parser("parse")
    par.add_argument("--input_file", required=True)
    par.add_argument("--max_seq_length", type=int, required=True)
    par.add_argument("--max_predictions_per_seq", type=int, required=True)
    par.add_argument("--num_records", type=int, required=True)
    par.add_argument("--output_npz", required=True)
    args = parser.parse_args(argv)
    {"generate": generate, "parse": parse}[args.command](args)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    main(sys.argv[1:])
