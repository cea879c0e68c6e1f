"""The models of `kiln bench models`: real architectures from keras.applications, keras_hub and
flax.nnx (with optax), built with random weights (nothing is downloaded), as pure JAX functions.

Each builder returns `(fn, args)`: `fn` takes every weight as an argument (a served model's
weights are its inputs; baked in as constants they would make a module of hundreds of MB), and
`args` are numpy pytrees. `models.py` exports `jax.jit(fn)` with `jax.export` and runs that one
export on Kiln and on XLA:CPU.

Keras models run through `stateless_call` (keras's own pure entry point) with keras's JAX
backend; the backend is chosen when keras is first imported, so `use_jax_backend()` must run
before that.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

SEED = 0


@dataclass(frozen=True)
class Model:
    name: str
    note: str
    make: Callable[[], tuple[Callable, tuple]]   # -> (jax function, numpy pytree inputs)
    tol: tuple[float, float] = (2e-3, 2e-3)      # (rtol, atol) against XLA's outputs
    training: bool = False


def use_jax_backend() -> None:
    """Keras reads KERAS_BACKEND once, at its first import: JAX's is the one jax.export sees."""
    import sys
    current = os.environ.setdefault("KERAS_BACKEND", "jax")
    if "keras" in sys.modules:
        current = sys.modules["keras"].backend.backend()
    if current != "jax":
        from ..errors import KilnError
        raise KilnError(f"kiln bench models needs keras's JAX backend, not {current!r}",
                        hint="unset KERAS_BACKEND or set it to jax, and import keras after it")


def _keras():
    use_jax_backend()
    import keras
    keras.utils.set_random_seed(SEED)
    return keras


def _values(variables) -> list[np.ndarray]:
    return [np.asarray(v.value) for v in variables]


def _rng():
    return np.random.default_rng(SEED)


def _stateless_inference(model, inputs):
    """A keras model's inference as a pure function of (trainable, non-trainable, inputs)."""
    def infer(trainable, non_trainable, x):
        out, _ = model.stateless_call(trainable, non_trainable, x, training=False)
        return out
    return infer, (_values(model.trainable_variables), _values(model.non_trainable_variables),
                   inputs)


# -- keras.applications ----------------------------------------------------------------------------
def _application(builder_name: str):
    def make():
        keras = _keras()
        model = getattr(keras.applications, builder_name)(weights=None, input_shape=(224, 224, 3))
        image = _rng().uniform(0, 255, (1, 224, 224, 3)).astype(np.float32)
        return _stateless_inference(model, image)
    return make


# -- keras_hub ---------------------------------------------------------------------------------------
def _hub():
    _keras()
    import keras_hub
    return keras_hub


def _token_ids(vocabulary: int, shape=(2, 128)) -> np.ndarray:
    return _rng().integers(0, vocabulary, shape).astype(np.int32)


# BERT-small (4 layers, hidden 512, 8 heads: the "small" of the BERT miniatures).
BERT_SMALL = dict(vocabulary_size=30522, num_layers=4, num_heads=8, hidden_dim=512,
                  intermediate_dim=2048, max_sequence_length=512, dropout=0.0)
# GPT-2 small (124M parameters).
GPT2_SMALL = dict(vocabulary_size=50257, num_layers=12, num_heads=12, hidden_dim=768,
                  intermediate_dim=3072, max_sequence_length=1024, dropout=0.0)


def bert_small():
    hub = _hub()
    model = hub.models.BertBackbone(**BERT_SMALL)
    tokens = _token_ids(BERT_SMALL["vocabulary_size"])
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens),
              "padding_mask": np.ones_like(tokens)}
    return _stateless_inference(model, inputs)


def gpt2_backbone():
    hub = _hub()
    model = hub.models.GPT2Backbone(**GPT2_SMALL)
    tokens = _token_ids(GPT2_SMALL["vocabulary_size"])
    return _stateless_inference(model, {"token_ids": tokens, "padding_mask": np.ones_like(tokens)})


