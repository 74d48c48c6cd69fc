-- Today against yesterday: customer_accounts now, and as of its previous instant through time
-- travel (`hudilite_as_of`): who is new, who left, whose plan changed.
{%- set instants = hudilite_instants(ref('customer_accounts')) %}
{{ config(materialized='table') }}

with today as (select * from {{ ref('customer_accounts') }}),
yesterday as (
{%- if instants | length > 1 %}
    select * from {{ hudilite_as_of(ref('customer_accounts'), instants[-2]) }}
{%- else %}
    select * from {{ ref('customer_accounts') }} where false
{%- endif %}
)
select
    coalesce(t.customer_id, y.customer_id) as customer_id,
    case when y.customer_id is null then 'new' when t.customer_id is null then 'deleted' else 'plan changed' end as change,
    y.plan as plan_before,
    t.plan as plan_now
from today t
full outer join yesterday y on t.customer_id = y.customer_id
where y.customer_id is null or t.customer_id is null or t.plan <> y.plan
