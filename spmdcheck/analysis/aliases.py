"""What a read of a container built in the same expression denotes: the variable it reads back.

`{"x": x}["x"]`, `dict(x=x)["x"]`, `dict(zip(["x"], [x]))["x"]`, `[t for t in [x]][0]`, `(x, y)[1]`,
`{k: t for k, t in [("x", x)]}["x"]` and `{"x": x}.get("x")` are the tensor `x` itself, as Python hands
out the object a container holds, not a copy. An in-place write to such a read (`d["x"].add_(y)`,
`dist.all_reduce(d["x"])`, `d["x"][:, i] = y`, `assert_type(d["x"], ...)`) changes `x`: the engine
writes the variable the read denotes (interp/engine.py `_write`). Read from the syntax alone: only
containers written out in the expression, with constant keys, are followed.
"""

from __future__ import annotations

import libcst as cst

_MAX_DEPTH = 8  # nested reads followed (`{"a": {"b": x}["b"]}["a"]`)


def written_through(node: cst.CSTNode, depth: int = 0) -> cst.Name | cst.Attribute | None:
    """The name or attribute chain whose object the expression `node` reads back from a container literal
    (None: not such a read)."""
    if depth > _MAX_DEPTH:
        return None
    found: cst.BaseExpression | None = None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        key = _constant(node.slice[0].slice.value)
        if key is not _NOT_CONSTANT:
            found = _entry(node.value, key)
    elif (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "get"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        key = _constant(node.args[0].value)
        if key is not _NOT_CONSTANT and not isinstance(node.func.value, (cst.List, cst.Tuple, cst.ListComp)):
            found = _entry(node.func.value, key)
    if found is None:
        return None
    if isinstance(found, (cst.Name, cst.Attribute)):
        return found
    return written_through(found, depth + 1)


_NOT_CONSTANT = object()


def _constant(node: cst.BaseExpression) -> object:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return _NOT_CONSTANT
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _constant(node.expression)
        return -inner if isinstance(inner, int) else _NOT_CONSTANT
    return _NOT_CONSTANT


def _entry(container: cst.BaseExpression, key: object) -> cst.BaseExpression | None:
    """The expression a container literal holds under the constant `key` (an index for a list or tuple)."""
    if isinstance(container, cst.Dict):
        return _lookup(_dict_pairs(container), key)
    if isinstance(container, (cst.List, cst.Tuple)):
        items = _items(container)
        return _index(items, key)
    if isinstance(container, cst.Call) and isinstance(container.func, cst.Name) and container.func.value == "dict":
        return _lookup(_dict_call_pairs(container), key)
    if isinstance(container, cst.ListComp) and _plain_loop(container) and isinstance(container.elt, cst.Name):
        loop = container.for_in
        if isinstance(loop.target, cst.Name) and loop.target.value == container.elt.value:
            return _index(_items(loop.iter), key)
    if isinstance(container, cst.DictComp) and _plain_loop(container):
        return _lookup(_comprehension_pairs(container), key)
    return None


def _items(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    if any(not isinstance(e, cst.Element) for e in node.elements):
        return None  # a starred element: positions unknown
    return [e.value for e in node.elements]


def _index(items: list[cst.BaseExpression] | None, key: object) -> cst.BaseExpression | None:
    if items is None or type(key) is not int or not -len(items) <= key < len(items):  # type: ignore[operator]
        return None
    return items[key]  # type: ignore[index]


def _lookup(pairs: list[tuple[object, cst.BaseExpression]] | None, key: object) -> cst.BaseExpression | None:
    if pairs is None:
        return None
    found = None
    for k, value in pairs:
        if k is _NOT_CONSTANT:
            return None  # an entry whose key is unknown may be the one asked for
        if k == key:
            found = value  # a later entry under the same key replaces the earlier one
    return found


def _dict_pairs(node: cst.Dict) -> list[tuple[object, cst.BaseExpression]] | None:
    pairs = []
    for element in node.elements:
        if not isinstance(element, cst.DictElement):
            return None  # `**other`
        pairs.append((_constant(element.key), element.value))
    return pairs


def _dict_call_pairs(node: cst.Call) -> list[tuple[object, cst.BaseExpression]] | None:
    pairs: list[tuple[object, cst.BaseExpression]] = []
    for i, arg in enumerate(node.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            pairs.append((arg.keyword.value, arg.value))
        elif i == 0:
            zipped = _zipped_pairs(arg.value)
            if zipped is None:
                return None
            pairs.extend(zipped)
        else:
            return None
    return pairs


def _zipped_pairs(node: cst.BaseExpression) -> list[tuple[object, cst.BaseExpression]] | None:
    """`zip(keys, values)` of two literal sequences, or a literal sequence of `(key, value)` pairs."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "zip":
        if len(node.args) != 2 or any(a.star or a.keyword is not None for a in node.args):
            return None
        keys, values = _items(node.args[0].value), _items(node.args[1].value)
        if keys is None or values is None:
            return None
        return [(_constant(k), v) for k, v in zip(keys, values)]
    items = _items(node)
    if items is None:
        return None
    pairs = []
    for item in items:
        pair = _items(item)
        if pair is None or len(pair) != 2:
            return None
        pairs.append((_constant(pair[0]), pair[1]))
    return pairs


def _comprehension_pairs(node: cst.DictComp) -> list[tuple[object, cst.BaseExpression]] | None:
    """`{k: v for k, v in pairs}` with `k`, `v` the loop's two names, over literal pairs."""
    target = node.for_in.target
    names = _items(target) if isinstance(target, cst.Tuple) else None
    if names is None or len(names) != 2 or not all(isinstance(n, cst.Name) for n in names):
        return None
    key_name, value_name = (n.value for n in names)  # type: ignore[attr-defined]
    if not (isinstance(node.key, cst.Name) and node.key.value == key_name):
        return None
    if not (isinstance(node.value, cst.Name) and node.value.value == value_name):
        return None
    return _zipped_pairs(node.for_in.iter)


def _plain_loop(node: cst.ListComp | cst.DictComp) -> bool:
    """One `for` clause, no condition, not async."""
    loop = node.for_in
    return loop.inner_for_in is None and not loop.ifs and loop.asynchronous is None
