"""Bad data files given to the tools: exit 2 and one line naming the file (and line).

Each row of `CASES` writes its files under tmp_path and gives the tool's arguments; the run
must end with `status` and a first stderr line holding `fragment` (with `{tmp}` the test's
directory), before any training. Covers the data checks of `kbert.data` (encoding, empty
files, header only, missing or repeated columns, empty or non-finite labels, every row bad,
long fields, duplicate SQuAD ids, a tagger's single label), the settings of own data (a step
without its file, repeated or empty --labels), the pretraining records' checks (sidecars
matched by a glob, other lengths, not TFRecords, cut short, another vocab, longer than the
model's positions), the pretraining vocab and raw text, and the refusal to score a head
that was never trained.
"""

import json
import os
import shutil

import pytest

from kbert import data
from tests.tasks.test_squad import _data as squad_data
from tests.tools.runner import run_tool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MRPC = os.path.join(ROOT, "tests", "fixtures", "glue", "MRPC")
CONLL = os.path.join(ROOT, "tests", "fixtures", "conll")
BAD_BYTE = b"\xff"
# Sentences of the tiny release's vocab (tests/conftest.py TINY_VOCAB).
SENTENCES = ("the man said he was in the", "it is a ' s that", "he has , as it was said .",
             "that was for the man , and it", "a to of and in he said", "it was on the ' s .")


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return path


def classifier(release, *args):
    return ["run_classifier.py", f"--init_checkpoint={release}", "--max_seq_length=16", *args]


def own_train(name, content, *more):
    def setup(tmp, release):
        path = write(tmp / name, content)
        return classifier(release, f"--train_file={path}", "--do_train", *more)
    return setup


# Two classes of the tiny vocab's words, for the cases refused on a flag, not a row.
OWN_ROWS = "text_a,label\nthe man,0\nhe said,1\n"


def own_dev(name, content, *more):
    def setup(tmp, release):
        path = write(tmp / name, content)
        return classifier(release, f"--dev_file={path}", "--do_eval", "--labels=0,1",
                          "--allow_untrained_head", *more)
    return setup


def mrpc_with(split, transform):
    def setup(tmp, release):
        shutil.copytree(MRPC, tmp / "MRPC")
        path = tmp / "MRPC" / split
        path.write_bytes(transform(path.read_bytes()))
        return classifier(release, "--task_name=MRPC", f"--data_dir={tmp / 'MRPC'}",
                          "--do_eval", "--allow_untrained_head")
    return setup


def sst2_test_file(content):
    def setup(tmp, release):
        shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "glue", "SST-2"), tmp / "SST-2")
        write(tmp / "SST-2" / "test.tsv", content)
        return classifier(release, "--task_name=SST-2", f"--data_dir={tmp / 'SST-2'}",
                          "--do_train", "--do_predict")
    return setup


def ner(step, content):
    def setup(tmp, release):
        path = write(tmp / "ner.txt", content)
        files = {"do_train": [f"--train_file={path}"],
                 "do_eval": [f"--train_file={CONLL}/train.txt", f"--dev_file={path}",
                             "--do_train"]}[step]
        return ["run_ner.py", f"--init_checkpoint={release}", "--max_seq_length=16",
                f"--{step}", *files]
    return setup


def squad_file(transform, step="predict", *more):
    """A SQuAD run whose --train_file (step "train") or --predict_file is the fixture after
    `transform(content)`."""
    def setup(tmp, release):
        content = squad_data()
        transform(content)
        path = write(tmp / f"{step}.json", json.dumps(content))
        return ["run_squad.py", f"--init_checkpoint={release}", f"--do_{step}",
                f"--{step}_file={path}", "--max_seq_length=16", "--max_query_length=8",
                "--doc_stride=4", *more]
    return setup


def repeat_first_id(content):
    paragraphs = content["data"][0]["paragraphs"]
    paragraphs[1]["qas"][0]["id"] = paragraphs[0]["qas"][0]["id"]


def squad_not_utf8(tmp, release):
    path = write(tmp / "bad.json", BAD_BYTE + b"{}")
    return ["run_squad.py", f"--init_checkpoint={release}", "--do_predict",
            f"--predict_file={path}", "--max_seq_length=16", "--max_query_length=8",
            "--allow_untrained_head"]


