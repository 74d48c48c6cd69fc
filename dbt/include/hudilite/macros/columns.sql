{#- Hudi's meta columns say where a row is stored, not what it holds: a snapshot checking
    'all' columns compares the data columns only. -#}
{% macro hudilite__get_columns_in_query(select_sql) %}
  {{ return(adapter.data_columns(default__get_columns_in_query(select_sql))) }}
{% endmacro %}
