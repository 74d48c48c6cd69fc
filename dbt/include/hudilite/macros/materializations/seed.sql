{#- Seeds keep dbt's seed materialization; their rows are written in one go by the core. -#}
{% macro hudilite__create_csv_table(model, agate_table) %}
  {%- do hudilite_refuse_grants() -%}
  {{ return(adapter.hudilite_load_seed(this, agate_table, model)) }}
{% endmacro %}

{% macro hudilite__reset_csv_table(model, full_refresh, old_relation, agate_table) %}
  {%- do hudilite_refuse_grants() -%}
  {{ return(adapter.hudilite_load_seed(this, agate_table, model)) }}
{% endmacro %}

{% macro hudilite__load_csv_rows(model, agate_table) %}
  {{ return('') }}
{% endmacro %}
