-- Every version of every customer (SCD type 2), closed when it changes or is deleted.
{% snapshot customer_history %}
{{ config(unique_key='customer_id', strategy='timestamp', updated_at='updated_at', hard_deletes='invalidate',
          enabled=(target.type == 'hudilite')) }}
select customer_id, name, country_code, plan, updated_at from {{ ref('customer_accounts') }}
{% endsnapshot %}
