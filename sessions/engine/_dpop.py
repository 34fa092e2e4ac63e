"""DPoP (RFC 9449): a per-session key, and a fresh proof for every request that carries a token."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from urllib.parse import urlsplit, urlunsplit

from joserfc import jwt
from joserfc.jwk import ECKey

__all__ = ["DpopKey"]


class DpopKey:
    """An ES256 key pair made for one session; its proofs name the request they travel with."""

    algorithm = "ES256"

    def __init__(self) -> None:
        self._key = ECKey.generate_key("P-256")
        self.nonces: dict[str, str] = {}
        """The last nonce each server gave (by origin), sent back in the next proof."""

    @property
    def thumbprint(self) -> str:
        return str(self._key.thumbprint())

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A proof for one request: ``htm``, ``htu`` (no query or fragment), ``iat``, a fresh
        ``jti``, the server's nonce if it gave one, and ``ath`` when a token goes with it."""
        parts = urlsplit(url)
        htu = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        claims: dict[str, object] = {
            "htm": method,
            "htu": htu,
            "iat": int(time.time()),
            "jti": secrets.token_urlsafe(16),
        }
        nonce = self.nonces.get(_origin(url))
        if nonce:
            claims["nonce"] = nonce
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode("ascii", "replace")).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        header = {"typ": "dpop+jwt", "alg": self.algorithm, "jwk": self._key.as_dict(private=False)}
        return jwt.encode(header, claims, self._key, algorithms=[self.algorithm])

    def take_nonce(self, url: str, nonce: str | None) -> bool:
        """Keep a server's new nonce; say whether it differs from the one we had."""
        if not nonce:
            return False
        origin = _origin(url)
        changed = self.nonces.get(origin) != nonce
        self.nonces[origin] = nonce
        return changed


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
