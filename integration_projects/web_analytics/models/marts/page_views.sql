-- Raw events have no natural key: hudilite gives every row an auto-generated record key.
{{ config(materialized='incremental', incremental_strategy='append', partition_by='event_date') }}

select session_id, customer_id, page, viewed_at, event_date
from {{ ref('stg_page_views') }}
{% if is_incremental() %}
where viewed_at > (select coalesce(max(viewed_at), timestamp '1970-01-01') from {{ this }})
{% endif %}
