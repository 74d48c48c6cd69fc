{#- Hudi's meta columns say where a row is stored, not what it holds: a snapshot checking
    'all' columns compares the data columns only. -#}
{% macro hudilite__get_columns_in_query(select_sql) %}
  {{ return(adapter.data_columns(default__get_columns_in_query(select_sql))) }}
{% endmacro %}

{#- The relation's columns as dbt's Column objects, as every adapter's macro returns them (the
    adapter's method: meta columns left out). dbt-spark's returns the rows of `describe extended`,
    which have no `.name`: dbt's snapshot staging then found none of the snapshot's columns and
    wrote hard_deletes='new_record' deletion records with NULL in every source column, never
    closed when the key came back (dbt-labs/dbt-adapters#1401). -#}
{% macro hudilite__get_columns_in_relation(relation) %}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{% endmacro %}
