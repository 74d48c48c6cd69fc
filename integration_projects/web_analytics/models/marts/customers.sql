-- The latest version of each customer, rebuilt each run (a replacecommit keeps history).
with ranked as (
    select *, row_number() over (partition by customer_id order by updated_at desc) as version_rank
    from {{ ref('stg_customers') }}
)
select r.customer_id, r.name, r.plan, r.updated_at, c.country_name, c.region
from ranked r
left join {{ ref('dim_countries') }} c on r.country_code = c.country_code
where r.version_rank = 1 and not r.is_deleted
