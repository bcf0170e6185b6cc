"""The work model: what one op call must do at least, FLOPs and bytes, from its recorded shapes.

A kernel's work is not in the trace; its op's is. From an op's ``Input Dims``
and ``Input type`` (:mod:`helpers.facts.op_shapes`), a matrix multiply's FLOPs
(2*M*N*K) and an elementwise op's or a reduction's bytes follow, per op kind:

* GEMMs (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``,
  ``_scaled_mm``): 2*M*N*K FLOPs per matrix (a multiply and an add), the bias
  add left out; bytes: each input read once and the output written once (the
  least a kernel can move);
* convolutions: 2 * output elements * (input channels / groups) * kernel
  size FLOPs, the output's size from stride, padding and dilation (the op's
  ``Concrete Inputs``);
* elementwise ops: the output's shape is the inputs' shapes broadcast (the
  first tensor's dtype), one FLOP per output element (a lower bound: a GELU
  does more); an in-place op (``add_``) writes its first input; copies and
  fills do no arithmetic (0 FLOPs);
* reductions: one FLOP per element of the largest input; the output's shape from the
  reduced dims when ``Concrete Inputs`` give them, the input's shape for
  softmax and norms (one output per input), otherwise the output's bytes are
  left out (a lower bound).

The roofline (:mod:`helpers.facts.roofline`) puts this work against the kernels' time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from . import hardware, kernel_kinds as kk
from .op_shapes import Shapes

#: Input type -> (short dtype, bytes per element). What Kineto writes is the C++ scalar type's name.
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4), "c10::BFloat16": ("bf16", 2), "c10::Half": ("fp16", 2), "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1), "long": ("int64", 8), "int": ("int32", 4), "short": ("int16", 2),
    "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
}

GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                      "aten::_scaled_mm", "aten::addbmm"})
CONV_OPS = frozenset({"aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::conv1d",
                      "aten::conv2d", "aten::conv3d"})
# ops whose output has the input's shape (normalisations): sized as reductions that write as much as they read
_SAME_SHAPE_REDUCTIONS = re.compile(r"softmax|layer_norm|batch_norm|group_norm|rms_norm|_norm_backward")
_REDUCTIONS = re.compile(r"aten::(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|var|std|argmax|argmin|prod|"
                         r"any|all|logsumexp|_softmax|softmax|log_softmax|_log_softmax|_safe_softmax|"
                         r"native_layer_norm|layer_norm|native_batch_norm|_batch_norm|native_group_norm|"
                         r"_fused_rms_norm|rms_norm)\b")
_COPIES = frozenset({"aten::copy_", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::to"})
_FILLS = frozenset({"aten::fill_", "aten::zero_", "aten::zeros", "aten::ones", "aten::full", "aten::zeros_like",
                    "aten::ones_like", "aten::full_like"})


@dataclass(frozen=True)
class Work:
    """What one op call must do at least: FLOPs and bytes moved to and from GPU memory."""

    kind: str  # "gemm", "conv", "elementwise", "reduction", "copy", "fill"
    flops: float
    bytes: float
    dtype: str
    shape: str  # the op's input dims, as the trace gives them


def _numel(shape: list) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_shape(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v)


def _tensors(s: Shapes) -> list[tuple[list, str, int]] | str:
    """The op's tensor inputs: (shape, dtype, bytes per element), or why they cannot be known."""
    dims, types = s.dims, s.types
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return "its Input Dims and Input type do not pair up"
    out = []
    for d, t in zip(dims, types):
        if t == "TensorList" or t == "TensorList?":
            return "a TensorList input's element type is not recorded"
        known = DTYPES.get(t) if isinstance(t, str) else None
        if known is None:
            continue  # a scalar, a list of ints, an optional left out: no tensor
        if not _is_shape(d):
            return f"an input's dims {d!r} are not a shape"
        out.append((d, known[0], known[1]))
    return out


def _broadcast(shapes: list[list]) -> list | None:
    n = max(map(len, shapes), default=0)
    out = []
    for k in range(n):
        sizes = {s[len(s) - n + k] for s in shapes if len(s) - n + k >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def _concrete(s: Shapes, k: int) -> Any:
    """The k-th Concrete Input, parsed from its text ('[0]', 'True', '2'), or None."""
    c = s.concrete
    if not isinstance(c, list) or k >= len(c) or not isinstance(c[k], str) or not c[k]:
        return None
    text = c[k].strip()
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text)
    except ValueError:
        return None


