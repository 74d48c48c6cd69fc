-- Customers kept current by a merge. Each run sends only the rows updated since the last one;
-- the record index finds the file group of each changed key, so only those file groups get a
-- new file (customers of other countries are left alone). `updated_at` decides between two
-- versions of a customer in one batch (precombine), and `_hoodie_is_deleted` removes one.
{{ config(materialized='incremental', unique_key='customer_id', precombine_field='updated_at',
          partition_by='country_code') }}

select customer_id, name, country_code, plan, updated_at, is_deleted as _hoodie_is_deleted
from {{ ref('stg_customers') }}
{% if is_incremental() %}
where updated_at > (select max(updated_at) from {{ this }})
{% endif %}
