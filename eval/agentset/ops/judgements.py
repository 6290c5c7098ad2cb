"""The ops / data-engineering dev set: queries and grades over ``pack.jsonl`` (this folder).

    python eval/agentset/ops/judgements.py   # rewrites queries.jsonl and qrels.tsv here

Written by the author of the pack at the same sitting, graded from the entry
texts before any ranking was run (see eval/agentset/README.md). The expired
entry ``k8s-1-25-psp-removal`` (valid until 2024-10-28) is filtered out by
default and so is never judged relevant.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script: `import eval.*`

from eval.judged_queries import JudgedQueries, pack_ids  # noqa: E402

SET = JudgedQueries({"question": "oq", "keyword": "ok", "paraphrase": "op", "symptom": "os", "filter": "of"})
q = SET.q


# question
q("question", "how do I stop a rerun of yesterday's pipeline from double counting rows in the warehouse?",
  {"airflow-idempotent-tasks": 2, "dwh-partition-overwrite": 2, "dwh-merge-dedup": 1, "airflow-no-now-in-tasks": 1})
q("question", "what acks setting should the producer use so we never lose an acknowledged event?",
  {"kafka-idempotent-producer": 2, "kafka-min-insync-replicas": 2})
q("question", "how should I bootstrap a new change data capture connector without missing updates?",
  {"cdc-snapshot-then-stream": 2, "cdc-ordering-per-key": 1, "cdc-replication-slot-bloat": 1})
q("question", "where should we keep the terraform state for a team of six engineers?",
  {"tf-remote-state-locking": 2, "tf-state-secrets": 2})
q("question", "how often should we test that our database backups can actually be restored?",
  {"backup-restore-drills": 2, "backup-3-2-1": 1})
q("question", "what should our worker autoscaler look at when the pods mostly wait on the network?",
  {"k8s-hpa-on-queue-depth": 2, "kafka-consumer-lag-alert": 1})
q("question", "how do I keep the history of a customer's region for last year's reports?",
  {"dwh-slowly-changing-dimensions": 2, "dwh-surrogate-keys": 1})
# keyword
q("keyword", "consumer lag", {"kafka-consumer-lag-alert": 2, "k8s-hpa-on-queue-depth": 1, "kafka-rebalance-storms": 1})
q("keyword", "replication slot", {"cdc-replication-slot-bloat": 2, "ops-disk-full-runbook": 1})
q("keyword", "prevent_destroy", {"tf-prevent-destroy": 2, "tf-moved-blocks": 1})
q("keyword", "broadcast join", {"spark-broadcast-small-tables": 2})
q("keyword", "KRaft", {"kafka-zookeeper-removal": 2})
q("keyword", "schema registry", {"kafka-schema-registry-compat": 2, "dq-contracts-at-source": 1})
# paraphrase
q("paraphrase", "one task runs for an hour while all the others finish quickly",
  {"spark-data-skew-salting": 2, "kafka-partition-key-skew": 1})
q("paraphrase", "find out when a table quietly stopped receiving new data",
  {"dq-freshness-checks": 2, "dq-row-count-anomaly": 1})
q("paraphrase", "renaming a module in infrastructure code should not recreate the database",
  {"tf-moved-blocks": 2, "tf-prevent-destroy": 2})
q("paraphrase", "pulling the whole result set back to the coordinating process crashes it",
  {"spark-collect-driver-oom": 2})
q("paraphrase", "the upstream team changed a column and nobody told us",
  {"dq-contracts-at-source": 2, "dq-fail-loud-on-schema-drift": 2, "kafka-schema-registry-compat": 1})
q("paraphrase", "give the lake fewer, bigger files",
  {"ingest-small-files": 2, "cloud-object-storage-lifecycle": 0})
# symptom
q("symptom", "Last State: Terminated Reason: OOMKilled Exit Code: 137",
  {"k8s-oomkilled-triage": 2, "k8s-resource-requests": 1})
q("symptom", "pod status CrashLoopBackOff after the deploy",
  {"k8s-crashloop-triage": 2})
q("symptom", "primary database disk keeps filling with WAL even though traffic is low",
  {"cdc-replication-slot-bloat": 2, "ops-disk-full-runbook": 2})
q("symptom", "consumer keeps getting kicked out of the group and partitions are reassigned every few minutes",
  {"kafka-rebalance-storms": 2, "kafka-consumer-lag-alert": 1})
q("symptom", "the nightly job ran twice on the night the clocks changed",
  {"ops-cron-timezones": 2, "dwh-timezone-boundaries": 1})
q("symptom", "report totals dropped after adding a join to the customer table",
  {"dq-null-join-keys": 2, "dq-row-count-anomaly": 1})
q("symptom", "clients fail with certificate has expired errors this morning",
  {"ops-certificate-expiry": 2})
# filter
q("filter", "upgrades", {"kafka-zookeeper-removal": 2, "airflow-2-sla-removal": 2, "dq-great-expectations-v1": 2,
  "k8s-pod-disruption-budgets": 1}, {"type": "reference"})
q("filter", "costs", {"cloud-egress-costs": 2, "cloud-object-storage-lifecycle": 2, "cloud-tag-resources-owner": 2},
  {"domain": "cloud"})
q("filter", "secrets", {"tf-state-secrets": 2, "tf-remote-state-locking": 1}, {"severity": "critical"})
q("filter", "duplicates", {"dwh-merge-dedup": 2, "airflow-idempotent-tasks": 1, "ingest-watermark-overlap": 1,
  "kafka-idempotent-producer": 1}, {"severity": "warning"})
q("filter", "scheduling", {"airflow-catchup-false": 2, "airflow-sensor-reschedule": 1, "airflow-no-now-in-tasks": 1,
  "airflow-top-level-code": 1}, {"domain": "orchestration"})

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else here
    counts = SET.write(out, pack_ids(here / "pack.jsonl"))
    print(dict(counts), len(SET.queries))