def _gemm(op: str, s: Shapes) -> Work | str:
    ts = _tensors(s)
    if isinstance(ts, str):
        return ts
    shapes = [t[0] for t in ts]
    if len(ts) < 2:
        return "its two matrices' shapes are not both recorded"
    dtype, es = ts[0][1], ts[0][2]
    try:
        if op in ("aten::mm", "aten::_scaled_mm"):
            (m, k), (k2, n) = shapes[0], shapes[1]
            a, b, batch, extra = shapes[0], shapes[1], 1, []
        elif op == "aten::addmm":
            (m, k), (k2, n) = shapes[1], shapes[2]
            a, b, batch, extra = shapes[1], shapes[2], 1, [shapes[0]]
            dtype, es = ts[1][1], ts[1][2]
        elif op == "aten::bmm":
            (batch, m, k), (_, k2, n) = shapes[0], shapes[1]
            a, b, extra = shapes[0], shapes[1], []
        elif op in ("aten::baddbmm", "aten::addbmm"):
            (batch, m, k), (_, k2, n) = shapes[1], shapes[2]
            a, b, extra = shapes[1], shapes[2], [shapes[0]]
            dtype, es = ts[1][1], ts[1][2]
        elif op == "aten::linear":
            x, w = shapes[0], shapes[1]
            (n, k2), k = w, x[-1]
            m, batch, a, b, extra = _numel(x[:-1]), 1, x, w, shapes[2:3]
        else:  # aten::matmul: the batch dims of the first input, a 1-d or 2-d second
            x, w = shapes[0], shapes[1]
            if len(w) == 1:
                w = w + [1]
            if len(x) == 1:
                x = [1] + x
            k, k2, n = x[-1], w[-2], w[-1]
            m, batch, a, b, extra = x[-2], max(_numel(x[:-2]), _numel(w[:-2])), x, w, []
    except (ValueError, IndexError, TypeError):
        return f"its inputs {s.dims!r} are not the shapes {op} takes"
    if k != k2:
        return f"its inputs {s.dims!r} do not multiply (inner dims {k} and {k2})"
    out_elems = batch * m * n
    moved = (_numel(a) + _numel(b) + sum(map(_numel, extra)) + out_elems) * es
    if op == "aten::_scaled_mm":
        moved = (_numel(a) + _numel(b)) * es + out_elems * 2  # fp8 inputs; the output is at least 16-bit
    return Work("gemm", hardware.gemm_flops(m, n, k, batch), moved, dtype, _dims_text(s.dims))


_CONV_ARGS = {  # op -> positions of (stride, padding, dilation, transposed, groups); None: not an argument
    "aten::convolution": (3, 4, 5, 6, 8),
    "aten::_convolution": (3, 4, 5, 6, 8),
    "aten::cudnn_convolution": (3, 2, 4, None, 5),
    "aten::conv1d": (3, 4, 5, None, 6),
    "aten::conv2d": (3, 4, 5, None, 6),
    "aten::conv3d": (3, 4, 5, None, 6),
}


