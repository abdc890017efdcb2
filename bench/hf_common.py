"""What the Hugging Face peers share: the Trainer under kbert's budget, scoring, the JSON.

`train` fine-tunes with `transformers.Trainer` (PyTorch, on the CPU unless --hf_device=cuda)
under the budget of `bench.budget` and the settings of kbert's recipes: peak learning rate,
linear warm-up (the same fraction of the steps) and decay to 0 (from the end of warm-up, the
Trainer's `linear`; from step 0, as kbert's, with --hf_lr_schedule=google), weight decay 0.01
(not on biases and LayerNorm, as the Trainer's default), AdamW epsilon 1e-6, gradient clipping
at global norm 1, the seed, --precision as the Trainer's `bf16`/`fp16` (torch.autocast, float32
weights); with the Trainer's own speed setting on: `train_sampling_strategy="group_by_length"`
(batches of similar length), to go with a padding collator. It returns the "train" entry of a
peer's JSON. `encode` makes the training rows of a text classifier, `outputs` runs the model
over a list in order (under the same autocast), for scoring, `describe` says what ran.
"""

import math
import tempfile
import time

import numpy as np
import torch
import transformers
from absl import flags

_DEVICE = flags.DEFINE_enum(
    "hf_device", "cpu", ["cpu", "cuda"],
    "Where the Trainer runs. Speed comparisons with kbert need cpu (the same machine); cuda "
    "gives the peer's scores at a full budget where its CPU run would take hours.")
_SCHEDULE = flags.DEFINE_enum(
    "hf_lr_schedule", "huggingface", ["huggingface", "google"],
    "The decay after warm-up: huggingface (the Trainer's `linear`: from the peak at the end of "
    "warm-up to 0) or google (kbert's and Google's: lr * (1 - step / steps), counted from step "
    "0, so 1 - warmup_proportion of the peak when warm-up ends).")

# --precision -> the Trainer's setting: torch.autocast in that dtype, float32 weights.
_TRAINER_PRECISION = {"float32": {}, "bfloat16": {"bf16": True}, "float16": {"fp16": True}}


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


def encode(tokenizer, texts, labels, max_length):
    """Rows of model inputs (dicts), truncated to `max_length` pieces and unpadded.

    Args:
        texts: a tuple of one list of texts, or of two (pairs).
        labels: one label per text (a class id, or a list of floats for multi-label), put in
            each row's "labels"; None for none.
    """
    encoded = tokenizer(*texts, truncation=True, max_length=max_length)
    rows = [dict(zip(encoded.keys(), values, strict=True))
            for values in zip(*encoded.values(), strict=True)]
    if labels is not None:
        for row, label in zip(rows, labels, strict=True):
            row["labels"] = label
    return rows


def train(model, rows, collator, budget):
    """Fine-tunes `model` on `rows` (dicts of model inputs and labels) with the Trainer.

    Args:
        budget: `bench.budget` flags: train_batch_size, learning_rate, num_train_epochs (a
            fraction stops part-way, as the Trainer's), warmup_proportion, seed, precision.

    Returns:
        The "train" entry of a peer's JSON: examples, epochs, steps, seconds in
        `trainer.train()`, examples_per_second, epoch_seconds, mean_tokens_per_example,
        final_loss.
    """
    batch_size, epochs = budget.train_batch_size.value, budget.num_train_epochs.value
    # The Trainer's own step count: a last short batch per epoch, fractional epochs rounded up.
    total = math.ceil(math.ceil(len(rows) / batch_size) * epochs)
    timer = EpochTimer()
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(
            output_dir=scratch, per_device_train_batch_size=batch_size,
            learning_rate=budget.learning_rate.value, num_train_epochs=epochs,
            lr_scheduler_type="linear",
            warmup_steps=int(total * budget.warmup_proportion.value),
            weight_decay=0.01, adam_epsilon=1e-6, max_grad_norm=1.0, seed=budget.seed.value,
            data_seed=budget.seed.value, train_sampling_strategy="group_by_length",
            save_strategy="no", eval_strategy="no", logging_strategy="epoch",
            report_to="none", use_cpu=_DEVICE.value == "cpu", disable_tqdm=True,
            dataloader_num_workers=0, **_TRAINER_PRECISION[budget.precision.value])
        trainer_class = (_GoogleScheduleTrainer if _SCHEDULE.value == "google"
                         else transformers.Trainer)
        trainer = trainer_class(model=model, args=args, train_dataset=rows,
                                data_collator=collator, callbacks=[timer])
        start = time.perf_counter()
        output = trainer.train()
        seconds = time.perf_counter() - start
    return {"examples": len(rows), "epochs": epochs, "steps": output.global_step,
            "seconds": round(seconds, 2),
            "examples_per_second": round(len(rows) * epochs / seconds, 2),
            "epoch_seconds": [round(t, 2) for t in timer.seconds],
            "mean_tokens_per_example": float(np.mean([len(row["input_ids"]) for row in rows])),
            "final_loss": output.training_loss}


def outputs(model, rows, collator, batch_size, precision):
    """The model's outputs over `rows` in their order, one per batch: a plain loop (eval mode,
    no gradients, autocast in `precision` as in training), not `Trainer.predict`, which under
    length grouping has returned them in another order (transformers 5.23). Labels in `rows`
    are left out; the outputs are float32, on the CPU."""
    model.eval()
    results = []
    with torch.no_grad(), torch.autocast(model.device.type, getattr(torch, precision),
                                         enabled=precision != "float32"):
        for start in range(0, len(rows), batch_size):
            batch = collator([{k: v for k, v in row.items() if k != "labels"}
                              for row in rows[start:start + batch_size]])
            out = model(**{k: v.to(model.device) for k, v in batch.items()})
            results.append(out.__class__(**{k: v.float().cpu() for k, v in out.items()}))
    return results


def describe(precision):
    """What the peer ran on and in, for the JSON: "impl", "precision" (the --precision) and
    "precision_settings" (the Trainer's)."""
    where = (torch.cuda.get_device_name() if _DEVICE.value == "cuda"
             else f"{torch.get_num_threads()} CPU threads")
    setting = ", ".join(f"{k}=True" for k in _TRAINER_PRECISION[precision])
    return {"impl": f"transformers {transformers.__version__} Trainer, torch "
                    f"{torch.__version__}, {where}",
            "precision": precision,
            "precision_settings": (f"TrainingArguments({setting}): torch.autocast in "
                                   f"{precision}, float32 weights" if setting else "float32")}
