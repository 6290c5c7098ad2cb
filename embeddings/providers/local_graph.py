"""Rewrites of the packaged MiniLM ONNX graph into onnxruntime's fused CPU operators.

The wheel's graph is a PyTorch (dynamo) export whose attention is spelled out
op by op -- per layer: reshapes and transposes of Q, K and V, a boolean mask
built with ``And``/``Where``, scaled ``MatMul``, ``Softmax``, then an
``IsNaN``/``Where`` guard and another ``MatMul`` -- and whose GELU is
``x * (0.5 * (erf(x / sqrt 2) + 1))``. onnxruntime's own fusions match neither,
and profiling showed that glue at about a third of the int8 model's time.
:func:`fuse_attention` puts one ``com.microsoft.MultiHeadAttention`` (fed the
projected Q, K, V and the padding mask) in place of each layer's attention, and
:func:`fuse_gelu` one ``com.microsoft.Gelu`` in place of each erf chain; the
nodes left without a consumer are then pruned. Both are exact rewrites (same
float32 math up to summation order): the builder (``local_model``) checks the
rewritten model against the original on a probe batch before keeping it.
:func:`quantize_attention` then hands each fused layer's Q, K and V projections
to one ``com.microsoft.QAttention`` (a single int8 GEMM for the three, then the
same attention) -- with the weights quantized as ``quantize_dynamic`` does it --
optionally without the padding mask, for a model run on one sequence at a time.

Matching relies on what the export keeps: the bias initializers named
``...layer.N.attention.self.{query,key,value}.bias`` and
``...layer.N.attention.output.dense.bias``. A layer whose pattern is not found
is left as it is (still correct, just not fused).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["approximate_gelu", "fuse_attention", "fuse_gelu", "prune", "quantize_attention"]

_MS = "com.microsoft"
_BIAS = re.compile(r"layer\.(\d+)\.attention\.(self\.(query|key|value)|output\.dense)\.bias$")


def fuse_attention(model: Any, *, num_heads: int, mask_input: str = "attention_mask") -> int:
    """Replace each layer's attention by MultiHeadAttention; the number of layers fused."""
    from onnx import TensorProto, helper

    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {t.name for t in graph.initializer}
    if mask_input not in {i.name for i in graph.input}:
        return 0
    # layer -> role -> the Add node adding that bias (its output is the projection).
    adds: dict[int, dict[str, Any]] = {}
    for node in graph.node:
        if node.op_type != "Add":
            continue
        for name in node.input:
            match = _BIAS.search(name) if name in initializers else None
            if match:
                role = match.group(3) or "output"
                adds.setdefault(int(match.group(1)), {})[role] = node
    mask32 = f"{mask_input}_int32_for_attention"
    fused = 0
    new_nodes = []
    replaced: dict[str, Any] = {}  # context tensor name -> the MultiHeadAttention producing it
    for layer, roles in sorted(adds.items()):
        if set(roles) != {"query", "key", "value", "output"}:
            continue
        out_add = roles["output"]
        out_matmul = producers.get(_other_input(out_add, initializers))
        if out_matmul is None or out_matmul.op_type != "MatMul":
            continue
        context = out_matmul.input[0]
        mha = helper.make_node(
            "MultiHeadAttention",
            [roles["query"].output[0], roles["key"].output[0], roles["value"].output[0], "", mask32],
            [context], name=f"fused_attention_{layer}", domain=_MS, num_heads=num_heads,
        )
        replaced[context] = mha
        fused += 1
    if not fused:
        return 0
    cast = helper.make_node("Cast", [mask_input], [mask32], name="attention_mask_to_int32",
                            to=TensorProto.INT32)
    for node in graph.node:
        if any(out in replaced for out in node.output):
            continue  # its output now comes from the fused node
        new_nodes.append(node)
    # Topological order: the cast first, each MultiHeadAttention right before the
    # first node that reads its output.
    ordered = [cast]
    pending = dict(replaced)
    for node in new_nodes:
        for name in node.input:
            if name in pending:
                ordered.append(pending.pop(name))
        ordered.append(node)
    ordered.extend(pending.values())
    del graph.node[:]
    graph.node.extend(ordered)
    _ensure_opset(model, _MS)
    prune(model)
    return fused


