"""The one place that knows what a secret in a database URL (or in free text) looks like.

A password reaches a URL in several forms, and every one of them must be hidden from messages,
logs, files and the store, and refused where a URL is written down for later (job spec files,
worker JSON, a recipe's ``runner.db_url``):

- the user part: ``postgresql://user:PW@host/db`` (percent-encoded or not);
- a libpq query parameter: ``?password=PW``, ``?sslpassword=PW``, a percent-encoded key
  (``?pass%77ord=PW``), a repeated key, or any key that names a secret (``token``, ``secret``,
  ``api_key``, ``access_key``, ``private_key``, ``credential``);
- a ``key=value`` inside another parameter's value or a libpq connection string
  (``?options=-c password=PW``, ``host=h password='P W'``), or a JSON/YAML ``"password": "PW"``.

``passfile`` / ``sslkey`` / ``sslcert`` name files, not secrets: they are the recommended way to
keep a password out of the URL, so they are shown and allowed.

:func:`secret_in` says where a URL carries a secret (None when it carries none);
:func:`redact_url` renders a URL with every secret replaced by ``***``; :func:`scrub` does the same
for any free text (a driver message that echoes its DSN, a URL that failed to parse).
"""

from __future__ import annotations

import itertools
import logging
import re
import urllib.parse

from sqlalchemy.engine import URL, make_url

MASK = "***"

# A key names a secret when one of its words (split at punctuation and camelCase, lower-cased,
# percent-decoded) ends with one of these ("sslpassword", "PGPASSWORD"), its last word ends with
# "token" ("x_auth_token"), or two adjacent words spell one ("api_key", "accessKey"). Whole words,
# so "max_tokens", "tokenizer", "token_avg" or the "tokens" compute axis are not secrets.
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "pwd", "secret", "credential", "credentials")
_TOKENIZER_WORDS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "end", "start", "think"}
_SECRET_PAIRS = {"apikey", "accesskey", "privatekey", "secretkey", "authkey", "sessionkey"}


def is_secret_key(key: str) -> bool:
    """True when a parameter / field name names a secret (see the module docstring)."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", urllib.parse.unquote(key))
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]
    # Two adjacent words count as one too: camelCase or punctuation can split a secret's name
    # ("PassWord", "Pass_Wd", "pgPassWord") as well as join two ("accessKey").
    joined = [a + b for a, b in itertools.pairwise(words)]
    if any(w.endswith(_SECRET_ENDINGS) or w in _SECRET_PAIRS for w in (*words, *joined)):
        return True
    if words and words[-1].endswith("token"):  # "auth_token"; not "token_avg" or "token_budget"
        # ... nor a tokenizer's marker ("pad_token", "eos_token"), which error messages name.
        return len(words) < 2 or words[-2] not in _TOKENIZER_WORDS
    return False


# ``scheme://user:PW@`` -> ``scheme://user:***@``. The password runs to the last ``@`` before
# whitespace: an unencoded ``@`` inside it must not leave its tail behind (hiding a little too much
# is the safe side).
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<pw>\S*)@")
# ``key=value`` / ``key: value`` / ``"key": "value"`` / ``key%3Dvalue``; the key may be quoted and
# percent-encoded. Only keys that name a secret have their value replaced (see :func:`scrub`).
_KEY = re.compile(
    r"(?<![\w%])(?P<q>[\"']?)(?P<key>(?:[\w.\-]|%[0-9A-Fa-f]{2})+)(?P=q)(?P<sep>\s*(?:=|:|%3[Dd])\s*)"
)
# A value: quoted (libpq/JSON/YAML), or running to the next separator of a URL query, a DSN or
# a JSON document.
_VALUE = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s&;,\"'<>(){}\[\]]+")


def scrub(text: str) -> str:
    """``text`` with every secret a URL, DSN, query string or key/value pair can carry replaced."""
    text = _USERINFO.sub(lambda m: m.group("head") + MASK + "@", text)
    out: list[str] = []
    pos = 0
    for m in _KEY.finditer(text):
        if m.start() < pos or not is_secret_key(m.group("key")):
            # A non-secret key's value is scanned as well: ``options=-c password=PW``.
            continue
        value = _VALUE.match(text, m.end())
        end = value.end() if value else m.end()
        quote = text[m.end()] if value and text[m.end()] in "\"'" else ""
        out.append(text[pos : m.end()] + quote + MASK + quote)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _as_url(url: str | URL) -> URL | None:
    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except Exception:  # anything unparsable (a bad port, a DSN string) is judged as free text
        return None


def secret_in(url: str | URL) -> str | None:
    """Where ``url`` carries a secret, in words (``"a password in the user part"``); None if nowhere."""
    parsed = _as_url(url)
    if parsed is None:
        text = str(url)
        return "a secret in its text" if scrub(text) != text else None
    if parsed.password:
        return "a password in the user part (user:PASSWORD@)"
    for key, value in parsed.query.items():
        if is_secret_key(key):
            return f"the query parameter {urllib.parse.unquote(key)!r}"
        values = value if isinstance(value, tuple) else (value,)
        if any(scrub(v) != v for v in values):
            return f"a secret inside the query parameter {key!r}"
    rest = parsed.set(query={}).render_as_string(hide_password=True)
    return "a secret in its text" if scrub(rest) != rest else None


def redact_url(url: str | URL) -> str:
    """The URL as text with every secret replaced by ``***`` (see the module docstring)."""
    parsed = _as_url(url)
    if parsed is None:
        return scrub(str(url))
    query: dict[str, str | tuple[str, ...]] = {}
    for key, value in parsed.query.items():
        if is_secret_key(key):
            query[key] = MASK
        elif isinstance(value, tuple):
            query[key] = tuple(scrub(v) for v in value)
        else:
            query[key] = scrub(value)
    shown = parsed.set(query=query).render_as_string(hide_password=True)
    # Percent-decoding leaves the mask readable (``%2A%2A%2A`` -> ``***``); scrub again for a
    # secret hidden in the host or database part.
    return scrub(shown.replace("%2A%2A%2A", MASK))


class ScrubFilter(logging.Filter):
    """Scrubs every record a handler emits: its message, its arguments and its traceback (a
    driver or Optuna error can carry the URL it was given, password and all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it itself when it formats the record
            return True
        record.msg = scrub(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


def scrub_logs(logger: logging.Logger | None = None) -> None:
    """Put a :class:`ScrubFilter` on every handler of ``logger`` (default: the root logger); call
    it after ``logging.basicConfig`` in each process's entry point."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubFilter) for f in handler.filters):
            handler.addFilter(ScrubFilter())