def gpt2_decode(prompt_len: int = 16, new_tokens: int = 16):
    """Greedy decoding with keras_hub's KV cache: one prefill of the prompt, then a fori_loop of
    single-token steps (`call_with_cache`), as GPT2CausalLM.generate does."""
    hub = _hub()
    import jax
    import jax.numpy as jnp
    import keras
    backbone = hub.models.GPT2Backbone(**GPT2_SMALL)
    lm = hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    total = prompt_len + new_tokens
    tokens = np.zeros((1, total), np.int32)
    tokens[:, :prompt_len] = _token_ids(GPT2_SMALL["vocabulary_size"], (1, prompt_len))

    def decode(weights, token_ids):
        with keras.StatelessScope(state_mapping=list(zip(lm.variables, weights))):
            _, cache = lm._build_cache(token_ids)   # prefill: the whole buffer, cache filled

            def step(i, carry):
                ids, cache = carry
                index = prompt_len + i
                current = jax.lax.dynamic_slice(ids, (0, index - 1), (1, 1))
                logits, _, cache = lm.call_with_cache(current, cache, index - 1)
                chosen = jnp.argmax(logits[:, -1, :], axis=-1).astype(ids.dtype)
                ids = jax.lax.dynamic_update_slice(ids, chosen[:, None], (0, index))
                return ids, cache
            ids, _ = jax.lax.fori_loop(0, new_tokens, step, (token_ids, cache))
            return ids
    return decode, (_values(lm.variables), tokens)


# ViT-Tiny/16 at 224x224 (12 layers, hidden 192, 3 heads).
VIT_TINY = dict(image_shape=(224, 224, 3), patch_size=16, num_layers=12, num_heads=3,
                hidden_dim=192, mlp_dim=768)


def vit_tiny():
    hub = _hub()
    model = hub.models.ViTBackbone(**VIT_TINY)
    image = _rng().uniform(0, 1, (1, 224, 224, 3)).astype(np.float32)
    return _stateless_inference(model, image)


def lstm_gru():
    keras = _keras()
    model = keras.Sequential([keras.Input((64, 32)), keras.layers.LSTM(128, return_sequences=True),
                              keras.layers.GRU(128), keras.layers.Dense(10)])
    x = _rng().standard_normal((8, 64, 32)).astype(np.float32)
    return _stateless_inference(model, x)


# -- training steps -----------------------------------------------------------------------------
def _mid_training(optimizer, params):
    """Adam's state as in the middle of training (step 100, second moments 1e-6), not at
    `init`: the very first Adam update is lr * sign(gradient), so gradients that round to
    either side of zero flip whole updates, and no tolerance could compare two compilers."""
    import jax
    adam, *rest = optimizer.init(params)
    adam = adam._replace(count=np.asarray(100, np.int32),
                         nu=jax.tree.map(lambda x: np.full(np.shape(x), 1e-6, np.float32), adam.nu))
    return jax.tree.map(np.asarray, (adam, *rest))


def gpt2_train_step():
    """One step of next-token training of GPT-2 small: value_and_grad of the cross-entropy
    (logits through the tied token embedding), optax.adam's update."""
    hub = _hub()
    import jax
    import jax.numpy as jnp
    import optax
    model = hub.models.GPT2Backbone(**GPT2_SMALL)
    embedding = model.token_embedding.embeddings
    embedding_at = next(i for i, v in enumerate(model.trainable_variables) if v is embedding)
    optimizer = optax.adam(1e-4)
    params = _values(model.trainable_variables)
    fixed = _values(model.non_trainable_variables)
    tokens = _token_ids(GPT2_SMALL["vocabulary_size"])

    def loss_fn(params, tokens):
        hidden, _ = model.stateless_call(params, fixed_state(),
                                         {"token_ids": tokens, "padding_mask": jnp.ones_like(tokens)},
                                         training=True)
        logits = hidden[:, :-1] @ params[embedding_at].T
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    def fixed_state():
        return [jnp.asarray(v) for v in fixed]

    def step(params, opt_state, tokens):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), opt_state
    return step, (params, _mid_training(optimizer, params), tokens)


