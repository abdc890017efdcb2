"""Serving: SavedModels that take raw text, for TensorFlow and TensorFlow Serving."""

from kbert.export.saved_model import TEXT_SIGNATURE
from kbert.export.saved_model import TOKEN_IDS_SIGNATURE
from kbert.export.saved_model import export_saved_model
from kbert.export.saved_model import load_for_export

__all__ = ["TEXT_SIGNATURE", "TOKEN_IDS_SIGNATURE", "export_saved_model", "load_for_export"]
