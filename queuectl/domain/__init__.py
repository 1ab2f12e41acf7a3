"""The queue's vocabulary and rules, free of any host or storage: job states and records (models), job
specifications (jobspec), domain errors (errors), retries and their backoff (backoff), queue settings
(settings), schedule rules (recurrence), the clocks time rules read (clock), and what names a database
(dburi). Imported by every other room; it imports none of them."""