def features(content, *more):
    def setup(tmp, release):
        path = write(tmp / "in.txt", content)
        return ["extract_features.py", f"--input_file={path}", f"--init_checkpoint={release}",
                f"--output_file={tmp / 'out.jsonl'}", "--max_seq_length=16", *more]
    return setup


def records(tmp, release, max_seq_length=16, max_predictions_per_seq=3):
    """Pretraining records and their sidecar in tmp/data: (records path, vocab path)."""
    vocab = os.path.join(release, "vocab.txt")
    documents = "\n\n".join("\n".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(6))
    text = write(tmp / "corpus.txt", documents + "\n")
    output = tmp / "data" / "train.tfrecord"
    data.create_pretraining_data(
        str(text), str(output), vocab, progress=False, config=data.PretrainingDataConfig(
            max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
            dupe_factor=2))
    return output, vocab


def pretraining(input_file, *more, release=None):
    return ["run_pretraining.py", f"--input_file={input_file}",
            f"--bert_config_file={os.path.join(release, 'bert_config.json')}",
            "--train_batch_size=2", "--num_train_steps=1", "--num_warmup_steps=0",
            "--output_dir={tmp}/out", *more]


def records_then(make_input, *more):
    def setup(tmp, release):
        output, _ = records(tmp, release)
        return pretraining(make_input(tmp, output), *more, release=release)
    return setup


def cut(path, keep):
    """Cuts the file at `path` to its first `keep` bytes (negative: all but the last)."""
    content = path.read_bytes()
    path.write_bytes(content[:keep])
    return path


def copy_cut(tmp, output, keep):
    target = tmp / "cut" / "train.tfrecord"
    target.parent.mkdir()
    shutil.copy(output, target)
    return cut(target, keep)


def cut_in_a_header(tmp, output):
    """A copy of the records cut 5 bytes into the second record's 12-byte header, which
    TensorFlow's readers take for the end of the file."""
    first = 12 + int.from_bytes(output.read_bytes()[:8], "little") + 4
    return copy_cut(tmp, output, first + 5)


def records_with_vocab(transform, *more):
    """Records of the release's vocab, pretrained on with a copy of it changed by `transform`
    (list of tokens -> list of tokens) as --vocab_file={tmp}/vocab2.txt."""
    def setup(tmp, release):
        output, vocab = records(tmp, release)
        with open(vocab, encoding="utf-8") as f:
            tokens = transform(f.read().splitlines())
        write(tmp / "vocab2.txt", "".join(token + "\n" for token in tokens))
        return pretraining(output, f"--vocab_file={tmp / 'vocab2.txt'}", *more, release=release)
    return setup


# A WikiExtractor file whose first <doc> has no </doc>.
UNCLOSED_DOC = '<doc id="1">\nA\n\nthe man said .\n<doc id="2">\nB\nhe said .\n</doc>\n'


