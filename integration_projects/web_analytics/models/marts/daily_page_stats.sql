-- Recompute the last two days and replace exactly those partitions.
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by='event_date') }}

select
    event_date,
    page,
    count(*) as views,
    count(distinct session_id) as sessions
from {{ ref('page_views') }}
{% if is_incremental() %}
where event_date >= date_sub(date '{{ var("run_date") }}', 1)
{% endif %}
group by event_date, page
