"""docs/http-api.md from the service's OpenAPI schema: the HTTP API reference.

`python -m memharness.serve.api_doc > docs/http-api.md` writes it; a test checks that the
file is what the schema gives (`tests/test_docs_run.py`). Per route: the method and
path, the request body's fields and the answer's, each with its type, whether it is
required and its description; then the error answers every route can give.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

__all__ = ["render", "schema"]

HEADER = """# HTTP API reference

Generated from the OpenAPI schema of `memharness serve` by `python -m
memharness.serve.api_doc > docs/http-api.md` (a test fails when this file and the schema
differ). Every route takes `Authorization: Bearer <key>` and, with a body,
`Content-Type: application/json`; the running service serves the same schema at
`/openapi.json` and `/docs`. How to run it, keys, errors and limits: [serve.md](serve.md).
"""


def schema() -> dict[str, Any]:
    """The OpenAPI schema of the app `memharness serve` builds (in-memory stores, the
    hashing embedder: the schema does not depend on them)."""
    from memharness.serve.app import create_app
    from memharness.serve.auth import KeyStore
    from reference.factory import build_memory_system
    from reference.settings import Settings

    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(backend="memory", embedder="hashing", data_dir=Path(scratch))
        system = build_memory_system(settings)
        return create_app(system, KeyStore(Path(scratch) / "keys.json")).openapi()


def _type(spec: dict[str, Any], schemas: dict[str, Any]) -> str:
    if "$ref" in spec:
        return f"`{spec['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in spec:
        kinds = [_type(s, schemas) for s in spec["anyOf"]]
        return " or ".join(k for k in kinds if k != "null") + (
            " or null" if "null" in kinds else ""
        )
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items') or {}, schemas)}"
    if kind == "object" and "additionalProperties" in spec:
        inner = spec["additionalProperties"]
        return f"map of {_type(inner, schemas) if isinstance(inner, dict) else 'any'}"
    return str(kind)


def _fields(name: str, schemas: dict[str, Any]) -> list[str]:
    model = schemas[name]
    required = set(model.get("required") or [])
    lines = [f"`{name}`:", "", "| field | type | required | description |", "|---|---|---|---|"]
    for field, spec in (model.get("properties") or {}).items():
        text = str(spec.get("description") or "").replace("|", "\\|").replace("\n", " ")
        default = spec.get("default")
        if field not in required and default is not None:
            text = (text + f" (default {default!r})").strip()
        lines.append(
            f"| `{field}` | {_type(spec, schemas)} | {'yes' if field in required else 'no'} "
            f"| {text} |"
        )
    return [*lines, ""]


def _ref(content: dict[str, Any] | None) -> str | None:
    body = ((content or {}).get("application/json") or {}).get("schema") or {}
    ref = body.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def render(openapi: dict[str, Any]) -> str:
    """The Markdown reference of `openapi`."""
    schemas = openapi["components"]["schemas"]
    out = [HEADER]
    shown: set[str] = set()
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            out += [f"## `{method.upper()} {path}`", ""]
            params = [p for p in op.get("parameters") or [] if p.get("in") == "path"]
            for p in params:
                out.append(
                    f"Path parameter `{p['name']}`: {_type(p.get('schema') or {}, schemas)}."
                )
            if params:
                out.append("")
            request = _ref((op.get("requestBody") or {}).get("content"))
            answer = _ref(((op.get("responses") or {}).get("200") or {}).get("content"))
            for role, name in (("Request body", request), ("Answer (200)", answer)):
                if name is None:
                    continue
                out += [f"{role}: `{name}`.", ""]
            for name in (request, answer):
                if name is not None and name not in shown:
                    shown.add(name)
                    out += _fields(name, schemas)
    nested = sorted(set(schemas) - shown)
    if nested:
        out += ["## Nested and error models", ""]
        for name in nested:
            out += _fields(name, schemas)
    codes = sorted(
        {c for m in openapi["paths"].values() for op in m.values() for c in op.get("responses", {})}
        - {"200"}
    )
    out += [f"Error answers (`ErrorResponse`): HTTP {', '.join(codes)}.", ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(render(schema()), end="")
