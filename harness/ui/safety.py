"""What keeps the live view safe by default: where it may listen, who may read it, and what it
never shows.

- **Bind**: a loopback address (``127.0.0.1``, ``::1``, ``localhost``) needs nothing more; any
  other host exposes the store to a network, so it needs a token: ``$SCALERL_UI_TOKEN`` (at least
  :data:`MIN_TOKEN` characters) or ``--new-token`` (one is generated and printed once). Without
  either, :func:`check_bind` refuses to start, saying so.
- **Token**: with one, every request must carry it: ``Authorization: Bearer TOKEN``, or
  ``?token=TOKEN`` on a page's address, which sets an HttpOnly, SameSite=Strict cookie and
  redirects to the address without it (so it leaves the address bar and the history). Compared in
  constant time.
- **Secrets**: the store's URL is shown redacted (:func:`scalerl.db.redaction.redact_url`);
  a run's config, provenance and error text go through :func:`redact_config` /
  :func:`scalerl.db.redaction.scrub` (a key that names a secret loses its value; a URL in a value
  loses its password).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalerl.db.redaction import MASK, is_secret_key, scrub
from scalerl.harness.errors import ConfigError

TOKEN_ENV = "SCALERL_UI_TOKEN"
MIN_TOKEN = 16
COOKIE = "scalerl_ui_token"
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_local(host: str) -> bool:
    """True when ``host`` is a loopback address or name (only this machine can connect)."""
    name = host.strip().strip("[]").lower()
    if name in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """How the server lets readers in: ``token`` None for a loopback bind without one."""

    host: str
    token: str | None
    generated: bool = False


def check_bind(host: str, *, new_token: bool = False, env: Mapping[str, str] | None = None) -> Access:
    """The access rule for listening on ``host`` (see the module docstring). Raises ConfigError
    for a non-loopback host without a token, or a token too short to guess at."""
    environ = os.environ if env is None else env
    given = environ.get(TOKEN_ENV)
    if given is not None and len(given) < MIN_TOKEN:
        raise ConfigError(
            f"${TOKEN_ENV} is {len(given)} characters: too short to keep a store private",
            field=TOKEN_ENV,
            fix=f"use at least {MIN_TOKEN} random characters, e.g. "
            "export SCALERL_UI_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')",
        )
    if given:
        return Access(host, given)
    if new_token:
        return Access(host, secrets.token_urlsafe(24), generated=True)
    if is_local(host):
        return Access(host, None)
    raise ConfigError(
        "listening beyond this machine shows the store to anyone who can reach it, so it needs a token",
        field="--host",
        value=host,
        fix=f"export {TOKEN_ENV}=<a random string of {MIN_TOKEN}+ characters>, or pass --new-token to "
        "have one generated and printed once; or keep the default --host 127.0.0.1 and reach it "
        "through an SSH tunnel (ssh -L 8765:127.0.0.1:8765 HOST)",
    )


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


def redact_config(value: Any) -> Any:
    """A config (or provenance) with every secret hidden: the value of a key that names a
    secret becomes ``***``; text is scrubbed of URL passwords and ``key=value`` secrets."""
    if isinstance(value, Mapping):
        return {str(k): MASK if is_secret_key(str(k)) else redact_config(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_config(v) for v in value]
    if isinstance(value, str):
        return scrub(value)
    return value
