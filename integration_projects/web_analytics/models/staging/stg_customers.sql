select customer_id, name, country_code, plan, updated_at, is_deleted
from {{ ref('raw_customers') }}
where cast(updated_at as date) <= date '{{ var("run_date") }}'
