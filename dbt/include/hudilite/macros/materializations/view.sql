{% materialization view, adapter='hudilite' %}
  {%- do hudilite_refuse_grants() -%}
  {%- set result = create_or_replace_view() -%}
  {#- Kept on storage so that a later process (a new `dbt run`) re-creates it. -#}
  {%- do adapter.hudilite_remember_view(this, compiled_code) -%}
  {%- do persist_docs(this, model) -%}
  {{ return(result) }}
{% endmaterialization %}

{#- A view created outside the view materialization (dbt's test with `store_failures_as: view`)
    is kept on storage too, so that a later process reads the failures. Kept as the statement
    is rendered, just before it runs: a create that fails leaves SQL that fails the same way,
    which the next `dbt test` replaces. -#}
{% macro hudilite__get_create_sql(relation, sql) %}
  {%- if relation.is_view -%}
    {%- do adapter.hudilite_remember_view(relation, sql) -%}
  {%- endif -%}
  {{- default__get_create_sql(relation, sql) -}}
{% endmacro %}