CASES = [
    # --- classification data: encoding, empty, header only, columns, every row bad
    ("csv_not_utf8", own_train("train.csv", b"text_a,label\nfine,0\nbad " + BAD_BYTE +
                               b" byte,1\n"), 2,
     "{tmp}/train.csv:3: not UTF-8 (invalid start byte: byte 0xff at column 5)"),
    ("tsv_not_utf8", own_dev("dev.tsv", b"text_a\tlabel\n" + BAD_BYTE + b"\t0\n"), 2,
     "{tmp}/dev.tsv:2: not UTF-8"),
    ("jsonl_not_utf8", own_train("train.jsonl", b'{"text_a": "a", "label": "0"}\n'
                                 b'{"text_a": "\xc3", "label": "1"}\n'), 2,
     "{tmp}/train.jsonl:2: not UTF-8"),
    ("glue_not_utf8", mrpc_with("dev.tsv", lambda b: b.replace(b"foodservice", BAD_BYTE)), 2,
     "{tmp}/MRPC/dev.tsv:2: not UTF-8"),
    ("csv_header_only", own_train("train.csv", "text_a,label\n"), 2,
     "{tmp}/train.csv: no data rows (an empty file, or a header only)"),
    ("csv_empty", own_train("train.csv", ""), 2,
     "{tmp}/train.csv: empty file — expected a header line, then data rows"),
    ("tsv_dev_header_only", own_dev("dev.tsv", "text_a\tlabel\n"), 2,
     "{tmp}/dev.tsv: no data rows"),
    ("jsonl_empty", own_train("train.jsonl", "\n\n"), 2, "{tmp}/train.jsonl: no data rows"),
    ("jsonl_without_text_key", own_train("train.jsonl", '{"text": "a", "label": "0"}\n' * 3), 2,
     "{tmp}/train.jsonl: none of its 3 data row(s) is usable; the first: {tmp}/train.jsonl:1: "
     "missing field(s) 'text_a'"),
    ("csv_missing_label_column", own_train("train.csv", "text_a,stars\na,1\n"), 2,
     "{tmp}/train.csv:1: header has no column(s) 'label'"),
    ("tsv_every_row_bad", own_train("train.tsv", "text_a\tlabel\n" + "one\ttwo\tthree\n" * 40),
     2, "{tmp}/train.tsv: none of its 40 data row(s) is usable; the first: {tmp}/train.tsv:2: "
     "expected 2 fields, found 3"),
    ("glue_dev_header_only", mrpc_with("dev.tsv", lambda b: b.split(b"\n")[0] + b"\n"), 2,
     "{tmp}/MRPC/dev.tsv: no data rows"),
    ("jsonl_not_json", own_dev("dev.jsonl", '{"text_a": "a", "label": "0"}\n{oops\n'), 2,
     "{tmp}/dev.jsonl:2: not valid JSON"),
    ("csv_dev_unknown_label", own_dev("dev.csv", "text_a,label\na,0\nb,7\n"), 2,
     "{tmp}/dev.csv:3: unknown label '7'; expected one of ['0', '1']"),
    ("csv_empty_label", own_train("train.csv", "text_a,label\nthe man,0\nhe said,\nit was,1\n"),
     2, "{tmp}/train.csv:3: empty label — fix the row, or skip malformed rows"),
    ("csv_header_repeats_a_column", own_train(
        "train.csv", "text_a,text_a,label\nthe man,he said,0\nit was,a man,1\n"), 2,
     "{tmp}/train.csv:1: column(s) 'text_a' named more than once in the header "
     "['text_a', 'text_a', 'label']"),
    ("csv_regression_nan_label", own_train(
        "train.csv", "text_a,label\nthe man,0.5\nhe said,nan\nit was,1\n", "--regression"), 2,
     "{tmp}/train.csv:3: label 'nan': a regression label must be a finite number"),
    ("csv_regression_inf_label", own_train(
        "train.csv", "text_a,label\nthe man,0.5\nhe said,-inf\n", "--regression"), 2,
     "{tmp}/train.csv:3: label '-inf': a regression label must be a finite number"),
    ("csv_one_class", own_train("train.csv", "text_a,label\nthe man,0\nhe said,0\n"), 2,
     "{tmp}/train.csv: only one label: '0'; a classifier needs at least 2 classes"),
    ("glue_test_without_index_column", sst2_test_file("sentence\nthe man\n"), 2,
     "{tmp}/SST-2/test.tsv:1: the header has 1 column(s) ['sentence']; SST-2's test file has "
     "at least 2: index in column 1, text_a in column 2"),
    # --- own data: steps without their file, bad --labels / --label_columns
    ("own_eval_without_dev_file", own_train("train.csv", OWN_ROWS, "--do_eval"), 2,
     "error: do_eval needs dev_file"),
    ("own_predict_without_test_file", own_train("train.csv", OWN_ROWS, "--do_predict"), 2,
     "error: do_predict needs test_file"),
    ("labels_repeated", own_train("train.csv", OWN_ROWS, "--labels=0,1,1"), 2,
     "error: labels: '1' given more than once in ['0', '1', '1']"),
    ("labels_with_an_empty_name", own_train("train.csv", OWN_ROWS, "--labels=0,,1"), 2,
     "error: labels: an empty name in ['0', '', '1']"),
    ("multi_label_columns_repeated", own_train(
        "train.csv", "text_a,pos,neg\nthe man,1,0\nhe said,0,1\n", "--multi_label",
        "--label_columns=pos,pos"), 2,
     "error: label_columns: 'pos' given more than once in ['pos', 'pos']"),
    ("multi_label_labels_repeated", own_train(
        "train.csv", "text_a,label\nthe man,pos\nhe said,neg|pos\n", "--multi_label",
        "--labels=pos,neg,pos"), 2,
     "error: labels: 'pos' given more than once in ['pos', 'neg', 'pos']"),
    ("csv_field_over_131072_chars", own_dev(
        "dev.csv", "text_a,label\n\"" + "the man , " * 20000 + "\",0\nshort,1\n"), 0, ""),
    # --- a head that was never trained is not scored, unless asked
    ("glue_eval_from_a_release", lambda tmp, release: classifier(
        release, "--task_name=MRPC", f"--data_dir={MRPC}", "--do_eval"), 2,
     "{release}: no trained BertClassifier head in this checkpoint (a pretrained release?), "
     "so do_eval would score a random head — add do_train (--do_train), point "
     "init_checkpoint at a fine-tuned model, or pass allow_untrained_head "
     "(--allow_untrained_head)"),
    ("glue_predict_from_a_release", lambda tmp, release: classifier(
        release, "--task_name=MRPC", f"--data_dir={MRPC}", "--do_predict"), 2,
     "so do_predict would score a random head"),
    ("tpu_unreachable", lambda tmp, release: classifier(
        release, "--task_name=MRPC", f"--data_dir={MRPC}", "--do_eval",
        "--allow_untrained_head", "--distribution_strategy=tpu", "--tpu=local"), 2,
     "error: distribution_strategy=tpu: no TPU reachable at tpu='local'"),
    ("glue_eval_allowed_untrained", lambda tmp, release: classifier(
        release, "--task_name=MRPC", f"--data_dir={MRPC}", "--do_eval",
        "--allow_untrained_head"), 0, ""),
    ("squad_predict_from_a_release", squad_file(lambda content: None), 2,
     "{release}: no trained BertSpanLabeler head in this checkpoint"),
    # --- NER files
    ("ner_empty", ner("do_train", ""), 2, "{tmp}/ner.txt: no sentences (an empty file, or "
     "only -DOCSTART- and blank lines) — expected one word and its label per line"),
    ("ner_docstart_only", ner("do_train", "-DOCSTART- -X- O O\n\n"), 2,
     "{tmp}/ner.txt: no sentences"),
    ("ner_dev_empty", ner("do_eval", "\n"), 2, "{tmp}/ner.txt: no sentences"),
    ("ner_not_utf8", ner("do_train", b"EU NNP I-NP I-ORG\n\nthe DT I-NP O\nGerm\xe4n JJ I-NP "
                         b"I-MISC\n"), 2,
     "{tmp}/ner.txt:4: not UTF-8 (invalid continuation byte: byte 0xe4 at column 5)"),
    ("ner_one_column", ner("do_train", "EU\n"), 2,
     "{tmp}/ner.txt:1: expected a word and a label"),
    ("ner_only_O", ner("do_train", "EU NNP I-NP O\n\nthe DT I-NP O\nman NN I-NP O\n"), 2,
     "{tmp}/ner.txt: only one label: O; a tagger needs at least one entity type"),
    # --- SQuAD files
    ("squad_duplicate_id", squad_file(repeat_first_id, "predict", "--allow_untrained_head"), 2,
     "{tmp}/predict.json: data[0].paragraphs[1].qas[0].id 'w0' is also the id of "
     "data[0].paragraphs[0].qas[0] — question ids must be unique"),
    ("squad_train_duplicate_id", squad_file(repeat_first_id, "train"), 2,
     "{tmp}/train.json: data[0].paragraphs[1].qas[0].id 'w0' is also the id of "
     "data[0].paragraphs[0].qas[0] — question ids must be unique"),
    ("squad_not_utf8", squad_not_utf8, 2, "{tmp}/bad.json: not UTF-8 text"),
    # --- extract_features input and its settings against the model
    ("features_not_utf8", features(b"the man\nhe said \xff\n", "--layers=-1"), 2,
     "{tmp}/in.txt:2: not UTF-8 (invalid start byte: byte 0xff at column 9)"),
    ("features_longer_than_positions", features("the man\n", "--max_seq_length=17"), 2,
     "--max_seq_length=17 is longer than the model's max_position_embeddings=16"),
    ("features_layer_outside_the_model", features("the man\n", "--layers=-1,-3"), 2,
     "--layers -3: the model has 1 layer (index -1 or 0)"),
    # --- pretraining records
    ("records_glob_matches_the_sidecar", records_then(
        lambda tmp, output: f"{output}*"), 0, ""),
    ("records_glob_matches_only_the_sidecar", records_then(
        lambda tmp, output: f"{output}_meta*"), 2,
     "{tmp}/data/train.tfrecord_meta*: matches only _meta.json sidecars, no TFRecord files"),
    ("records_other_max_seq_length", records_then(
        lambda tmp, output: output, "--max_seq_length=12"), 2,
     "{tmp}/data/train.tfrecord: feature 'input_ids' has 16 values, expected 12 "
     "(max_seq_length=12); the records were written with max_seq_length=16: pass that "
     "max_seq_length"),
    ("records_other_max_predictions", records_then(
        lambda tmp, output: output, "--max_predictions_per_seq=5"), 2,
     "{tmp}/data/train.tfrecord: feature 'masked_lm_positions' has 3 values, expected 5 "
     "(max_predictions_per_seq=5)"),
    ("records_without_a_sidecar", records_then(
        lambda tmp, output: os.remove(f"{output}_meta.json") or output), 2,
     "{tmp}/data/train.tfrecord: no *_meta.json lists these files; pass max_seq_length and "
     "max_predictions_per_seq"),
    ("records_not_tfrecord", lambda tmp, release: pretraining(
        write(tmp / "notes.txt", "plain text, not records\n"), "--max_seq_length=16",
        "--max_predictions_per_seq=3", release=release), 2,
     "{tmp}/notes.txt: not a TFRecord file, or cut short: its first record claims"),
    ("records_first_record_cut", records_then(
        lambda tmp, output: copy_cut(tmp, output, 40), "--max_seq_length=16",
        "--max_predictions_per_seq=3"), 2,
     "{tmp}/cut/train.tfrecord: not a TFRecord file, or cut short"),
    ("records_of_another_schema", lambda tmp, release: pretraining(
        _other_records(tmp / "other.tfrecord"), "--max_seq_length=16",
        "--max_predictions_per_seq=3", release=release), 2,
     "{tmp}/other.tfrecord: its records have no 'input_ids' feature (they have ['text'])"),
    ("records_all_empty", lambda tmp, release: pretraining(
        write(tmp / "empty.tfrecord", b""), "--max_seq_length=16",
        "--max_predictions_per_seq=3", release=release), 2,
     "{tmp}/empty.tfrecord: no records in any of the input files"),
    ("records_cut_after_the_first", records_then(
        lambda tmp, output: copy_cut(tmp, output, -7), "--max_seq_length=16",
        "--max_predictions_per_seq=3"), 2,
     "{tmp}/cut/train.tfrecord: a damaged or cut-short record (truncated record at "),
    ("text_input_with_a_records_eval_file", records_then(
        lambda tmp, output: write(tmp / "corpus2.txt", "\n".join(SENTENCES) + "\n"),
        "--input_format=text", "--eval_input_file={tmp}/data/train.tfrecord"), 2,
     "{tmp}/data/train.tfrecord: not text (a NUL byte at byte "),
    ("text_input_not_utf8", lambda tmp, release: pretraining(
        write(tmp / "corpus.txt", b"the man said\nhe \xff was\n"), "--input_format=text",
        release=release), 2,
     "{tmp}/corpus.txt:2: not UTF-8 (invalid start byte: byte 0xff at column 4) — save the "
     "file as UTF-8; "
     "input_format='text' reads raw text (TFRecords need input_format='tfrecord')"),
    ("text_input_not_utf8_in_its_last_bytes", lambda tmp, release: pretraining(
        write(tmp / "corpus.txt", b"the man said\nhe was caf\xe9.\n"), "--input_format=text",
        release=release), 2,
     "{tmp}/corpus.txt:2: not UTF-8 (invalid continuation byte: byte 0xe9 at column 11)"),
    ("text_input_not_utf8_after_4_kib", lambda tmp, release: pretraining(
        write(tmp / "corpus.txt", b"the man said .\n" * 400 + b"he \xff was\n"),
        "--input_format=text", release=release), 2,
     "{tmp}/corpus.txt:401: not valid UTF-8 (invalid start byte at byte 3 of the line) — "
     "expected UTF-8 text: re-encode the file"),
    # --- create_pretraining_data: shard counts
    ("pretraining_data_zero_shards", lambda tmp, release: [
        "create_pretraining_data.py", f"--input_file={write(tmp / 'c.txt', SENTENCES[0])}",
        f"--vocab_file={release}/vocab.txt", f"--output_file={tmp}/out.tfrecord@0"], 2,
     "output_file={tmp}/out.tfrecord@0: @0 names no file — @N needs N >= 1"),
    # --- run_pretraining: records against the run's vocab and model, every record read
    ("records_of_another_vocab", records_with_vocab(
        lambda tokens: [*tokens[:5], tokens[6], tokens[5], *tokens[7:]]), 2,
     "{tmp}/data/train.tfrecord_meta.json: these records were written with another vocab "
     "than {tmp}/vocab2.txt's (31 tokens; vocab_sha256 "),
    ("vocab_with_a_duplicate_token", records_with_vocab(
        lambda tokens: [*tokens[:-1], tokens[5]]), 2,
     "{tmp}/vocab2.txt:31: duplicate token 'the' (first on line 6)"),
    ("vocab_larger_than_the_config", records_with_vocab(lambda tokens: [*tokens, "extra"]), 2,
     "{tmp}/vocab2.txt: 32 tokens, but the model ({release}/bert_config.json) has "
     "vocab_size=31 embedding rows"),
    ("records_cut_inside_a_header", records_then(
        cut_in_a_header, "--max_seq_length=16", "--max_predictions_per_seq=3"), 2,
     "{tmp}/cut/train.tfrecord: a damaged or cut-short record (truncated record at "),
    ("records_longer_than_the_positions", lambda tmp, release: pretraining(
        records(tmp, release, max_seq_length=32)[0], release=release), 2,
     "{tmp}/data/train.tfrecord: records of max_seq_length=32: longer than the model's "
     "max_position_embeddings=16 ({release}/bert_config.json)"),
    ("text_longer_than_the_positions", lambda tmp, release: pretraining(
        write(tmp / "corpus.txt", "\n".join(SENTENCES) + "\n"), "--input_format=text",
        "--max_seq_length=32", release=release), 2,
     "error: max_seq_length=32: longer than the model's max_position_embeddings=16"),
    ("text_input_empty", lambda tmp, release: pretraining(
        write(tmp / "empty.txt", ""), "--input_format=text", release=release), 2,
     "error: {tmp}/empty.txt: the input is empty"),
    ("text_input_only_blank_lines", lambda tmp, release: pretraining(
        write(tmp / "blank.txt", "\n \n\n"), "--input_format=text", release=release), 2,
     "error: {tmp}/blank.txt: no document has any text (input_format='text')"),
    # --- create_pretraining_data: WikiExtractor structure
    ("pretraining_data_unclosed_doc", lambda tmp, release: [
        "create_pretraining_data.py", f"--input_file={write(tmp / 'wiki.txt', UNCLOSED_DOC)}",
        "--input_format=wikiextractor", f"--vocab_file={release}/vocab.txt",
        f"--output_file={tmp}/out.tfrecord"], 2,
     "{tmp}/wiki.txt:1: <doc> not closed: the next <doc> is on line 5"),
]


