"""The judgements of the agent dev set, written by reading vault/packs/starter.jsonl.

    python eval/agentset/judgements.py   # rewrites eval/agentset/queries.jsonl and qrels.tsv

See eval/agentset/README.md for how the set was built; do not edit grades after
looking at a ranking.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: `import eval.*`

from eval.judged_queries import JudgedQueries, pack_ids  # noqa: E402

SET = JudgedQueries({"question": "q", "keyword": "k", "paraphrase": "p", "symptom": "s", "filter": "f"})
q = SET.q

# ---- question: asked mid-task, full sentences -------------------------------------------
q("question", "what's the safe way to re-send a charge request to a payment provider after the first attempt timed out?",
  {"api-idempotency-keys": 2, "rel-retry-backoff-jitter": 2, "rel-timeouts-on-every-call": 1, "rel-idempotent-consumers": 1, "rel-retry-amplification": 1})
q("question", "how do I add an index to a big postgres table in production without blocking writes?",
  {"db-create-index-concurrently": 2, "db-migration-lock-timeout": 1, "db-expand-contract-migrations": 1})
q("question", "what should a kubernetes liveness probe check, and should it ping the database?",
  {"rel-liveness-vs-readiness": 2, "rel-graceful-shutdown": 1})
q("question", "how do I undo a commit that has already been pushed to the shared main branch?",
  {"git-revert-vs-reset": 2, "git-no-rebase-shared-branches": 1, "git-force-with-lease": 1, "git-reflog-recovery": 1})
q("question", "where should the web app keep the login session token so injected scripts cannot read it?",
  {"fe-tokens-in-httponly-cookies": 2, "sec-session-cookie-flags": 2, "fe-no-raw-html-injection": 1, "fe-content-security-policy": 1})
q("question", "how many connections should each app instance's database pool have now that we run twenty replicas?",
  {"db-pool-sizing": 2, "db-pgbouncer-transaction-mode": 1})
q("question", "what do I do first now that an API key was pushed to a public GitHub repository?",
  {"sec-leaked-secret-response": 2, "git-purge-file-from-history": 1, "sec-secrets-out-of-source": 1})
q("question", "how should I paginate a list endpoint over a table with millions of rows?",
  {"db-keyset-pagination": 2, "api-cursor-pagination": 2, "perf-index-for-query-shape": 1})
q("question", "how do I make sure the nightly cron job never runs twice at the same time?",
  {"rel-scheduled-job-overlap": 2, "conc-lease-fencing-tokens": 1, "db-skip-locked-job-queue": 1})
q("question", "which algorithm should I use to store user passwords?",
  {"sec-password-hashing": 2, "sec-auth-rate-limits": 1})
q("question", "should we split our application into microservices now or later?",
  {"arch-modular-monolith-first": 2, "arch-service-per-team": 2, "arch-distributed-monolith": 1, "arch-speculative-generality": 1, "arch-boring-technology": 1})
q("question", "how can I find which commit broke the build somewhere between the last two releases?",
  {"git-bisect-regression": 2, "test-regression-test-first": 1})
q("question", "how can the agent avoid filling its context window with the whole knowledge base?",
  {"agent-scan-then-load": 2, "agent-context-dumping": 2})
q("question", "when should an alert page the on-call engineer instead of only appearing on a dashboard?",
  {"obs-alert-on-symptoms": 2, "obs-burn-rate-alerts": 2, "obs-log-levels": 1, "rel-slo-error-budgets": 1})

# ---- keyword: a few terms ---------------------------------------------------------------
q("keyword", "idempotency key", {"api-idempotency-keys": 2, "rel-idempotent-consumers": 1, "rel-retry-backoff-jitter": 1})
q("keyword", "SKIP LOCKED", {"db-skip-locked-job-queue": 2})
q("keyword", "jwt", {"sec-jwt-pin-algorithms": 2, "sec-jwt-key-rotation": 2})
q("keyword", "circuit breaker", {"rel-circuit-breaker": 2, "rel-dependency-degradation": 1, "rel-bulkheads": 1})
q("keyword", "pgbouncer", {"db-pgbouncer-transaction-mode": 2, "db-pool-sizing": 1})
q("keyword", "useEffect dependencies", {"fe-effect-dependencies": 2})
q("keyword", "regex denial of service", {"sec-redos-regex": 2})
q("keyword", "force push", {"git-force-with-lease": 2, "git-no-rebase-shared-branches": 1})
q("keyword", "tail sampling traces", {"obs-trace-tail-sampling": 2, "obs-request-correlation-ids": 1})
q("keyword", "argon2", {"sec-password-hashing": 2})
q("keyword", "asyncio TaskGroup", {"conc-structured-concurrency": 2, "conc-keep-task-references": 1, "conc-reraise-cancellation": 1})
q("keyword", "docker layer cache", {"ci-docker-layer-caching": 2, "ci-fast-feedback-order": 1})
q("keyword", "prometheus labels", {"obs-high-cardinality-labels": 2, "obs-metric-naming": 1, "obs-histograms-for-latency": 1})

# ---- paraphrase: the idea of an entry without its words ---------------------------------
q("paraphrase", "make repeated form submissions of a purchase harmless",
  {"api-idempotency-keys": 2, "rel-idempotent-consumers": 1, "db-unique-constraints-not-checks": 1})
q("paraphrase", "many callers rebuild the same expired cached value at once",
  {"perf-cache-stampede": 2, "perf-cache-ttl-always": 1})
q("paraphrase", "keep third-party workflow steps from silently changing under us",
  {"ci-pin-actions-to-sha": 2, "ci-install-from-lockfile": 1, "ci-no-latest-tag": 1})
q("paraphrase", "turn away excess traffic instead of letting work pile up",
  {"rel-load-shedding": 2, "conc-bounded-queues-backpressure": 2, "api-429-retry-after": 1})
q("paraphrase", "always take mutexes in the same sequence",
  {"conc-lock-ordering": 2})
q("paraphrase", "ship code dark and switch it on for users later",
  {"rel-feature-flags-decouple-release": 2, "ci-build-once-promote": 1})
q("paraphrase", "replace the old system piece by piece behind a proxy",
  {"arch-strangler-fig": 2, "arch-big-bang-rewrite": 1})
q("paraphrase", "do not rely on checks done in the browser form",
  {"fe-server-side-validation": 2})
q("paraphrase", "write a row and emit a message without losing one of the two",
  {"rel-transactional-outbox": 2, "rel-idempotent-consumers": 1, "db-no-network-calls-in-transactions": 1})
q("paraphrase", "keep each commit small and about a single thing",
  {"git-atomic-commits": 2, "git-stage-explicit-paths": 1})
q("paraphrase", "test doubles that complain when called with the wrong signature",
  {"test-mock-with-autospec": 2, "test-fakes-for-external-services": 1})
q("paraphrase", "stop the backend from downloading arbitrary addresses a user hands it",
  {"sec-ssrf-user-urls": 2})
q("paraphrase", "never wait forever on a remote service",
  {"rel-timeouts-on-every-call": 2, "db-statement-timeouts": 1, "rel-circuit-breaker": 1})

# ---- symptom: an error message or what the agent observes -------------------------------
q("symptom", "fatal: Unable to create '/repo/.git/index.lock': File exists.", {"git-index-lock": 2})
q("symptom", "sqlite3.OperationalError: database is locked", {"db-sqlite-connection-pragmas": 2})
q("symptom", "background task disappears before finishing, no error logged, after asyncio.create_task",
  {"conc-keep-task-references": 2, "conc-structured-concurrency": 1})
q("symptom", "every request stalls while one async handler is busy reading a file",
  {"conc-blocking-call-in-event-loop": 2})
q("symptom", "requests.exceptions.SSLError: certificate verify failed: unable to get local issuer certificate",
  {"sec-tls-verification": 2, "sec-tls-minimum-version": 1})
q("symptom", "site went down during deploy while ALTER TABLE waited for a lock and every query queued behind it",
  {"db-migration-lock-timeout": 2, "db-expand-contract-migrations": 1, "db-create-index-concurrently": 1, "db-statement-timeouts": 1})
q("symptom", "test passes locally but fails on CI about one run in twenty",
  {"test-flaky-test-triage": 2, "test-no-sleep-in-tests": 1, "test-seed-randomness": 1, "test-isolated-state": 1, "test-no-timing-assertions": 1})
q("symptom", "after deleting a row the list shows the wrong text in the remaining inputs",
  {"fe-stable-list-keys": 2})
q("symptom", "all the lambdas created in my for loop return the value of the last iteration",
  {"py-late-binding-closures": 2})
q("symptom", "the default list argument keeps growing between calls",
  {"py-mutable-default-arguments": 2})
q("symptom", "DeprecationWarning: datetime.datetime.utcnow() is deprecated",
  {"py-aware-datetimes": 2, "db-utc-timestamps": 1})
q("symptom", "duplicate accounts created with the same email even though we check if it exists first",
  {"db-unique-constraints-not-checks": 2, "conc-check-then-act": 2})
q("symptom", "page takes seconds, the log shows hundreds of SELECT statements, one per item",
  {"db-n-plus-one-queries": 2, "perf-batch-round-trips": 1})
q("symptom", "Warning: The `set-output` command is deprecated and will be disabled soon",
  {"ci-github-output-file": 2})
q("symptom", "child process hangs forever right after multiprocessing starts it in a threaded server",
  {"conc-fork-with-threads": 2})

# ---- filter: the intent carries a filter ------------------------------------------------
q("filter", "timeouts", {"db-statement-timeouts": 2, "db-migration-lock-timeout": 2, "db-sqlite-connection-pragmas": 1, "db-pool-sizing": 1},
  {"domain": "databases"})
q("filter", "secrets in workflows", {"ci-pull-request-target": 2, "ci-least-privilege-token": 1}, {"domain": "devops"})
q("filter", "locks", {"conc-lock-ordering": 2, "conc-lease-fencing-tokens": 2, "conc-shared-mutable-state": 1, "conc-optimistic-locking": 1, "conc-fork-with-threads": 1},
  {"domain": "concurrency"})
q("filter", "retries", {"rel-retry-amplification": 2, "rel-idempotent-consumers": 1, "rel-timeouts-on-every-call": 1}, {"severity": "critical"})
q("filter", "exceptions", {"py-no-bare-except": 2, "py-raise-from": 2, "py-exception-hierarchy": 2}, {"domain": "python"})
q("filter", "migrations", {"db-forward-only-migrations": 2}, {"type": "decision"})
q("filter", "logging", {"obs-log-exception-once": 2}, {"type": "anti-pattern"})
q("filter", "react state", {"fe-derived-state": 2, "fe-stable-list-keys": 1, "fe-effect-dependencies": 1, "fe-optimistic-updates": 1},
  {"domain": "frontend"})
q("filter", "deploys", {"rel-rollback-first": 2, "rel-feature-flags-decouple-release": 2, "rel-graceful-shutdown": 1}, {"domain": "reliability"})
q("filter", "untrusted input", {"sec-parameterized-queries": 2, "sec-path-traversal": 2, "sec-ssrf-user-urls": 2, "fe-server-side-validation": 2,
  "sec-safe-deserialization": 1, "sec-subprocess-shell-injection": 1, "agent-untrusted-content": 1, "fe-no-raw-html-injection": 1}, {"severity": "critical"})
q("filter", "capture a lesson", {"agent-capture-lessons": 2, "agent-search-before-capture": 2, "agent-tier-placement": 1, "agent-no-secrets-in-vault": 1},
  {"domain": "agents"})
q("filter", "deprecated", {"sec-tls-minimum-version": 2, "ci-github-output-file": 2, "py-importlib-metadata": 2, "fe-node18-end-of-life": 1, "db-sqlalchemy-2-style": 1},
  {"type": "reference"})
q("filter", "caching", {"api-etag-conditional-requests": 2}, {"tags": ["http"]})

if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    counts = SET.write(out, pack_ids(ROOT / "vault/packs/starter.jsonl"))
    print(dict(counts), len(SET.queries))