def _conv(op: str, s: Shapes) -> Work | str:
    ts = _tensors(s)
    if isinstance(ts, str):
        return ts
    if len(ts) < 2:
        return "its input and weight shapes are not both recorded"
    (x, dtype, es), (w, _, _) = ts[0], ts[1]
    where = _CONV_ARGS[op]
    stride, padding, dilation = (_concrete(s, k) for k in where[:3])
    transposed = _concrete(s, where[3]) if where[3] is not None else False
    groups = _concrete(s, where[4])
    spatial = len(x) - 2
    if transposed:
        return "a transposed convolution (no rule here)"
    if not (isinstance(groups, int) and groups > 0 and all(isinstance(v, list) for v in (stride, padding, dilation))):
        return "its stride, padding, dilation or groups are not in the trace's Concrete Inputs"
    expand = (lambda v: v * spatial if len(v) == 1 else v)
    stride, padding, dilation = expand(stride), expand(padding), expand(dilation)
    if spatial < 1 or len(w) != len(x) or not (len(stride) == len(padding) == len(dilation) == spatial):
        return f"its inputs {s.dims!r} are not a convolution's"
    out_sp = [(x[2 + d] + 2 * padding[d] - dilation[d] * (w[2 + d] - 1) - 1) // stride[d] + 1 for d in range(spatial)]
    if min(out_sp) < 1:
        return f"its inputs {s.dims!r} give no output"
    out = [x[0], w[0]] + out_sp
    flops = 2.0 * _numel(out) * (x[1] // groups) * _numel(w[2:])
    moved = (_numel(x) + _numel(w) + sum(_numel(t[0]) for t in ts[2:]) + _numel(out)) * es
    return Work("conv", flops, moved, dtype, _dims_text(s.dims))


def _elementwise(op: str, s: Shapes, kind: str) -> Work | str:
    ts = _tensors(s)
    if isinstance(ts, str):
        return ts
    dtype = ts[0][1] if ts else None
    if kind == "fill":
        if not ts:
            return "its output's shape is not among its inputs (a factory op)"
        return Work("fill", 0.0, _numel(ts[0][0]) * ts[0][2], ts[0][1], _dims_text(s.dims))
    if not ts:
        return "it has no tensor input"
    if kind == "copy":
        if op == "aten::copy_" and len(ts) >= 2:  # writes self, reads src: self is not read
            moved = _numel(ts[0][0]) * ts[0][2] + _numel(ts[1][0]) * ts[1][2]
        else:  # a new tensor of the input's shape (its dtype may change: counted at the input's)
            moved = 2 * _numel(ts[0][0]) * ts[0][2]
        return Work("copy", 0.0, moved, dtype, _dims_text(s.dims))
    out = _broadcast([t[0] for t in ts])
    if out is None:
        return f"its inputs {s.dims!r} do not broadcast together (not an elementwise op?)"
    n_out = _numel(out)
    reads = sum(_numel(t[0]) * t[2] for t in ts)
    return Work("elementwise", float(n_out), reads + n_out * ts[0][2], dtype, _dims_text(s.dims))


def _reduction(op: str, s: Shapes) -> Work | str:
    ts = _tensors(s)
    if isinstance(ts, str):
        return ts
    if not ts:
        return "it has no tensor input"
    x, dtype, es = ts[0]
    # a backward reduction's first input may be a 0-d gradient: the work follows its largest input
    n_in = max(_numel(t[0]) for t in ts)
    reads = sum(_numel(t[0]) * t[2] for t in ts)
    if _SAME_SHAPE_REDUCTIONS.search(op):
        out = n_in
    else:
        dims = _concrete(s, 1)
        if len(ts) == 1 and all(not (isinstance(d, list) and d) for d in (s.dims or [])[1:]) and dims is None \
                and len(s.dims or []) == 1:
            out = 1  # the whole tensor to one value (aten::sum(x))
        elif isinstance(dims, int):
            out = _numel(x) // max(1, x[dims] if -len(x) <= dims < len(x) else 1)
        elif isinstance(dims, list) and all(isinstance(d, int) and -len(x) <= d < len(x) for d in dims):
            out = _numel(x) // max(1, _numel([x[d] for d in set(d % len(x) for d in dims)])) if dims else 1
        else:
            out = 0  # unknown: left out, so the bytes are a lower bound
    return Work("reduction", float(n_in), reads + out * es, dtype, _dims_text(s.dims))


def _dims_text(dims: Any) -> str:
    return json.dumps(dims, separators=(",", ":"))


def size_op(op: str, s: Shapes, kernel_kind: str) -> Work | str:
    """One op call's work from its shapes, or why it cannot be sized (a phrase)."""
    if op in GEMM_OPS:
        return _gemm(op, s)
    if op in CONV_OPS:
        return _conv(op, s)
    if not op.startswith("aten::"):  # a library's own op (fbgemm::..., a custom autograd node): no rule knows it
        return f"no rule sizes {op}"
    if op in _FILLS or kernel_kind == kk.FILL:
        return _elementwise(op, s, "fill")
    if op in _COPIES or kernel_kind == kk.COPY:
        return _elementwise(op, s, "copy")
    if _REDUCTIONS.search(op) or kernel_kind == kk.REDUCTION:
        return _reduction(op, s)
    if kernel_kind == kk.ELEMENTWISE:
        return _elementwise(op, s, "elementwise")
    return f"no rule sizes {kernel_kind} kernels"
