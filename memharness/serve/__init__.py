"""`memharness serve`: the reference memory behind an HTTP API (docs/serve.md).

Needs the optional extra `serve` (FastAPI, uvicorn): `pip install 'memharness[serve]'`.
"""
