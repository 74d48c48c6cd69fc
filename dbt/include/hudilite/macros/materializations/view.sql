{% materialization view, adapter='hudilite' %}
  {%- do hudilite_refuse_grants() -%}
  {%- set result = create_or_replace_view() -%}
  {#- Kept on storage so that a later process (a new `dbt run`) re-creates it. -#}
  {%- do adapter.hudilite_remember_view(this, compiled_code) -%}
  {%- do persist_docs(this, model) -%}
  {{ return(result) }}
{% endmaterialization %}
