-- A change log of customer_accounts that reads only what changed there since this model's last
-- build: `hudilite_changes` without a start resumes from the checkpoint this model's previous
-- commit kept (as Hudi's streamer does), so each run scans only the new file slices.
{{ config(materialized='incremental', incremental_strategy='append') }}

select _hoodie_commit_time as changed_at_instant, customer_id, country_code, plan, updated_at
from {{ hudilite_changes(ref('customer_accounts')) }}
