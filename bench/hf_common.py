"""What the Hugging Face peers share: the Trainer under kbert's budget, scoring, the JSON.

`train` fine-tunes with `transformers.Trainer` (PyTorch, on the CPU unless --hf_device=cuda)
and the settings of kbert's recipes: peak learning rate, linear warm-up (the same fraction of
the steps) and decay to 0 (from the end of warm-up, the Trainer's `linear`; from step 0, as
kbert's, with --hf_lr_schedule=google), weight decay 0.01 (not on biases and LayerNorm, as
the Trainer's default), AdamW epsilon 1e-6, gradient clipping at global norm 1, the seed; with
the Trainer's own speed setting on: `train_sampling_strategy="group_by_length"` (batches of
similar length), to go with a padding collator. `outputs` runs the model over a list in
order, for scoring.
"""

import json
import math
import tempfile
import time

import torch
import transformers
from absl import flags
from absl import logging

from bench import runs

_DEVICE = flags.DEFINE_enum(
    "hf_device", "cpu", ["cpu", "cuda"],
    "Where the Trainer runs. Speed comparisons with kbert need cpu (the same machine); cuda "
    "gives the peer's scores at a full budget where its CPU run would take hours.")
_SCHEDULE = flags.DEFINE_enum(
    "hf_lr_schedule", "huggingface", ["huggingface", "google"],
    "The decay after warm-up: huggingface (the Trainer's `linear`: from the peak at the end of "
    "warm-up to 0) or google (kbert's and Google's: lr * (1 - step / steps), counted from step "
    "0, so 1 - warmup_proportion of the peak when warm-up ends).")


class _GoogleScheduleTrainer(transformers.Trainer):
    """The Trainer with Google's warm-up + linear decay (`--hf_lr_schedule=google`), through
    the Trainer's documented `create_scheduler` hook: transformers' own schedules all start
    their decay at the end of warm-up."""

    def create_scheduler(self, num_training_steps, optimizer=None):
        warmup = self.args.warmup_steps

        def factor(step):
            if step < warmup:
                return step / warmup
            return max(0.0, 1.0 - step / num_training_steps)

        if self.lr_scheduler is None:
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer or self.optimizer, factor)
        return self.lr_scheduler


class EpochTimer(transformers.TrainerCallback):
    """Seconds per epoch, measured as kbert's recipe measures them (epoch begin to end)."""

    def __init__(self):
        self.seconds = []

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.seconds.append(-time.perf_counter())

    def on_epoch_end(self, args, state, control, **kwargs):
        self.seconds[-1] += time.perf_counter()


def train(model, rows, collator, *, batch_size, learning_rate, epochs, warmup_proportion,
          seed):
    """Fine-tunes `model` on `rows` (dicts of model inputs and labels) with the Trainer.

    Args:
        epochs: int or float. Passes over `rows`; a fraction stops part-way, as the Trainer's
            `num_train_epochs` does.

    Returns:
        (`transformers.trainer_utils.TrainOutput`, seconds in `trainer.train()`, seconds of
        each epoch).
    """
    # The Trainer's own step count: a last short batch per epoch, fractional epochs rounded up.
    total = math.ceil(math.ceil(len(rows) / batch_size) * epochs)
    timer = EpochTimer()
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(
            output_dir=scratch, per_device_train_batch_size=batch_size,
            learning_rate=learning_rate, num_train_epochs=epochs,
            lr_scheduler_type="linear", warmup_steps=int(total * warmup_proportion),
            weight_decay=0.01, adam_epsilon=1e-6, max_grad_norm=1.0, seed=seed,
            data_seed=seed, train_sampling_strategy="group_by_length",
            save_strategy="no", eval_strategy="no", logging_strategy="epoch",
            report_to="none", use_cpu=_DEVICE.value == "cpu", disable_tqdm=True,
            dataloader_num_workers=0)
        trainer_class = (_GoogleScheduleTrainer if _SCHEDULE.value == "google"
                         else transformers.Trainer)
        trainer = trainer_class(model=model, args=args, train_dataset=rows,
                                data_collator=collator, callbacks=[timer])
        start = time.perf_counter()
        output = trainer.train()
        seconds = time.perf_counter() - start
    return output, seconds, timer.seconds


def outputs(model, rows, collator, batch_size):
    """The model's outputs over `rows` in their order, one per batch: a plain loop (eval mode,
    no gradients), not `Trainer.predict`, which under length grouping has returned them in
    another order (transformers 5.23). Labels in `rows` are left out; the outputs are on the
    CPU."""
    model.eval()
    results = []
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            batch = collator([{k: v for k, v in row.items() if k != "labels"}
                              for row in rows[start:start + batch_size]])
            out = model(**{k: v.to(model.device) for k, v in batch.items()})
            results.append(out.__class__(**{k: v.cpu() for k, v in out.items()}))
    return results


def impl():
    """What the peer ran on, for the JSON."""
    where = (torch.cuda.get_device_name() if _DEVICE.value == "cuda"
             else f"{torch.get_num_threads()} CPU threads")
    return f"transformers {transformers.__version__} Trainer, torch {torch.__version__}, {where}"


def report(results, output=None):
    """Logs and prints `results`; writes them to `output` when given."""
    logging.info("%s", results)
    print(json.dumps(results))
    if output:
        runs.write_json(output, results)
