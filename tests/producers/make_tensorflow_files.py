"""Write the TensorFlow producer files that tests/py/test_producers.py runs on Kiln.

Each model is a Keras 3 model on the TensorFlow backend, called through
`tf.function(jit_compile=True)`; TensorFlow's `experimental_get_compiler_ir` gives its HLO as
text (stage "hlo") and as a serialized HloModuleProto (stage "hlo_serialized"), exactly what
XLA receives. The weights are arguments of the program (Keras's `stateless_call`), made from the
recipes in weights.py; TensorFlow's own results are stored next to the program.

    KERAS_BACKEND=tensorflow python tests/producers/make_tensorflow_files.py

(in Kiln's test environment, which has tensorflow-cpu; the files land in
tests/producers/files/tensorflow/).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import weights  # noqa: E402

OUT = Path(__file__).parent / "files" / "tensorflow"


def mobilenet_v3_small():
    model = keras.applications.MobileNetV3Small(input_shape=(96, 96, 3), weights=None)
    image = np.random.default_rng(1).uniform(0, 255, (1, 96, 96, 3)).astype(np.float32)
    return model, image


def text_encoder():
    """A small Transformer encoder of Keras layers: embedding, attention, layer norm, GELU MLP."""
    tokens = keras.Input((16,), dtype="int32")
    x = keras.layers.Embedding(100, 32)(tokens)
    attended = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    x = keras.layers.LayerNormalization()(x + attended)
    hidden = keras.layers.Dense(64, activation="gelu")(x)
    x = keras.layers.LayerNormalization()(x + keras.layers.Dense(32)(hidden))
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(tokens, keras.layers.Dense(5, activation="softmax")(x))
    ids = np.random.default_rng(2).integers(0, 100, (2, 16)).astype(np.int32)
    return model, ids


MODELS = {"mobilenet_v3_small": mobilenet_v3_small, "text_encoder": text_encoder}


def write(name: str, model: keras.Model, data: np.ndarray) -> None:
    trainable = [v.numpy() for v in model.trainable_variables]
    frozen = [v.numpy() for v in model.non_trainable_variables]
    names = [v.path for v in model.trainable_variables + model.non_trainable_variables]
    recipes = [weights.recipe(n, v, seed=i) for i, (n, v) in enumerate(zip(names, trainable + frozen))]
    made = [weights.make(r) for r in recipes]
    trainable, frozen = made[:len(trainable)], made[len(trainable):]

    def call(data, trainable, frozen):
        outputs, _ = model.stateless_call(trainable, frozen, data, training=False)
        return outputs

    function = tf.function(call, jit_compile=True)
    expected = function(data, trainable, frozen).numpy()
    compiler_ir = function.experimental_get_compiler_ir(data, trainable, frozen)
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.hlo").write_text(compiler_ir(stage="hlo"))
    (folder / "model.hlo.pb").write_bytes(compiler_ir(stage="hlo_serialized"))
    np.savez_compressed(folder / "data.npz", input=data, expected=expected)
    (folder / "manifest.json").write_text(json.dumps({
        "producer": f"tensorflow {tf.__version__}, keras {keras.__version__}",
        "made_by": "tests/producers/make_tensorflow_files.py",
        "program": "tf.function(jit_compile=True) of model.stateless_call(weights, x)",
        "arguments": "input, then the weights in this order",
        "weights": recipes,
    }, indent=1) + "\n")
    print(f"{name}: {len(recipes)} weights, result {expected.shape}")


if __name__ == "__main__":
    for name in sys.argv[1:] or MODELS:
        keras.utils.set_random_seed(0)   # each model's own initialization
        write(name, *MODELS[name]())
