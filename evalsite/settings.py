"""Django settings for Evalsite.

Embedded default: SQLite in WAL mode with IMMEDIATE transactions (measured on this kind of
machine: the default deferred mode lost 244 of 600 concurrent read-then-write transactions to
"database is locked"; IMMEDIATE lost none). ``DATABASE_URL`` switches to PostgreSQL.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.utils.csp import CSP

from apps.core.secret_key import data_folder_secret_key
from evalsite.channel_layers import redis_host
from evalsite.paths import agents_dir, data_dir, examples_dir

# A checkout's root, or site-packages when installed from the wheel: never written to.
BASE_DIR = Path(__file__).resolve().parent.parent
# Templates and static files ship inside the package, so an installed wheel renders its pages.
PACKAGE_DIR = Path(__file__).resolve().parent
# The data folder: $EVALSITE_DATA_DIR, else var/ of the project folder (the current directory;
# a checkout's root when run from there). See evalsite.paths.
DATA_DIR = data_dir()


def _flag(name: str, default: bool = False) -> bool:
    """An on/off environment variable (1/true/yes/on)."""
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value in ("1", "true", "yes", "on")


# No public default: a random key is made on first use and kept in the data folder (0600).
SECRET_KEY = os.environ.get("EVALSITE_SECRET_KEY") or data_folder_secret_key(DATA_DIR)
DEBUG = _flag("EVALSITE_DEBUG")
ALLOWED_HOSTS = [
    h for h in os.environ.get("EVALSITE_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("EVALSITE_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# The command this process runs (`evalsite eval` -> "eval"; set by evalsite.cli and manage.py,
# read once: a child process decides for itself). The command-line tools that never serve a
# page load no web stack: daphne's app only makes `runserver` serve ASGI (importing it loads
# Twisted, autobahn and cryptography: ~0.4 s), ninja's app only serves the API docs' templates,
# and the admin's autodiscovery imports every admin module. `serve` starts daphne itself.
COMMAND = os.environ.pop("EVALSITE_COMMAND", "")
LEAN_COMMANDS = frozenset({"eval", "import", "import_run", "targets", "trace", "rescore"})
_LEAN = COMMAND in LEAN_COMMANDS

INSTALLED_APPS = [
    *(["daphne"] if COMMAND == "runserver" else []),
    "django.contrib.admin.apps.SimpleAdminConfig" if _LEAN else "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    *([] if _LEAN else ["ninja"]),
    "channels",
    "django_tasks_db",
    "axes",
    "apps.core",
    "apps.traces",
    "apps.agents",
    "apps.evals",
    "apps.online",
]

MIDDLEWARE = [
    # first: sees every answer last, so nothing under /api/ leaves as plain text or HTML
    "evalsite.middleware.ApiJsonErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "evalsite.middleware.IdOutOfRangeMiddleware",
    "evalsite.middleware.UnstorableTextMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # last, as django-axes requires: answers a locked-out login with its lockout page
    "axes.middleware.AxesMiddleware",
]

# -- deployment behind TLS (see README "Deploying"); all off for a loopback install ----------
HTTPS = _flag("EVALSITE_HTTPS")
"""Served over HTTPS (directly or behind a TLS-terminating proxy): cookies only over TLS, HSTS."""
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = _flag("EVALSITE_SSL_REDIRECT", default=HTTPS)
SECURE_HSTS_SECONDS = int(os.environ.get("EVALSITE_HSTS_SECONDS") or (31_536_000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _flag("EVALSITE_HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = _flag("EVALSITE_HSTS_PRELOAD")
if _flag("EVALSITE_BEHIND_PROXY"):
    # only behind a proxy that sets (and strips from clients) X-Forwarded-Proto / -For
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    AXES_IPWARE_PROXY_COUNT = 1
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
SESSION_COOKIE_HTTPONLY = True
CSRF_FAILURE_VIEW = "evalsite.urls.csrf_failure"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (Django's own middleware): scripts only from our origin, never inline
# (pages carry no inline script or event handler). Inline style attributes stay allowed: the
# span-tree bars and chart legends are sized by them, and a style cannot run code.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one account from
# one address, that pair waits AXES_COOLOFF_TIME hours; a right password resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("EVALSITE_LOGIN_FAILURE_LIMIT") or 5)
AXES_COOLOFF_TIME = float(os.environ.get("EVALSITE_LOGIN_COOLOFF_HOURS") or 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# Password-reset pages exist only when mail can be sent (else they would try SMTP on localhost).
# EVALSITE_EMAIL_BACKEND: "smtp" or a backend's dotted path; the rest are the SMTP options.
_EMAIL_BACKEND = os.environ.get("EVALSITE_EMAIL_BACKEND", "").strip()
PASSWORD_RESET_ENABLED = bool(_EMAIL_BACKEND)
if _EMAIL_BACKEND:
    MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend" if _EMAIL_BACKEND == "smtp" else _EMAIL_BACKEND,
            "OPTIONS": {
                "host": os.environ.get("EVALSITE_EMAIL_HOST", "localhost"),
                "port": int(os.environ.get("EVALSITE_EMAIL_PORT") or 25),
                "username": os.environ.get("EVALSITE_EMAIL_USER", ""),
                "password": os.environ.get("EVALSITE_EMAIL_PASSWORD", ""),
                "use_tls": _flag("EVALSITE_EMAIL_TLS"),
            }
            if _EMAIL_BACKEND == "smtp"
            else {},
        }
    }
    DEFAULT_FROM_EMAIL = os.environ.get("EVALSITE_EMAIL_FROM", "evalsite@localhost")

ROOT_URLCONF = "evalsite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PACKAGE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = None
ASGI_APPLICATION = "evalsite.asgi.application"

SQLITE_PATH = Path(os.environ.get("EVALSITE_DB", DATA_DIR / "evalsite.sqlite3"))
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}

if os.environ.get("DATABASE_URL"):
    # No persistent connections: under ASGI each sync_to_async worker thread would keep its own
    # connection open past the request (Django's docs: "When using ASGI, persistent connections
    # should be disabled"). psycopg's pool is the way to reuse them (OPTIONS {"pool": True}, needs
    # the psycopg[pool] extra).
    import dj_database_url  # here: the embedded default never loads it

    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=0)}
else:
    # the embedded default must work on a fresh clone: its folder is created on first use
    try:
        SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # reported by SQLite itself, with the path, when it cannot open the file
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
            "OPTIONS": SQLITE_OPTIONS,
            "TEST": {"NAME": os.environ.get("EVALSITE_TEST_DB") or None},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# one date format across portal and admin, zone label included: evalsite/formats/en/formats.py
FORMAT_MODULE_PATH = ["evalsite.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [PACKAGE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

# Runs started from the browser go to the database-backed task queue (no extra service).
TASKS = {
    "default": {
        "BACKEND": os.environ.get("EVALSITE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

# In-memory channel layer by default; a worker or the CLI reaches browsers through the
# database tail (see apps.evals.views.live). With Redis configured, use the Redis layer.
if os.environ.get("EVALSITE_REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # a read timeout above the layer's 5 s blocking receive (evalsite/channel_layers.py)
            "CONFIG": {"hosts": [redis_host(os.environ["EVALSITE_REDIS_URL"])]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The example suites: the checkout's examples/, else the copy installed with the package.
EVALSITE_EXAMPLES_DIR = examples_dir()
# Where `evalsite serve` and runs started from the portal look for targets: $EVALSITE_AGENTS_DIR,
# else the project folder's agents/ when it has one, else the example agents.
EVALSITE_AGENTS_DIR = agents_dir()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # every record is redacted (URL userinfo, configured key values) before any handler writes it
    "filters": {
        "redact": {"()": "evalcore.redact.RedactingFilter"},
        "one_line": {"()": "evalsite.logs.OneLineFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact"]},
        "console_one_line": {"class": "logging.StreamHandler", "filters": ["redact", "one_line"]},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("EVALSITE_LOG_LEVEL", "WARNING")},
    # 401/403/404 answers are expected traffic, not warnings worth a console line each
    "loggers": {
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        # a bad Host header, an oversized body...: probes, not bugs: one line each, no traceback
        "django.security": {"handlers": ["console_one_line"], "level": "ERROR", "propagate": False},
    },
}

# Liveness of running eval runs (apps.evals.runs.liveness): the executing process refreshes the run's
# heartbeat every EVALSITE_HEARTBEAT_S seconds; a run whose heartbeat is older than
# EVALSITE_STALE_AFTER_S seconds is marked interrupted by the next sweep (apps.evals.worker.sweeper,
# every EVALSITE_SWEEP_S seconds in serve and in each worker: dead runs, lapsed shards, the search
# index; pages and the API never write) or CLI start.
EVALSITE_HEARTBEAT_S = float(os.environ.get("EVALSITE_HEARTBEAT_S", "2"))
# a new SQLite database is a copy of a migrated template kept here (apps.evals.cli.schema_template;
# "off": run every migration on each new file)
EVALSITE_SCHEMA_CACHE = os.environ.get("EVALSITE_SCHEMA_CACHE", "")
EVALSITE_STALE_AFTER_S = float(os.environ.get("EVALSITE_STALE_AFTER_S", "15"))
EVALSITE_SWEEP_S = float(os.environ.get("EVALSITE_SWEEP_S", "1"))

# Supervision (apps.evals.worker.supervisor, apps.evals.worker.heartbeats): a run that ends its task worker is
# queued again up to EVALSITE_AUTO_RESUME_MAX times (while each resume progresses); a worker whose
# serve is gone stops its run and, if a target will not stop, ends after EVALSITE_WORKER_FORCE_EXIT_S.
EVALSITE_AUTO_RESUME_MAX = int(os.environ.get("EVALSITE_AUTO_RESUME_MAX", "20"))
EVALSITE_WORKER_FORCE_EXIT_S = float(os.environ.get("EVALSITE_WORKER_FORCE_EXIT_S", "10"))
# Sharded runs (apps.evals.worker.shards, docs/scale.md). EVALSITE_QUEUE picks the queue the shards go
# through: "tasks" (default: Django's tasks framework, the database-backed `db_worker`) or "rq"
# (RQ on the Redis at EVALSITE_REDIS_URL; workers: `evalsite queue_worker`). Runs started from the
# portal or the API are sharded when EVALSITE_SHARDED_RUNS is on (default: on with "rq", off on
# the embedded default, whose runs stay one task each); `evalsite eval --executor queue` always
# shards. A shard holds EVALSITE_SHARD_SIZE cases; a worker keeps its shard's lease
# EVALSITE_SHARD_LEASE_S seconds ahead, and a shard whose lease lapsed is delivered again.
EVALSITE_QUEUE = os.environ.get("EVALSITE_QUEUE", "tasks").strip().lower() or "tasks"
EVALSITE_SHARDED_RUNS = _flag("EVALSITE_SHARDED_RUNS", default=EVALSITE_QUEUE == "rq")
EVALSITE_SHARD_SIZE = int(os.environ.get("EVALSITE_SHARD_SIZE") or 250)
EVALSITE_SHARD_LEASE_S = float(os.environ.get("EVALSITE_SHARD_LEASE_S") or 15)
EVALSITE_RQ_QUEUE = os.environ.get("EVALSITE_RQ_QUEUE", "evalsite")
# With RQ, a work-horse takes up to this many more fresh shards of the same run off the queue
# while its last cases run (its concurrency stays full across shards; no fork per shard).
EVALSITE_SHARD_CHAIN = int(os.environ.get("EVALSITE_SHARD_CHAIN") or 20)
# A cap on target calls in flight per model endpoint across every worker (evalcore.ratelimit):
# "MODEL=N,OTHER=M,*=K" (* for any other); unset: no cap beyond each run's concurrency.
EVALSITE_ENDPOINT_CONCURRENCY = os.environ.get("EVALSITE_ENDPOINT_CONCURRENCY", "")
# `evalsite eval` answers cases from the target response cache by default when on
# (apps.evals.runs.target_cache; --cache-target / --no-cache decide per run). Default: off.
EVALSITE_CACHE_TARGET = _flag("EVALSITE_CACHE_TARGET", default=False)

# OpenTelemetry (docs/otel.md). EVALSITE_OTLP_ENDPOINT: an OTLP/HTTP endpoint (base URL, or one
# ending in /v1/traces) every finished eval run's traces are sent to, in the background (a
# collector that is down costs a logged warning, never the run); EVALSITE_OTLP_HEADERS: its
# headers as OTEL_EXPORTER_OTLP_HEADERS writes them (k=v,k2=v2, values URL-encoded);
# EVALSITE_OTLP_TIMEOUT_S: the exporter's budget per request. EVALSITE_OTLP_MAX_BYTES: the
# largest request body /api/otlp/v1/traces takes (after inflating a gzip body too).
EVALSITE_OTLP_ENDPOINT = os.environ.get("EVALSITE_OTLP_ENDPOINT", "").strip()
EVALSITE_OTLP_HEADERS = os.environ.get("EVALSITE_OTLP_HEADERS", "")
EVALSITE_OTLP_TIMEOUT_S = float(os.environ.get("EVALSITE_OTLP_TIMEOUT_S") or 10)
EVALSITE_OTLP_MAX_BYTES = int(os.environ.get("EVALSITE_OTLP_MAX_BYTES") or 16 * 1024 * 1024)
# The portal's public address (e.g. https://evals.example.com): alert webhooks link to rules and traces under it
EVALSITE_SITE_URL = os.environ.get("EVALSITE_SITE_URL", "").strip().rstrip("/")
# The largest case-bank upload the admin takes (multipart under /admin/); any other request body
# is held to Django's DATA_UPLOAD_MAX_MEMORY_SIZE. Both, and the OTLP limit, are enforced as the
# body arrives, before it is held (apps.core.request_limits).
EVALSITE_UPLOAD_MAX_BYTES = int(os.environ.get("EVALSITE_UPLOAD_MAX_BYTES") or 64 * 1024 * 1024)
