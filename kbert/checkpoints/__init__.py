"""Original Google BERT checkpoints (TF1 name-based format), in and out."""

from kbert.checkpoints.tf1 import GoogleCheckpoint
from kbert.checkpoints.tf1 import load_google_weights
from kbert.checkpoints.tf1 import save_google_checkpoint
from kbert.checkpoints.tf1 import write_tf1_checkpoint

__all__ = ["GoogleCheckpoint", "load_google_weights", "save_google_checkpoint",
           "write_tf1_checkpoint"]
