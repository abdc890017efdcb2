"""Original Google BERT checkpoints (TF1 name-based format), in and out; releases by name."""

from kbert.checkpoints.releases import list_presets
from kbert.checkpoints.releases import resolve_release
from kbert.checkpoints.tf1 import GoogleCheckpoint
from kbert.checkpoints.tf1 import google_tensors
from kbert.checkpoints.tf1 import load_google_weights
from kbert.checkpoints.tf1 import save_google_checkpoint
from kbert.checkpoints.tf1 import write_tf1_checkpoint

__all__ = ["GoogleCheckpoint", "google_tensors", "list_presets", "load_google_weights",
           "resolve_release", "save_google_checkpoint", "write_tf1_checkpoint"]