def _other_records(path):
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a text"]))
        example = tf.train.Example(features=tf.train.Features(feature={"text": feature}))
        writer.write(example.SerializeToString())
    return path


@pytest.mark.parametrize(("setup", "status", "fragment"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_data_file(setup, status, fragment, tiny_google_dir, tmp_path):
    tool, *args = setup(tmp_path, tiny_google_dir)
    if not any(arg.startswith("--output_dir=") for arg in args) and tool.startswith("run_"):
        args.append(f"--output_dir={tmp_path / 'out'}")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = run_tool(tool, *args)
    assert result.returncode == status, result.stderr[-3000:]
    if status == 0:
        return
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    expected = fragment.format(tmp=tmp_path, release=tiny_google_dir)
    assert expected in errors[0], result.stderr[-3000:]
    # Nothing was trained before the error.
    assert not os.path.exists(tmp_path / "out" / "train_results.json")


def test_a_bad_training_row_stops_the_run_unless_skipped(tiny_google_dir, tmp_path):
    rows = "".join(f"text {i},{i % 2}\n" for i in range(5)) + "a,b,c\n" * 30
    train = write(tmp_path / "train.csv", "text_a,label\n" + rows)
    args = classifier(tiny_google_dir, f"--train_file={train}", "--do_train",
                      "--train_batch_size=2", "--num_train_epochs=1",
                      f"--output_dir={tmp_path / 'out'}")
    result = run_tool(*args)
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"error: {train}:7: " in result.stderr and "--skip_bad_rows" in result.stderr
    assert not os.path.exists(tmp_path / "out" / "train_results.json")
    # With --skip_bad_rows every bad row is counted, but only the first ones are logged.
    result = run_tool(*args, "--skip_bad_rows")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("skipping malformed row") == 10
    assert f"{train}: skipped 30 malformed row(s), kept 5 (the first 10 logged above)" in (
        result.stderr)
