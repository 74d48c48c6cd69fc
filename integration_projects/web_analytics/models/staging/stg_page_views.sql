select
    session_id,
    customer_id,
    page,
    viewed_at,
    cast(viewed_at as date) as event_date
from {{ ref('raw_page_views') }}
where cast(viewed_at as date) <= date '{{ var("run_date") }}'
