select
    c.customer_id,
    c.name,
    c.plan,
    c.region,
    count(v.page) as page_views,
    max(v.viewed_at) as last_seen_at
from {{ ref('customers') }} c
left join {{ ref('page_views') }} v on v.customer_id = c.customer_id
group by c.customer_id, c.name, c.plan, c.region
