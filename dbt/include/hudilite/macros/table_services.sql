{#- Table services on demand, for `dbt run-operation`:
      dbt run-operation hudilite_savepoint --args '{model: orders}'
      dbt run-operation hudilite_restore --args '{model: orders, instant: "20261122093000123"}'
    `model` names a table in the target's schema (or pass `schema`); the work is the adapter's. -#}
{% macro hudilite_table_service(model, operation, args={}, schema=none) %}
  {%- set message = adapter.hudilite_table_service(schema or target.schema, model, operation, args) -%}
  {{- log(message, info=true) -}}
  {{- return(message) -}}
{% endmacro %}

{% macro hudilite_savepoint(model, as_of=none, comments='', schema=none) %}
  {{- return(hudilite_table_service(model, 'savepoint', {'as_of': as_of, 'comments': comments}, schema)) -}}
{% endmacro %}

{% macro hudilite_delete_savepoint(model, instant, schema=none) %}
  {{- return(hudilite_table_service(model, 'delete_savepoint', {'instant': instant}, schema)) -}}
{% endmacro %}

{% macro hudilite_restore(model, instant, schema=none) %}
  {{- return(hudilite_table_service(model, 'restore', {'as_of': instant}, schema)) -}}
{% endmacro %}

{% macro hudilite_clean(model, policy=none, retain_commits=none, retain_hours=none, retain_file_versions=none, schema=none) %}
  {{- return(hudilite_table_service(model, 'clean', {'policy': policy, 'retain_commits': retain_commits,
      'retain_hours': retain_hours, 'retain_file_versions': retain_file_versions}, schema)) -}}
{% endmacro %}

{% macro hudilite_archive(model, keep_min_commits=none, keep_max_commits=none, schema=none) %}
  {{- return(hudilite_table_service(model, 'archive', {'keep_min_commits': keep_min_commits,
      'keep_max_commits': keep_max_commits}, schema)) -}}
{% endmacro %}

{% macro hudilite_cluster(model, cluster_by=[], schema=none) %}
  {{- return(hudilite_table_service(model, 'cluster', {'cluster_by': cluster_by}, schema)) -}}
{% endmacro %}
