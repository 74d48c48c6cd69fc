{#- persist_docs: descriptions are kept on storage beside the schema's tables (the adapter's
    catalog), so a later process's `dbt docs generate` shows them. -#}
{% macro hudilite__persist_docs(relation, model, for_relation, for_columns) -%}
  {%- set comment = model.description if (for_relation and config.persist_relation_docs() and model.description) else none -%}
  {%- set column_comments = {} -%}
  {%- if for_columns and config.persist_column_docs() and model.columns -%}
    {%- set existing = adapter.get_columns_in_relation(relation) | map(attribute="name") | list -%}
    {%- set documented = validate_doc_columns(relation, model.columns, existing) -%}
    {%- for name in documented -%}
      {%- do column_comments.update({name: documented[name].get('description')}) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- do adapter.hudilite_persist_docs(relation, comment, column_comments) -%}
{%- endmacro %}
