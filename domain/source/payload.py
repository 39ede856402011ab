"""A Temporal payload kept whole: its metadata and its data, each as bytes in base64 (so the
documents stay JSON). Any encoding survives a handoff unchanged (``json/plain`` as the server
received it, byte for byte, ``binary/protobuf``, a codec's encrypted bytes...): the source
never decodes what it carries, it hands the same bytes to every start.

``json_payload`` is what Temporal's default data converter makes of a JSON value
(``json/plain``, compact, sorted keys; ``None`` is ``binary/null``), for actions given as JSON.
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Mapping

from pydantic import field_validator

from schedfence.domain.model import Immutable

ENCODING = "encoding"
JSON_PLAIN = b"json/plain"
BINARY_NULL = b"binary/null"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


class Payload(Immutable):
    """``metadata``: name -> base64 of its value; ``data``: base64."""

    metadata: dict[str, str] = {}
    data: str = ""

    @field_validator("data")
    @classmethod
    def _data_is_base64(cls, text: str) -> str:
        _check_b64("data", text)
        return text

    @field_validator("metadata")
    @classmethod
    def _metadata_is_base64(cls, doc: dict[str, str]) -> dict[str, str]:
        for name, text in doc.items():
            _check_b64(f"metadata[{name!r}]", text)
        return doc

    @classmethod
    def of(cls, metadata: Mapping[str, bytes], data: bytes) -> Payload:
        return cls(metadata={k: _b64(v) for k, v in metadata.items()}, data=_b64(data))

    def metadata_bytes(self) -> dict[str, bytes]:
        return {k: _unb64(v) for k, v in self.metadata.items()}

    def data_bytes(self) -> bytes:
        return _unb64(self.data)

    def size(self) -> int:
        return len(self.data_bytes()) + sum(len(k) + len(v)
                                            for k, v in self.metadata_bytes().items())


def _check_b64(where: str, text: str) -> None:
    try:
        _unb64(text)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ValueError(f"{where}: must be base64") from None


def json_payload(value: Any) -> Payload:
    """``value`` as Temporal's default converter encodes it (``ValueError``/``TypeError`` if it
    is not JSON)."""
    if value is None:
        return Payload.of({ENCODING: BINARY_NULL}, b"")
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return Payload.of({ENCODING: JSON_PLAIN}, text.encode())



def shown(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A payload's document as a person reads it: the JSON value of a ``json/plain`` payload
    (``null`` for ``binary/null``), else its encoding and size; the stored bytes are unchanged."""
    payload = Payload.model_validate(doc)
    encoding = payload.metadata_bytes().get(ENCODING, b"")
    if encoding == JSON_PLAIN:
        try:
            return {"encoding": "json/plain", "value": json.loads(payload.data_bytes())}
        except ValueError:  # not JSON after all: shown by its size, as any other
            pass
    if encoding == BINARY_NULL:
        return {"encoding": "binary/null", "value": None}
    return {"encoding": encoding.decode("utf-8", "replace") or None,
            "bytes": len(payload.data_bytes())}
