"""The default model's graph, rewritten so that its word-embedding table stays int8 in memory: same vectors, less RAM.

Place in the flow: under embed; ``onnx.default_model_dir`` writes ``model.lean.onnx`` next to ``model.onnx`` when it
assembles the model directory, and ``transformer.TransformerEmbedder`` runs the lean file.

Why. The shipped model is quantized weight by weight: every weight is an int8 initializer followed by
``Cast -> Mul(scale)``. ONNX Runtime's constant folding (any optimisation level above ``disable``) turns each of
them into a float32 constant when the session is made, so the 23 MB file costs about 91 MB of float32 weights. Most
of them feed a MatMul and are read whole on every run, which is what folding is for (without it a query embeds 3x
slower). The largest one does not: the word-embedding table (30,522 x 384, 47 MB as float32) only feeds a
``Gather`` of the query's few token rows. The rewrite gathers the int8 rows and their per-row scales first, then
casts and multiplies just those rows:

    Gather(Mul(Cast(Wq), s), ids)  ->  Mul(Cast(Gather(Wq, ids)), Gather(s, ids))

Each output element is the same ``float(q) * s`` product either way, so the vectors are bit-identical (tested) and
the model id does not change. Measured (``benchmarks/daemon.py``, docs/benchmarks.md): the session holds 33 MB less.

How. The file is ONNX protobuf; only ``ModelProto.graph.node`` is touched, by a few lines of wire-format code (no
``onnx`` dependency): every other field is copied byte for byte. If the graph is not the expected shape (another
weights package), ``lean_model`` raises ``ValueError`` and the caller keeps the original file.
"""

from __future__ import annotations

WORD_TABLE = "inner.embeddings.word_embeddings.weight"  # the folded table's name in the shipped graph

_GRAPH = 7  # ModelProto.graph
_NODE = 1  # GraphProto.node
_INPUT, _OUTPUT, _NAME, _OP_TYPE, _ATTRIBUTE = 1, 2, 3, 4, 5  # NodeProto fields
_ATTR_NAME, _ATTR_I, _ATTR_TYPE, _ATTR_INT = 1, 3, 20, 2  # AttributeProto fields and AttributeType.INT
_FLOAT = 1  # TensorProto.FLOAT, Cast's "to"


def lean_model(data: bytes, table: str = WORD_TABLE) -> bytes:
    """The model ``data`` with ``table``'s dequantisation moved after its Gather (see the module docstring)."""
    out = bytearray()
    graphs = 0
    for number, raw, value in _fields(data):
        if number == _GRAPH and value is not None:
            out += _field(_GRAPH, _lean_graph(value, table))
            graphs += 1
        else:
            out += raw
    if graphs != 1:
        raise ValueError(f"expected one graph, found {graphs}")
    return bytes(out)


def _lean_graph(graph: bytes, table: str) -> bytes:
    quantized, scale, folded = f"{table}_q", f"{table}_scale", f"{table}_f"
    out = bytearray()
    seen = {"cast": 0, "mul": 0, "gather": 0}
    for number, raw, value in _fields(graph):
        if number != _NODE or value is None:
            out += raw
            continue
        node = _node(value)
        if node["op_type"] == "Cast" and node["output"] == [folded] and node["input"] == [quantized]:
            seen["cast"] += 1
            continue
        if node["op_type"] == "Mul" and node["output"] == [table] and node["input"] == [folded, scale]:
            seen["mul"] += 1
            continue
        if table in node["input"]:
            if node["op_type"] != "Gather" or node["input"][0] != table or len(node["input"]) != 2:
                raise ValueError(f"{table} feeds a {node['op_type']}, not only a Gather")
            ids, (result,) = node["input"][1], node["output"]
            rows, rows_f, scales = f"{table}_rows_q", f"{table}_rows_f", f"{table}_rows_scale"
            out += _field(_NODE, _make_node("Gather", [quantized, ids], [rows], f"{table}_lean_gather", axis=0))
            out += _field(_NODE, _make_node("Cast", [rows], [rows_f], f"{table}_lean_cast", to=_FLOAT))
            out += _field(_NODE, _make_node("Gather", [scale, ids], [scales], f"{table}_lean_gather_scale", axis=0))
            out += _field(_NODE, _make_node("Mul", [rows_f, scales], [result], f"{table}_lean_mul"))
            seen["gather"] += 1
            continue
        out += raw
    if seen != {"cast": 1, "mul": 1, "gather": 1}:
        raise ValueError(f"unexpected graph around {table}: {seen}")
    return bytes(out)


def _node(data: bytes) -> dict:
    node: dict = {"input": [], "output": [], "op_type": ""}
    for number, _raw, value in _fields(data):
        if number == _INPUT:
            node["input"].append(value.decode())
        elif number == _OUTPUT:
            node["output"].append(value.decode())
        elif number == _OP_TYPE:
            node["op_type"] = value.decode()
    return node


def _make_node(op_type: str, inputs: list[str], outputs: list[str], name: str, **ints: int) -> bytes:
    out = bytearray()
    for text in inputs:
        out += _field(_INPUT, text.encode())
    for text in outputs:
        out += _field(_OUTPUT, text.encode())
    out += _field(_NAME, name.encode())
    out += _field(_OP_TYPE, op_type.encode())
    for key, number in ints.items():
        attribute = _field(_ATTR_NAME, key.encode()) + _varint_field(_ATTR_I, number) + \
            _varint_field(_ATTR_TYPE, _ATTR_INT)
        out += _field(_ATTRIBUTE, attribute)
    return bytes(out)


# -- protobuf wire format: just what the rewrite needs ----------------------------------------------------------


def _fields(data: bytes):
    """(field number, the field's raw bytes, its payload when length-delimited else None), in order."""
    pos, end = 0, len(data)
    while pos < end:
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value = None
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("truncated protobuf")
        yield number, data[start:pos], value


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated protobuf")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)
