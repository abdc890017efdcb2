"""kbert: BERT in Keras 3 on TensorFlow, exact to Google's original checkpoints.

`import kbert` starts no TensorFlow: each public name imports its module when first read
(`kbert.lazy`), and Keras finds kbert's classes in .keras files once Keras is imported
(`kbert.keras_registration`).
"""

import typing

from kbert import cpu_allocator  # noqa: F401  (first: every kbert module is imported after it)
from kbert import keras_registration
from kbert import lazy

if typing.TYPE_CHECKING:  # the public names, imported when first read (kbert.lazy)
    from kbert.bridges import convert
    from kbert.bridges import load_model
    from kbert.bridges import save_model
    from kbert.checkpoints import GoogleCheckpoint
    from kbert.checkpoints import list_presets
    from kbert.checkpoints import resolve_release
    from kbert.checkpoints import save_google_checkpoint
    from kbert.checkpoints.huggingface import convert_google_to_huggingface
    from kbert.checkpoints.huggingface import convert_huggingface_to_google
    from kbert.config import BertConfig
    from kbert.export import export_saved_model
    from kbert.layers.embeddings import BertEmbeddings
    from kbert.layers.transformer import BertTransformerLayer
    from kbert.models.classifier import BertClassifier
    from kbert.models.encoder import BertEncoder
    from kbert.models.precision import with_compute_dtype
    from kbert.models.pretrainer import BertPretrainer
    from kbert.models.span_labeler import BertSpanLabeler
    from kbert.models.token_classifier import BertTokenClassifier
    from kbert.tasks.optimization import create_optimizer
    from kbert.tokenization import BertPreprocessor
    from kbert.tokenization import FullTokenizer
    from kbert.tokenization import check_vocab_size

__version__ = "0.2.0"

__all__ = [
    "BertClassifier", "BertConfig", "BertEmbeddings", "BertEncoder", "BertPreprocessor",
    "BertPretrainer", "BertSpanLabeler", "BertTokenClassifier", "BertTransformerLayer",
    "FullTokenizer",
    "GoogleCheckpoint", "convert_google_to_huggingface", "convert_huggingface_to_google",
    "check_vocab_size", "convert", "create_optimizer", "export_saved_model", "list_presets",
    "load_model", "resolve_release", "save_model", "save_google_checkpoint",
    "with_compute_dtype",
]

__getattr__, __dir__ = lazy.attach(__name__)
keras_registration.install()