def nnx_cnn_train_step(batch: int = 16):
    """A flax.nnx CNN (conv, BatchNorm, relu twice; pooling; linear) trained one step: the
    BatchNorm statistics updated in training mode, optax.adam on the parameters."""
    import jax
    import optax
    from flax import nnx

    class Cnn(nnx.Module):
        def __init__(self, rngs):
            self.conv1 = nnx.Conv(3, 32, (3, 3), rngs=rngs)
            self.bn1 = nnx.BatchNorm(32, rngs=rngs)
            self.conv2 = nnx.Conv(32, 64, (3, 3), strides=(2, 2), rngs=rngs)
            self.bn2 = nnx.BatchNorm(64, rngs=rngs)
            self.head = nnx.Linear(64, 10, rngs=rngs)

        def __call__(self, x):
            x = nnx.relu(self.bn1(self.conv1(x)))
            x = nnx.relu(self.bn2(self.conv2(x)))
            return self.head(x.mean(axis=(1, 2)))

    model = Cnn(nnx.Rngs(SEED))
    model.train()
    graphdef, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
    optimizer = optax.adam(1e-3)

    def step(params, stats, opt_state, images, labels):
        # nnx's own value_and_grad: BatchNorm updates its statistics on the merged module,
        # which jax.value_and_grad would see as a mutation from another trace level.
        net = nnx.merge(graphdef, params, stats)

        def loss_fn(net):
            return optax.softmax_cross_entropy_with_integer_labels(net(images), labels).mean()
        loss, grads = nnx.value_and_grad(loss_fn)(net)
        params = nnx.state(net, nnx.Param)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), nnx.state(net, nnx.BatchStat), opt_state

    rng = _rng()
    images = rng.standard_normal((batch, 32, 32, 3)).astype(np.float32)
    labels = rng.integers(0, 10, (batch,)).astype(np.int32)
    as_numpy = lambda tree: jax.tree.map(np.asarray, tree)  # noqa: E731
    return step, (as_numpy(params), as_numpy(stats), _mid_training(optimizer, params), images,
                  labels)


def tiny_mlp():
    """Not a real model: a two-layer keras MLP, small enough for the suite's own tests."""
    keras = _keras()
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(4)])
    return _stateless_inference(model, _rng().standard_normal((2, 16)).astype(np.float32))


# Deep networks in float32: XLA and Kiln sum in different orders; errors grow with depth.
_DEEP = (1e-2, 1e-3)
MODELS = [
    Model("resnet50", "keras.applications ResNet50, 224x224, batch 1", _application("ResNet50"),
          tol=_DEEP),
    Model("mobilenetv2", "keras.applications MobileNetV2, 224x224, batch 1",
          _application("MobileNetV2"), tol=_DEEP),
    Model("efficientnetb0", "keras.applications EfficientNetB0, 224x224, batch 1",
          _application("EfficientNetB0"), tol=_DEEP),
    Model("convnext_tiny", "keras.applications ConvNeXtTiny, 224x224, batch 1",
          _application("ConvNeXtTiny"), tol=_DEEP),
    Model("bert_small", "keras_hub BertBackbone, 4 layers, hidden 512, 2x128 tokens", bert_small,
          tol=_DEEP),
    Model("gpt2_backbone", "keras_hub GPT2Backbone, GPT-2 small (124M), 2x128 tokens",
          gpt2_backbone, tol=_DEEP),
    Model("gpt2_decode", "keras_hub GPT2CausalLM greedy decode, KV cache, 16+16 tokens",
          gpt2_decode, tol=(0, 0)),
    Model("vit_tiny", "keras_hub ViTBackbone, ViT-Ti/16, 224x224, batch 1", vit_tiny, tol=_DEEP),
    Model("lstm_gru", "keras LSTM(128) + GRU(128) + Dense, batch 8, 64 steps", lstm_gru),
    Model("gpt2_train", "GPT-2 small training step: value_and_grad + optax.adam, 2x128 tokens",
          gpt2_train_step, tol=_DEEP, training=True),
    Model("nnx_cnn_train", "flax.nnx CNN training step: BatchNorm, optax.adam, batch 16, 32x32",
          nnx_cnn_train_step, tol=_DEEP, training=True),
]
TEST_MODELS = [Model("tiny_mlp", "keras Dense(32, relu) + Dense(4), batch 2", tiny_mlp)]


def by_name(names: list[str] | None, *, include_test: bool = False) -> list[Model]:
    """The suite's models in order; `names` picks some (unknown names: a KilnError)."""
    known = MODELS + (TEST_MODELS if include_test else [])
    if not names:
        return list(MODELS)
    table = {m.name: m for m in known}
    missing = [n for n in names if n not in table]
    if missing:
        from ..errors import KilnError
        raise KilnError(f"unknown model(s): {', '.join(missing)}",
                        hint="known: " + ", ".join(m.name for m in MODELS))
    return [table[n] for n in names]