def fuse_gelu(model: Any) -> int:
    """Replace ``x * (0.5 * (erf(x / sqrt2) + 1))`` chains by com.microsoft Gelu; the count."""
    from onnx import helper, numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer if _is_scalar(t)}
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(name: str, op: str) -> Any | None:
        users = consumers.get(name, [])
        return users[0] if len(users) == 1 and users[0].op_type == op else None

    def const_of(node: Any, value: float) -> str | None:
        """The input of ``node`` that is the scalar ``value``, else None."""
        for name in node.input:
            if name in consts and np.isclose(float(consts[name]), value, rtol=1e-6):
                return name
        return None

    swaps: dict[int, Any] = {}  # id(last Mul) -> Gelu node
    for erf in [n for n in graph.node if n.op_type == "Erf"]:
        div = producers.get(erf.input[0])
        if div is None or div.op_type != "Div" or div.input[1] != const_of(div, np.sqrt(2.0)):
            continue
        x = div.input[0]
        add = only_consumer(erf.output[0], "Add")
        half = only_consumer(add.output[0], "Mul") if add is not None and const_of(add, 1.0) else None
        last = only_consumer(half.output[0], "Mul") if half is not None and const_of(half, 0.5) else None
        if last is None or x not in last.input:
            continue
        swaps[id(last)] = helper.make_node("Gelu", [x], [last.output[0]], name=f"fused_{erf.name or x}_gelu",
                                           domain=_MS)
    if not swaps:
        return 0
    nodes = [swaps.get(id(node), node) for node in graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    _ensure_opset(model, _MS)
    prune(model)
    return len(swaps)


def approximate_gelu(model: Any) -> int:
    """Put ``com.microsoft.FastGelu`` in place of each ``com.microsoft.Gelu``; the count.

    FastGelu is the tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``
    of ``x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))``: at most ~5e-4 apart in absolute
    value, and onnxruntime's CPU kernel takes ~0.6x the time of its erf ``Gelu``
    (bench/README.md, session 24). Not an exact rewrite: it moves the vectors a little,
    so a model built with it needs its own model id.
    """
    swapped = 0
    for node in model.graph.node:
        if node.op_type == "Gelu" and node.domain == _MS:
            node.op_type = "FastGelu"
            node.name = node.name.replace("gelu", "fast_gelu") if node.name else node.name
            swapped += 1
    return swapped


def quantize_attention(model: Any, *, num_heads: int, padding_mask: bool = True) -> int:
    """Put one QAttention in place of each MultiHeadAttention and its Q/K/V projections; the count.

    A MultiHeadAttention whose query, key and value are ``Add(MatMul(x, W), b)`` with one
    ``x`` and constant ``W``, ``b`` becomes ``DynamicQuantizeLinear(x)`` + ``QAttention``
    over the three weights side by side, quantized per column, symmetric int8
    (``scale = max|w| / 127``): the weights, scales and activation quantization of
    ``quantize_dynamic(per_channel=True)`` on the three MatMuls, so only the GEMM
    calls change (one of N = 3 x hidden instead of three) -- not the arithmetic.
    The padding mask is passed on; with ``padding_mask=False`` it is dropped, and so is the
    graph's mask input once nothing reads it: a model for one unpadded sequence per
    pass (1-2 % faster a pass, the same values), which cannot be fed a padded batch.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    constants = {t.name: t for t in graph.initializer}
    dropped: set[int] = set()
    swaps: dict[int, list[Any]] = {}
    for node in graph.node:
        if node.op_type != "MultiHeadAttention" or node.domain != _MS:
            continue
        parts = [_projection(producers, constants, name) for name in node.input[:3]]
        if any(p is None for p in parts) or len({p[0] for p in parts}) != 1:  # type: ignore[index]
            continue
        x = parts[0][0]  # type: ignore[index]
        weight = np.concatenate([numpy_helper.to_array(constants[p[1]]) for p in parts], axis=1)  # type: ignore[index]
        bias = np.concatenate([numpy_helper.to_array(constants[p[2]]) for p in parts])  # type: ignore[index]
        scale = (np.abs(weight).max(axis=0) / 127.0).astype(np.float32)
        scale[scale == 0] = 1.0
        codes = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
        name = node.name or f"attention_{len(swaps)}"
        graph.initializer.extend([
            numpy_helper.from_array(codes, f"{name}_qkv_weight"),
            numpy_helper.from_array(scale, f"{name}_qkv_scale"),
            numpy_helper.from_array(np.zeros(codes.shape[1], np.int8), f"{name}_qkv_zero_point"),
            numpy_helper.from_array(bias.astype(np.float32), f"{name}_qkv_bias"),
        ])
        mask = node.input[4] if len(node.input) > 4 and padding_mask else ""
        swaps[id(node)] = [
            helper.make_node("DynamicQuantizeLinear", [x], [f"{name}_x_u8", f"{name}_x_scale", f"{name}_x_zero_point"],
                             name=f"{name}_quantize_input"),
            helper.make_node("QAttention", [f"{name}_x_u8", f"{name}_qkv_weight", f"{name}_qkv_bias",
                                            f"{name}_x_scale", f"{name}_qkv_scale", mask,
                                            f"{name}_x_zero_point", f"{name}_qkv_zero_point"],
                             list(node.output), name=f"{name}_int8", domain=_MS, num_heads=num_heads),
        ]
    if not swaps:
        return 0
    nodes = [new for node in graph.node for new in swaps.get(id(node), [node])]
    del graph.node[:]
    graph.node.extend(nodes)
    prune(model)
    if not padding_mask:
        read = {name for node in graph.node for name in node.input}
        unread = [i for i in graph.input if i.name not in read]
        for graph_input in unread:
            graph.input.remove(graph_input)
    return len(swaps)


def prune(model: Any) -> None:
    """Drop nodes whose outputs reach no graph output, and initializers no node reads."""
    graph = model.graph
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(graph.node):
        if any(out in needed for out in node.output):
            keep.append(node)
            needed.update(name for name in node.input if name)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    used = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(used)


def _other_input(node: Any, initializers: set[str]) -> str:
    """The input of a binary node that is not an initializer."""
    return next((name for name in node.input if name not in initializers), node.input[0])


def _projection(producers: dict[str, Any], constants: dict[str, Any], name: str) -> tuple[str, str, str] | None:
    """``(x, W, b)`` when tensor ``name`` is ``Add(MatMul(x, W), b)`` with constant 2-D ``W`` and ``b``."""
    add = producers.get(name)
    if add is None or add.op_type != "Add" or len(add.input) != 2:
        return None
    bias = next((i for i in add.input if i in constants), None)
    matmul = producers.get(next((i for i in add.input if i != bias), ""))
    if bias is None or matmul is None or matmul.op_type != "MatMul" or matmul.input[1] not in constants:
        return None
    if len(constants[matmul.input[1]].dims) != 2 or len(constants[bias].dims) != 1:
        return None
    return matmul.input[0], matmul.input[1], bias


def _is_scalar(tensor: Any) -> bool:
    return all(d == 1 for d in tensor.dims)


def _ensure_opset(model: Any, domain: str) -> None:
    from onnx import helper

    if not any(op.domain == domain for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid(domain, 1))
