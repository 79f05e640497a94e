"""Rule 1 of issue 26: no secret reaches a file, a log or a message, whatever form the URL takes.

Every form a password (or token) can take in a store URL is tried on every surface: the URL as
printed, store errors, the ``--db`` refusal of sweeps and searches (and the files they would have
written), the job spec and search worker JSON, a replay recipe's ``runner.db_url`` (stored with
the run's config, printed by ``scalerl config``), and log lines."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from scalerl import db
from scalerl.db.engine import redact
from scalerl.db.redaction import is_secret_key, scrub, scrub_logs, secret_in
from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError, StoreError
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.execution.sweep import job_db_url
from scalerl.harness.recipe import load_recipe
from scalerl.harness.search.worker import WorkerSpec
from tests.unit.execution.helpers import REPO

SECRET = "hunter2-secret"
HOST = "127.0.0.1:1"  # nothing listens on port 1: a connection is refused at once

# Every form a secret can take in a URL: the user part (percent-encoded or with a raw "@"), a
# libpq query parameter (password, sslpassword, a percent-encoded key, a repeated key, another
# case), a password inside another parameter's value, and token-like keys.
SECRET_URLS = [
    f"postgresql+psycopg://lab:{SECRET}@{HOST}/runs",
    f"postgresql://lab:p%40{SECRET}@{HOST}/runs",
    f"postgresql://lab@{HOST}/runs?password={SECRET}",
    f"postgresql://lab@{HOST}/runs?sslmode=require&sslpassword={SECRET}",
    f"postgresql://lab@{HOST}/runs?pass%77ord={SECRET}",
    f"postgresql://lab@{HOST}/runs?password=decoy&password={SECRET}",
    f"postgresql://lab@{HOST}/runs?PASSWORD={SECRET}",
    f"postgresql://lab@{HOST}/runs?options=-c%20password%3D{SECRET}",
    f"postgres://lab@{HOST}/runs?application_name=x&auth_token={SECRET}",
    f"postgresql://lab@{HOST}/runs?api_key={SECRET}",
    # A key that camelCase or punctuation splits into words ("Pass Word"): still a password.
    f"postgresql://lab@{HOST}/runs?PassWord={SECRET}",
    f"postgresql://lab@{HOST}/runs?sslmode=require&pg_Pass_Wd={SECRET}",
]


@pytest.fixture(autouse=True)
def _no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALERL_DB_URL", raising=False)


@pytest.mark.parametrize("url", SECRET_URLS)
def test_every_form_is_recognised_and_redacted(url: str) -> None:
    assert secret_in(url) is not None
    shown = redact(url)
    assert SECRET not in shown and "***" in shown
    assert SECRET not in scrub(f"could not connect to {url} (retrying)")


@pytest.mark.parametrize(
    "text",
    [
        f"host=db port=5432 password='{SECRET} with spaces' dbname=runs",
        f'{{"db": "x", "password": "{SECRET}"}}',
        f"sslpassword={SECRET} user=lab",
        f"PGPASSWORD={SECRET}",
        f"password: {SECRET}",
    ],
)
def test_free_text_forms_are_scrubbed(text: str) -> None:
    assert SECRET not in scrub(text)


def test_files_and_ordinary_words_are_not_secrets() -> None:
    url = f"postgresql+psycopg://lab@{HOST}/runs?passfile=/home/lab/.pgpass&sslmode=require&sslkey=/k"
    assert secret_in(url) is None
    assert job_db_url(url) == url  # the recommended way to keep a password out of the URL
    for key in ("passfile", "sslkey", "max_tokens", "token_avg", "tokenizer", "tokens", "user"):
        assert not is_secret_key(key), key
    text = "knobs.loss_agg.choice=token_avg max_tokens=512 --axis tokens"
    assert scrub(text) == text


@pytest.mark.parametrize("url", SECRET_URLS)
def test_store_errors_never_print_the_secret(url: str) -> None:
    with pytest.raises(StoreError) as info:
        db.open_store(url)
    text = str(info.value)
    assert SECRET not in text and text.startswith("store postgresql+psycopg://lab") and "***" in text


@pytest.mark.parametrize("url", SECRET_URLS)
def test_db_flag_refuses_every_form(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        job_db_url(url)
    text = str(info.value)
    assert SECRET not in text and "carries a secret" in text and "SCALERL_DB_URL" in text


def test_the_same_url_in_the_environment_reaches_jobs_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql://lab@{HOST}/runs?password={SECRET}"
    monkeypatch.setenv("SCALERL_DB_URL", url)
    assert job_db_url(url) is None


@pytest.mark.parametrize("url", SECRET_URLS)
def test_spec_files_and_worker_json_refuse_a_secret(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        WorkerSpec(sweep_file="s.yaml", overrides=(), db_url=url, state_dir="st")
    assert SECRET not in str(info.value) and "worker's JSON" in str(info.value)
    with pytest.raises(ConfigError) as info:
        RunSpec("s", "v", None, None, 0, "r", {}, "w", db_url=url)
    assert SECRET not in str(info.value) and "spec file" in str(info.value)


@pytest.mark.parametrize("sweep_file", ["tiny-loo.yaml", "tiny-search.yaml"])
@pytest.mark.parametrize("url", SECRET_URLS[1:4])
def test_sweep_and_search_refuse_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep_file: str, url: str
) -> None:
    state = tmp_path / "state"
    code = main(["sweep", str(REPO / "recipes" / sweep_file), "--db", url, "--executor", "local",
                 "--state-dir", str(state)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert SECRET not in err and "carries a secret" in err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not any(SECRET in p.read_text(errors="replace") for p in written)
    assert not state.exists()


@pytest.mark.parametrize("url", SECRET_URLS)
def test_replay_db_url_is_refused_by_the_recipe_and_by_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nrunner: {{type: replay, run_id: a, db_url: '{url}'}}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    assert SECRET not in str(info.value) and "holds a password" in str(info.value)
    assert main(["config", str(path)]) == ConfigError.exit_code
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err and "db_url" in out.err


def test_log_lines_and_tracebacks_are_scrubbed() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("scalerl.test.secrets")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        scrub_logs(logger)
        logger.warning("retrying %s", SECRET_URLS[2])
        try:
            raise RuntimeError(f"cannot open {SECRET_URLS[3]}")
        except RuntimeError:
            logger.exception("worker failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "retrying" in text and "RuntimeError" in text and "***" in text
    assert SECRET not in text


@pytest.mark.postgres
def test_a_query_password_on_real_postgres_is_used_but_never_shown(pg_url: str) -> None:
    """libpq takes ``?password=``: the store connects with it, and neither its URL, its errors nor
    the events it records show it."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    if not url.password:
        pytest.skip("the external PostgreSQL URL has no password")
    password = url.password
    as_query = url.set(password=None).update_query_dict({"password": password})
    text = as_query.render_as_string(hide_password=False)
    assert password in text  # the form under test really carries it
    st = db.open_store(text)
    try:
        assert password not in st.url and "password=***" in st.url
        st.log_event(None, "status", {"url": text, "password": password}, sweep=None)
        assert password not in repr(db.events(st).to_dict("records"))
    finally:
        st.close()
    wrong = as_query.set(database="no_such_db_x").render_as_string(hide_password=False)
    with pytest.raises(StoreError) as info:
        db.open_store(wrong, create=False)
    assert password not in str(info.value)
